"""Every failure under ``/v1`` in the error shape its SDK reads (V7), wherever it is decided.

The compatible endpoints answer their own errors in OpenAI's shape (``/v1/chat/completions``, ``/v1/models``)
or Anthropic's (``/v1/messages``). Refusals decided before a route runs (a foreign ``Host`` or ``Origin``, the
body limit, a body that is not JSON, a missing or wrong token, too many failed sign-ins) and the error
handlers' own answers (no such route, a wrong method, an unexpected failure) come in contextshift's envelope
``{"error": {"code", "message", "params"}}``; :class:`CompatErrors`, the outermost middleware, rewrites those
on ``/v1`` paths, keeping the status and headers (``WWW-Authenticate``, ``Retry-After``, the security
headers). So the ``openai`` SDK raises ``AuthenticationError``, ``PermissionDeniedError``, ``NotFoundError``,
``RateLimitError``, ``InternalServerError`` or ``APIStatusError`` (413) with the message, and the
``anthropic`` SDK its own classes (``ContentTooLargeError`` for 413).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("contextshift.api")

OPENAI = "openai"
ANTHROPIC = "anthropic"

#: contextshift codes that OpenAI's SDKs know by another name.
_OPENAI_CODES = {
    "AUTH_REQUIRED": "invalid_api_key",
    "AUTH_INVALID": "invalid_api_key",
    "AUTH_RATE_LIMITED": "rate_limit_exceeded",
    "MODEL_NOT_FOUND": "model_not_found",
    "CONTEXT_LENGTH_EXCEEDED": "context_length_exceeded",
}
#: Anthropic's error ``type`` of each status (its documented list); other statuses by their class.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def dialect_of(path: str) -> str | None:
    """``anthropic`` for ``/v1/messages`` and below, ``openai`` for the rest of ``/v1``, None elsewhere."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return ANTHROPIC
    if path == "/v1" or path.startswith("/v1/"):
        return OPENAI
    return None


def openai_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error"


def openai_body(status: int, message: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": openai_type(status), "code": code, "param": param}}


def anthropic_type(status: int) -> str:
    return _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_body(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    """Anthropic's error object."""
    return {"type": "error", "error": {"type": error_type or anthropic_type(status), "message": message}}


def from_envelope(dialect: str, status: int, envelope: Mapping[str, Any]) -> dict[str, Any]:
    """contextshift's ``{"error": {"code", "message", "params"}}`` in ``dialect``'s shape."""
    error = envelope["error"]
    code, message = str(error.get("code") or f"HTTP_{status}"), str(error.get("message") or "")
    if dialect == ANTHROPIC:
        return anthropic_body(status, message)
    params = error.get("params")
    param = params.get("param") if isinstance(params, Mapping) else None
    param = param if isinstance(param, str) else None
    return openai_body(status, message, _OPENAI_CODES.get(code, code.lower()), param)


def _envelope(body: bytes) -> Mapping[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, Mapping) or value.get("type") == "error":
        return None
    error = value.get("error")
    if isinstance(error, Mapping) and "code" in error and "params" in error and "type" not in error:
        return value
    return None


class CompatErrors:
    """ASGI middleware: contextshift's error envelope on a ``/v1`` path, rewritten in the endpoint's shape."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        dialect = dialect_of(str(scope.get("path", ""))) if scope["type"] == "http" else None
        if dialect is None:
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []
        started = False

        async def rewriting(message: Message) -> None:
            nonlocal held, started
            if message["type"] == "http.response.start":
                started = True
                kind = MutableHeaders(scope=message).get("content-type", "")
                if message["status"] >= 400 and kind.startswith("application/json"):
                    held = message  # an error body: read it whole before anything is sent
                    return
            elif message["type"] == "http.response.body" and held is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                await self._send_rewritten(send, dialect, held, b"".join(chunks))
                held = None
                return
            await send(message)

        try:
            await self.app(scope, receive, rewriting)
        except Exception:
            if not started:  # the unexpected failure in the endpoint's shape; the server still logs it
                log.error("unexpected failure on %s", scope.get("path"))
                body = json.dumps(shaped(dialect, 500, "INTERNAL_ERROR", "Something went wrong inside contextshift."))
                await send(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
            raise

    @staticmethod
    async def _send_rewritten(send: Send, dialect: str, start: Message, body: bytes) -> None:
        envelope = _envelope(body)
        if envelope is not None:
            body = json.dumps(from_envelope(dialect, start["status"], envelope), ensure_ascii=False).encode()
            headers = MutableHeaders(scope=start)
            headers["content-length"] = str(len(body))
        await send(start)
        await send({"type": "http.response.body", "body": body})


def shaped(dialect: str, status: int, code: str, message: str) -> dict[str, Any]:
    """An error decided here, in ``dialect``'s shape."""
    return from_envelope(dialect, status, {"error": {"code": code, "message": message, "params": {}}})


__all__ = [
    "ANTHROPIC",
    "OPENAI",
    "CompatErrors",
    "anthropic_body",
    "anthropic_type",
    "dialect_of",
    "from_envelope",
    "openai_body",
    "shaped",
]
