"""``python -m tarsy_dev.fakes.stand_in_server``: the fake Gemini server as a process.

The local stack runs it as the model when no credentials are set: the labelled
stand-in by default, a demo-cluster scenario's scripted stand-in with
``--scenario``, or any responder with ``--responder module:callable``. It lives
apart from :mod:`tarsy_dev.fakes.fake_gemini` because it needs the scenario
stand-in, which itself builds on the fake.
"""

from __future__ import annotations

import argparse
import importlib

from tarsy_dev.fakes.fake_gemini import (
    STAND_IN_LABEL,
    FakeCall,
    FakeGemini,
    FakeReply,
    Responder,
    StandInResponder,
)
from tarsy_dev.fakes.standin import ScenarioStandIn


def _load_responder(spec: str) -> Responder:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"--responder must be 'module:callable', got {spec!r}")
    target = getattr(importlib.import_module(module_name), attr)
    responder: Responder = target() if isinstance(target, type) else target
    return responder


def without_usage(responder: Responder) -> Responder:
    """The stand-in is not a model: its replies report no tokens, so nothing is costed.

    The local stack prices calls by the model it names (Gemini's prices); a
    stand-in that reported tokens would show a cost no model ever charged.
    """

    def answer(call: FakeCall) -> FakeReply:
        return responder(call).model_copy(
            update={"input_tokens": 0, "output_tokens": 0, "thinking_tokens": 0}
        )

    return answer


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description="A local fake of the Gemini REST API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--responder", help="module:callable answering calls (default: the labelled stand-in)"
    )
    parser.add_argument(
        "--scenario", help="follow this demo-cluster scenario's playbook (a scripted stand-in)"
    )
    args = parser.parse_args(argv)
    responder = _load_responder(args.responder) if args.responder else None
    if args.scenario:
        responder = ScenarioStandIn(args.scenario)
    fake = FakeGemini(
        host=args.host, port=args.port, responder=without_usage(responder or StandInResponder())
    )
    print(f"fake-gemini listening on {fake.url} {STAND_IN_LABEL}", flush=True)
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()


if __name__ == "__main__":
    main()
