"""Errors of the service layer: a status, a stable code, our own message and params."""

from __future__ import annotations

from typing import Any

from ..core.errors import ContextShiftError


class ServiceError(ContextShiftError):
    """A request the service refuses: a stable ``code``, our own ``message`` and ``params``.

    ``status`` is the HTTP status the API answers with.
    """

    code: str  # instance attribute here; ContextShiftError keeps it on the class

    def __init__(self, status: int, code: str, message: str, **params: Any) -> None:
        super().__init__(message, **params)
        self.status = status
        self.code = code


def not_found(kind: str, ident: str) -> ServiceError:
    """``<KIND>_NOT_FOUND`` (e.g. ``CHAT_NOT_FOUND``) with the id in params."""
    label = kind.replace("_", " ")
    return ServiceError(404, f"{kind.upper()}_NOT_FOUND", f"No {label} with id {ident!r}.", **{f"{kind}_id": ident})
