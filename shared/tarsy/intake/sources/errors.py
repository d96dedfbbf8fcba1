"""Errors of the alert-source adapters, as subclasses of the product's own tree.

The ingest route already renders any :class:`~tarsy.errors.InputError` as
``{"error": {"status", "message", "details"?}}`` with its ``status``, so each
rejection here only has to pick the right class:

* :class:`MalformedBodyError` (400): the body is not JSON at all.
* :class:`PayloadShapeError` (422): JSON, but not the shape the sender documents;
  ``details`` lists ``{"field", "message", "type"}`` entries, one per problem.
* :class:`SignatureError` (401): a signature that does not verify.
* :class:`CredentialsError` (401): an API key that is malformed or wrong, and its
  subclass :class:`BasicAuthRequired` when none was sent. Both carry the
  ``WWW-Authenticate`` challenge to answer with, because AWS SNS sends the
  basic-auth credentials of its subscription URL only after a ``401`` with a
  ``Basic`` challenge (it never sends them unprompted).
* :class:`ForbiddenSourceError` (403): a correctly signed message from a sender
  this deployment does not accept (an SNS topic outside the allow-list).
* :class:`CertificateUnavailableError` (503): SNS's signing certificate could not
  be fetched; the sender's retry may succeed, so the answer invites one.

Nothing here is ever 413: a notification with too many alerts is truncated
(see :mod:`tarsy.intake.sources.limits`), never refused.
"""

from __future__ import annotations

from pydantic import ValidationError

from tarsy.errors import AuthError, InputError

FieldProblem = dict[str, str]
"""One entry of a 422 ``details`` list: ``{"field", "message", "type"}``."""


def problem(field: str, message: str, kind: str) -> FieldProblem:
    """Return one ``details`` entry.

    Args:
        field: Dotted path of the offending field (``(body)`` for the whole body).
        message: What is wrong, for a person.
        kind: A short machine-readable error type (pydantic's where it applies).

    Returns:
        The entry as the ingest route renders it.
    """
    return {"field": field, "message": message, "type": kind}


def problems_from(error: ValidationError, *, prefix: str = "") -> list[FieldProblem]:
    """Turn a pydantic ``ValidationError`` into ``details`` entries.

    Args:
        error: The validation error.
        prefix: Dotted path to prepend (for a model validated inside another
            document, such as the CloudWatch alarm inside an SNS ``Message``).

    Returns:
        One entry per error, the field written as a dotted path.
    """
    entries = []
    for err in error.errors():
        path = ".".join(str(part) for part in err["loc"])
        field = ".".join(p for p in (prefix, path) if p) or "(body)"
        entries.append(problem(field, err["msg"], err["type"]))
    return entries


class MalformedBodyError(InputError):
    """The body is not JSON (or not decodable as UTF-8)."""

    status = 400


class PayloadShapeError(InputError):
    """The JSON does not have the documented shape; ``details`` names each field."""

    status = 422

    def __init__(self, message: str, details: list[FieldProblem]) -> None:
        super().__init__(message, details=details)
        self.problems = details

    @classmethod
    def single(cls, message: str, field: str, detail: str, kind: str) -> PayloadShapeError:
        """Build the error for one offending field.

        Args:
            message: The overall message.
            field: Dotted path of the field.
            detail: What is wrong with it.
            kind: Machine-readable error type.

        Returns:
            The error, not raised.
        """
        return cls(message, [problem(field, detail, kind)])

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the offending fields, in order."""
        return [entry["field"] for entry in self.problems]


class SignatureError(AuthError):
    """A signature was presented and does not verify (401)."""


BASIC_CHALLENGE = 'Basic realm="tarsy", charset="UTF-8"'
"""The ``WWW-Authenticate`` value that makes SNS (and browsers) send basic auth."""


class CredentialsError(AuthError):
    """A malformed or wrong API key (401); answer with :attr:`challenge` as ``WWW-Authenticate``."""

    challenge = BASIC_CHALLENGE


class BasicAuthRequired(CredentialsError):
    """No API key at all (401); answer with :attr:`challenge` as ``WWW-Authenticate``."""


class ForbiddenSourceError(AuthError):
    """An authentic message from a sender this deployment does not accept (403)."""

    status = 403


class CertificateUnavailableError(InputError):
    """The signing certificate could not be fetched or read; the sender should retry (503)."""

    status = 503
