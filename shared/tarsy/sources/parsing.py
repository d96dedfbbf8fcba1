"""From raw request bytes to a validated payload model, with the right error.

Senders post JSON (SNS as ``text/plain``, which is why the content type is the
route's business, not this module's). Two failures are told apart because
they mean different things to a sender: bytes that are not JSON at all are a
400; JSON of the wrong shape is a 422 whose ``details`` name every offending
field, so whoever configured the sender can see what to fix.

``json.loads`` has sharp edges on hostile input (``RecursionError`` around a
thousand levels of nesting, ``ValueError`` on integers of more than 4,300
digits); both are caught and reported as malformed bodies.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tarsy.sources.errors import MalformedBodyError, PayloadShapeError, problem, problems_from

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_json(body: bytes | str) -> Any:
    """Decode a JSON body.

    Args:
        body: The raw request body (UTF-8) or an already decoded string.

    Returns:
        The decoded JSON value.

    Raises:
        MalformedBodyError: The body is not UTF-8 JSON (400).
    """
    try:
        return json.loads(body)
    except UnicodeDecodeError as e:
        raise MalformedBodyError(f"body is not UTF-8: {e}") from e
    except RecursionError as e:
        raise MalformedBodyError("malformed JSON: nested too deeply") from e
    except ValueError as e:  # JSONDecodeError and over-long integers
        raise MalformedBodyError(f"malformed JSON: {e}") from e


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
