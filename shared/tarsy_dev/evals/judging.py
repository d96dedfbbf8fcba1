"""The LLM judge of :mod:`tarsy.agent.scoring`, on an evaluated session (real models only)."""

from __future__ import annotations

from collections.abc import Sequence

from google import genai
from google.genai import types

from tarsy.agent.scoring import JudgeInput, SessionScore, build_judge_prompt, parse_judge_reply
from tarsy.settings import Settings
from tarsy_dev.client import SessionView


def _client(settings: Settings) -> genai.Client:
    http_options = types.HttpOptions(base_url=settings.gemini_base_url)
    if settings.gemini_api_key is not None:
        return genai.Client(
            api_key=settings.gemini_api_key.get_secret_value(), http_options=http_options
        )
    return genai.Client(
        vertexai=True,
        project=settings.vertex_project or settings.project_id,
        location=settings.vertex_location,
        http_options=http_options,
    )


def judge_session(
    view: SessionView, *, model: str, settings: Settings, available_tools: Sequence[str]
) -> SessionScore:
    """Ask ``model`` to score a finished session.

    Args:
        view: The session, as the api serves it.
        model: The judge model (a Gemini model name).
        settings: Credentials and endpoint (``GEMINI_API_KEY``/``GEMINI_BASE_URL`` or Vertex AI).
        available_tools: The tools the agents were offered (``server.tool``).

    Returns:
        The judge's score.

    Raises:
        tarsy.agent.scoring.JudgeReplyError: The judge did not answer with a valid score.
        google.genai.errors.APIError: The call failed.
    """
    prompt = build_judge_prompt(
        JudgeInput.from_session_view(view.model_dump(mode="json"), available_tools)
    )
    # Keep the client referenced for the whole call: collecting it closes its HTTP client.
    client = _client(settings)
    try:
        response = client.models.generate_content(
            model=model,
            contents=prompt.user,
            config=types.GenerateContentConfig(
                system_instruction=prompt.system,
                temperature=0.0,
                response_mime_type="application/json",
            ),
        )
    finally:
        client.close()
    return parse_judge_reply(response.text or "", prompt_hash=prompt.prompt_hash)
