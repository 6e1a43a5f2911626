"""One error envelope for every failure (V1, N1): ``{"error": {"code", "message", "params"}}``.

Codes are stable ``UPPER_SNAKE`` strings (plus the product documents' dotted ``compaction.model_unavailable``).
Messages are contextshift's own words: no upstream provider body, header or API key ever reaches a response.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.errors import ContextShiftError, TokenBudgetExceeded
from ..providers import ProviderError
from ..service.errors import Refusal, ServiceError
from ..storage import StorageError
from ..storage.database import DatabaseBusy
from .limits import PAYLOAD_TOO_LARGE, BodyTooLarge, too_large_body

log = logging.getLogger("contextshift.api")


class ErrorBody(BaseModel):
    code: str = Field(description="Stable error code, e.g. CHAT_NOT_FOUND")
    message: str
    params: dict[str, Any] = Field(default_factory=dict)


class ErrorEnvelope(BaseModel):
    error: ErrorBody


#: HTTP status of a provider failure: the upstream is at fault (502), or slow (504).
PROVIDER_STATUS = {"PROVIDER_TIMEOUT": 504}

#: The HTTP status of each reason the service refuses (the only place that decides it).
HTTP_STATUS: dict[Refusal, int] = {
    Refusal.INVALID: 400,
    Refusal.UNAUTHENTICATED: 401,
    Refusal.FORBIDDEN: 403,
    Refusal.NOT_FOUND: 404,
    Refusal.CONFLICT: 409,
    Refusal.UNPROCESSABLE: 422,
    Refusal.RATE_LIMITED: 429,
    Refusal.MISCONFIGURED: 500,
    Refusal.UPSTREAM_FAILED: 502,
    Refusal.UPSTREAM_TIMEOUT: 504,
}

#: The challenge a 401 carries (RFC 6750).
WWW_AUTHENTICATE = 'Bearer realm="contextshift"'


def http_status(error: ServiceError) -> int:
    """The HTTP status a refusal answers with."""
    return HTTP_STATUS[error.kind]


def http_headers(error: ServiceError) -> dict[str, str]:
    """The headers a refusal carries: the challenge on 401, ``Retry-After`` when the service says when."""
    headers: dict[str, str] = {}
    if error.kind is Refusal.UNAUTHENTICATED:
        headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    retry_after = error.params.get("retry_after")
    if isinstance(retry_after, int) and error.kind is Refusal.RATE_LIMITED:
        headers["Retry-After"] = str(retry_after)
    return headers


def envelope(
    status: int,
    code: str,
    message: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"code": code, "message": message, "params": params or {}}},
        headers=headers,
    )


def budget_params(error: TokenBudgetExceeded) -> dict[str, Any]:
    params = dict(error.params)
    params.setdefault("prompt_tokens", error.protected_tokens)
    params.setdefault("budget", error.budget)
    return params


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_request: Request, error: ServiceError) -> JSONResponse:
        return envelope(http_status(error), error.code, error.message, error.params, http_headers(error))

    @app.exception_handler(StorageError)
    async def _storage_error(_request: Request, error: StorageError) -> JSONResponse:
        status = 404 if error.code.endswith("_NOT_FOUND") else 422
        return envelope(status, error.code, error.message, {k: str(v) for k, v in error.params.items()})

    @app.exception_handler(TokenBudgetExceeded)
    async def _budget(_request: Request, error: TokenBudgetExceeded) -> JSONResponse:
        return envelope(422, error.code, error.message, budget_params(error))

    @app.exception_handler(DatabaseBusy)
    async def _busy(_request: Request, error: DatabaseBusy) -> JSONResponse:
        return envelope(503, error.code, error.message, headers={"Retry-After": "1"})

    @app.exception_handler(ContextShiftError)
    async def _core(_request: Request, error: ContextShiftError) -> JSONResponse:
        return envelope(422, error.code, error.message, {k: str(v) for k, v in error.params.items()})

    @app.exception_handler(ProviderError)
    async def _provider(_request: Request, error: ProviderError) -> JSONResponse:
        return envelope(PROVIDER_STATUS.get(error.code, 502), error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in error.errors()
        ]
        if any(p["type"] == "json_invalid" for p in problems):
            return envelope(400, "MALFORMED_JSON", "The request body is not valid JSON.", {"errors": problems})
        first = problems[0] if problems else {"loc": [], "msg": "invalid request"}
        where = ".".join(p for p in first["loc"] if p != "body") or "request"
        return envelope(422, "VALIDATION", f"{where}: {first['msg']}", {"errors": problems})

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 413:  # the body limit (limits.py), raised before the body is read
            message, params = too_large_body(error.limit if isinstance(error, BodyTooLarge) else None)
            return envelope(413, PAYLOAD_TOO_LARGE, message, params)
        if error.status_code == 404:
            return envelope(404, "NOT_FOUND", "No such route.")
        if error.status_code == 405:  # Starlette's routes raise it with the Allow header (RFC 9110)
            allow = (error.headers or {}).get("Allow", "")
            methods = sorted({m.strip() for m in allow.split(",") if m.strip()})
            message = "This route does not accept that method."
            return envelope(405, "METHOD_NOT_ALLOWED", message, {"allowed": methods}, dict(error.headers or {}))
        if error.status_code == 400:
            return envelope(400, "MALFORMED_REQUEST", "The request could not be read.")
        return envelope(error.status_code, f"HTTP_{error.status_code}", str(error.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, error: Exception) -> JSONResponse:
        log.error("unexpected %s while serving a request", type(error).__name__)
        return envelope(500, "INTERNAL_ERROR", "Something went wrong inside contextshift.")


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can return."""
    descriptions = {
        400: "Malformed request body, or a Host the service does not answer to (HOST_NOT_ALLOWED)",
        401: "No token (AUTH_REQUIRED) or a token that is not valid (AUTH_INVALID)",
        403: "Not allowed for this user (FORBIDDEN), from another site (ORIGIN_NOT_ALLOWED) or without the "
        "browser's CSRF token (CSRF_FAILED)",
        404: "Not found",
        409: "Conflict",
        413: "The request body is over the size limit (PAYLOAD_TOO_LARGE)",
        415: "The body is not JSON (UNSUPPORTED_MEDIA_TYPE)",
        422: "Validation failed or the prompt does not fit (TOKEN_BUDGET_EXCEEDED)",
        429: "Too many failed sign-ins from this client (AUTH_RATE_LIMITED)",
        500: "Internal error",
        502: "The provider failed (PROVIDER_* codes)",
        504: "The provider timed out",
    }
    return {s: {"model": ErrorEnvelope, "description": descriptions.get(s, "Error")} for s in statuses}
