"""From raw request bytes to a validated payload model, with the right error.

Senders post JSON (SNS as ``text/plain``, which is why the content type is the
route's business, not this module's). Two failures are told apart because
they mean different things to a sender: bytes that are not JSON at all are a
400; JSON of the wrong shape is a 422 whose ``details`` name every offending
field, so whoever configured the sender can see what to fix.

``json.loads`` has sharp edges on hostile input (``RecursionError`` around a
thousand levels of nesting, ``ValueError`` on integers of more than 4,300
digits, and it accepts the non-JSON constants ``NaN`` and ``Infinity``); all
are reported as malformed bodies. Valid JSON that Firestore would refuse
later — integers outside int64, strings holding lone surrogates (``"\ud800"``)
— is refused now, as a 422 naming the field, so a session is never half
written.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from tarsy._pydantic import DeferredModel
from tarsy.intake.sources.errors import (
    MalformedBodyError,
    PayloadShapeError,
    problem,
    problems_from,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


class Tolerant(DeferredModel):
    """Base of every sender payload model: unknown fields are accepted and ignored.

    Senders add fields over time; a new field must not turn their
    notifications into 422s. Strictness lives in the field types instead.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)


def parse_json(body: bytes | str, *, prefix: str = "") -> Any:
    """Decode a JSON body.

    Args:
        body: The raw request body (UTF-8) or an already decoded string.
        prefix: Dotted path of this document inside its envelope, for errors.

    Returns:
        The decoded JSON value.

    Raises:
        MalformedBodyError: The body is not UTF-8 JSON (400).
        PayloadShapeError: It holds a value Firestore cannot store (422).
    """
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except UnicodeDecodeError as e:
        raise MalformedBodyError(f"body is not UTF-8: {e}") from e
    except RecursionError as e:
        raise MalformedBodyError("malformed JSON: nested too deeply") from e
    except ValueError as e:  # JSONDecodeError, over-long integers, NaN/Infinity
        raise MalformedBodyError(f"malformed JSON: {e}") from e
    check_storable(value, prefix=prefix)
    return value


def _unstorable(field: str, message: str) -> PayloadShapeError:
    return PayloadShapeError(
        "the body holds a value that cannot be stored", [problem(field, message, "unstorable")]
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _storable_problem(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return "integer outside the 64-bit range"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "string holds a lone surrogate (not valid Unicode)"
    return None


def check_storable(value: Any, *, prefix: str = "") -> None:
    """Refuse decoded JSON that Firestore cannot store.

    The walk is iterative: ``json.loads`` already bounds the depth, and a
    recursive walk would hit the recursion limit first.

    Args:
        value: Decoded JSON.
        prefix: Dotted path of ``value`` inside its envelope, for errors.

    Raises:
        PayloadShapeError: An integer outside int64 or a string (value or key)
            with a lone surrogate, naming its dotted path (422).
    """
    stack: list[tuple[str, Any]] = [(prefix, value)]
    while stack:
        path, item = stack.pop()
        children: list[tuple[str, Any]] = []
        if isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                if (problem_text := _storable_problem(key)) is not None:
                    raise _unstorable(child_path, f"key: {problem_text}")
                children.append((child_path, child))
        elif isinstance(item, list):
            children = [(f"{path}.{i}" if path else str(i), child) for i, child in enumerate(item)]
        elif (problem_text := _storable_problem(item)) is not None:
            raise _unstorable(path or "(body)", problem_text)
        stack.extend(reversed(children))


def require_object(payload: Any, what: str, *, field: str = "(body)") -> dict[str, Any]:
    """Return ``payload`` if it is a JSON object.

    Args:
        payload: The decoded JSON.
        what: What the payload should be, for the message (e.g. "Alertmanager webhook").
        field: Where the payload sits, for the details entry.

    Returns:
        The payload, typed as a dict.

    Raises:
        PayloadShapeError: It is not an object (422).
    """
    if not isinstance(payload, dict):
        raise PayloadShapeError.single(
            f"{what} must be a JSON object", field, "expected an object", "dict_type"
        )
    return payload


def validate_payload(model: type[ModelT], payload: Any, what: str, *, prefix: str = "") -> ModelT:
    """Validate decoded JSON against a payload model.

    Args:
        model: The pydantic model of the documented shape.
        payload: The decoded JSON.
        what: The payload's name for the message.
        prefix: Dotted path of the payload inside its envelope, if any.

    Returns:
        The validated model.

    Raises:
        PayloadShapeError: The payload is not an object or does not match (422).
    """
    require_object(payload, what, field=prefix or "(body)")
    try:
        return model.model_validate(payload)
    except ValidationError as e:
        raise PayloadShapeError(
            f"{what} does not match its documented shape", problems_from(e, prefix=prefix)
        ) from e


def shape_problem(what: str, field: str, message: str, kind: str) -> PayloadShapeError:
    """Build (not raise) a 422 for one field, for checks a model cannot express.

    Args:
        what: The payload's name.
        field: Dotted path of the field.
        message: What is wrong with it.
        kind: Machine-readable error type.

    Returns:
        The error.
    """
    return PayloadShapeError(
        f"{what} does not match its documented shape", [problem(field, message, kind)]
    )
