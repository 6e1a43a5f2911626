"""Errors of the service layer: a status, a stable code, our own message and params."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    def __init__(self, status: int, code: str, message: str, **params: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.params = params


def not_found(kind: str, ident: str) -> ServiceError:
    """``<KIND>_NOT_FOUND`` (e.g. ``CHAT_NOT_FOUND``) with the id in params."""
    label = kind.replace("_", " ")
    return ServiceError(404, f"{kind.upper()}_NOT_FOUND", f"No {label} with id {ident!r}.", **{f"{kind}_id": ident})
