"""Errors of the service layer: why it refuses (a :class:`Refusal`), a stable code, our own message and params.

The service says *why* it refuses; the API alone decides how that reads on the wire (the HTTP status, headers
such as ``Retry-After``): see ``api.errors.http_status``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ..core.errors import ContextShiftError


class Refusal(StrEnum):
    """Why the service refuses a request."""

    #: The request itself is malformed or contradicts itself.
    INVALID = "invalid"
    #: No valid credentials came with it.
    UNAUTHENTICATED = "unauthenticated"
    #: The caller may not do this.
    FORBIDDEN = "forbidden"
    #: What it names does not exist (or is not the caller's).
    NOT_FOUND = "not_found"
    #: It conflicts with the current state (another turn runs, the last admin, a taken name).
    CONFLICT = "conflict"
    #: It is well-formed but a rule forbids it (no model configured, a disabled provider).
    UNPROCESSABLE = "unprocessable"
    #: Too many attempts; ``params["retry_after"]`` says when to try again.
    RATE_LIMITED = "rate_limited"
    #: The provider failed to answer.
    UPSTREAM_FAILED = "upstream_failed"
    #: The provider did not answer in time.
    UPSTREAM_TIMEOUT = "upstream_timeout"
    #: The service is set up wrongly (an operator's error, not the caller's).
    MISCONFIGURED = "misconfigured"


class ServiceError(ContextShiftError):
    """A request the service refuses: ``kind`` (why), a stable ``code``, our own ``message`` and ``params``.

    Args:
        kind: why it is refused; the API maps it to an HTTP status.
        code: the stable ``UPPER_SNAKE`` code.
        message: contextshift's own words (never an upstream body).
        **params: what explains it (ids, fields, limits).
    """

    code: str  # instance attribute here; ContextShiftError keeps it on the class

    def __init__(self, kind: Refusal, code: str, message: str, **params: Any) -> None:
        super().__init__(message, **params)
        self.kind = kind
        self.code = code


def not_found(kind: str, ident: str) -> ServiceError:
    """``<KIND>_NOT_FOUND`` (e.g. ``CHAT_NOT_FOUND``) with the id in params."""
    label = kind.replace("_", " ")
    return ServiceError(
        Refusal.NOT_FOUND, f"{kind.upper()}_NOT_FOUND", f"No {label} with id {ident!r}.", **{f"{kind}_id": ident}
    )
