"""One error envelope for every failure (V1, N1): ``{"error": {"code", "message", "params"}}``.

Codes are stable ``UPPER_SNAKE`` strings (plus the product documents' dotted ``compaction.model_unavailable``),
each listed with its status in :mod:`.error_codes`. Messages are contextshift's own words: no upstream provider
body, header or API key ever reaches a response.
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
from ..storage import NameTaken, NotFound
from ..storage.database import DatabaseBusy
from .error_codes import ERROR_CODES, codes_of, reason_phrase
from .limits import PAYLOAD_TOO_LARGE, BodyRefused, BodyTooLarge, too_large_body

log = logging.getLogger("contextshift.api")


def _code_table() -> str:
    lines = [f"- `{code}` ({entry.status}): {entry.meaning}" for code, entry in ERROR_CODES.items()]
    return "Stable error code, one of:\n" + "\n".join(lines)


class ErrorBody(BaseModel):
    code: str = Field(description=_code_table(), json_schema_extra={"enum": list(ERROR_CODES)})
    message: str = Field(description="contextshift's own words (never a provider's)")
    params: dict[str, Any] = Field(default_factory=dict, description="What the message is about: ids, fields, limits")


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


#: A busy database: 503, and the seconds a client waits before it tries again (its ``Retry-After``).
BUSY_STATUS = 503
BUSY_RETRY_AFTER = 1


def error_status(error: ContextShiftError) -> int:
    """The HTTP status one of contextshift's own errors answers with."""
    if isinstance(error, ServiceError):
        return http_status(error)
    if isinstance(error, DatabaseBusy):
        return BUSY_STATUS
    if isinstance(error, BodyTooLarge):
        return 413
    if isinstance(error, BodyRefused):
        return error.status
    if isinstance(error, ProviderError):
        return PROVIDER_STATUS.get(error.code, 502)
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, NameTaken):  # a conflict with what is stored, like the service's Refusal.CONFLICT
        return HTTP_STATUS[Refusal.CONFLICT]
    return 422  # any other error of the library or the storage: the request asks for what cannot be done


def error_response(error: ContextShiftError) -> JSONResponse:
    """The envelope of one of contextshift's own errors, wherever it was raised (a route or a middleware)."""
    status = error_status(error)
    if isinstance(error, ServiceError):
        return envelope(status, error.code, error.message, error.params, http_headers(error))
    if isinstance(error, DatabaseBusy):
        return envelope(status, error.code, error.message, headers={"Retry-After": str(BUSY_RETRY_AFTER)})
    if isinstance(error, ProviderError):  # its params may hold what the provider said: none of it goes out
        return envelope(status, error.code, error.message)
    if isinstance(error, TokenBudgetExceeded):
        return envelope(status, error.code, error.message, budget_params(error))
    if isinstance(error, (BodyTooLarge, BodyRefused)):  # their params are numbers
        return envelope(status, error.code, error.message, dict(error.params))
    return envelope(status, error.code, error.message, {k: str(v) for k, v in error.params.items()})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ContextShiftError)
    async def _contextshift(_request: Request, error: ContextShiftError) -> JSONResponse:
        return error_response(error)

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
        if error.status_code == 413:  # the framework's own (limits.py raises BodyTooLarge, a ContextShiftError)
            message, params = too_large_body(None)
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
        # contextshift raises none itself (a refusal is a ServiceError); Starlette's static files give 401 for a
        # file the process may not read: the service's fault, with a code the document lists
        log.error("HTTP %d from the framework while serving a request", error.status_code)
        return envelope(500, "INTERNAL_ERROR", "Something went wrong inside contextshift.")

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, error: Exception) -> JSONResponse:
        if isinstance(error, ContextShiftError):  # raised in a middleware, outside the handlers above
            return error_response(error)
        log.error("unexpected %s while serving a request", type(error).__name__)
        return envelope(500, "INTERNAL_ERROR", "Something went wrong inside contextshift.")


def _header(description: str) -> dict[str, Any]:
    return {"description": description, "required": True, "schema": {"type": "string"}}


#: The headers some error statuses always carry (RFC 6750's challenge; RFC 9110's Retry-After).
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": _header(f"The challenge: {WWW_AUTHENTICATE}")},
    429: {"Retry-After": _header("Seconds until this client may try again")},
    503: {"Retry-After": _header("Seconds until the request is worth trying again")},
}


def error_response_entry(status: int) -> dict[str, Any]:
    """The OpenAPI response of an error status: the envelope, the codes it can carry, its headers."""
    codes = ", ".join(f"`{code}`" for code in codes_of(status))
    entry: dict[str, Any] = {"model": ErrorEnvelope, "description": f"{reason_phrase(status)}: {codes}"}
    if status in ERROR_HEADERS:
        entry["headers"] = ERROR_HEADERS[status]
    return entry


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can return (besides those every route can:
    see :mod:`.refusals`)."""
    return {status: error_response_entry(status) for status in statuses}
