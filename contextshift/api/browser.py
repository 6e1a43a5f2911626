"""The browser's sign-in (N2): a token becomes a session cookie; cookie-authenticated changes need a CSRF token.

- ``GET /?token=…`` checks the token, sets the session cookie (HttpOnly, SameSite=Strict, Secure over https)
  and redirects to ``/`` without the token in the address (a wrong token: to the sign-in page).
- ``POST /session {"token"}`` does the same for the UI's sign-in page; ``DELETE /session`` signs out.
- A session is a token of kind ``session`` (stored hashed, like API tokens), valid for the app's session length
  (``CONTEXTSHIFT_SESSION_DAYS``, default 30 days); its cookie carries the same ``Max-Age``. It belongs to the
  API token it was opened with: revoking that token ends it at once. ``GET /api/v2/sessions`` lists a user's
  sessions and ``DELETE /api/v2/sessions/{id}`` ends one (routes/users.py).
- CSRF: ``starlette-csrf``'s double-submit cookie. Every page load gets a signed ``contextshift_csrf`` cookie
  the UI's script reads and echoes in ``X-CSRF-Token``; a state-changing request that carries the session
  cookie without a matching header is 403 ``CSRF_FAILED``. Requests with an ``Authorization`` header are
  bearer-authenticated (the session cookie is then ignored) and need no CSRF token.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette_csrf.middleware import CSRFMiddleware

from ..service.errors import ServiceError
from ..storage import Repositories
from ..storage.types import utcnow
from .auth import SESSION_COOKIE, auth_invalid, principal_for
from .deps import database, login_limiter, session_length
from .errors import error_responses, http_headers, http_status

CSRF_COOKIE = "contextshift_csrf"
CSRF_HEADER = "x-csrf-token"
#: Where a failed token login lands: the UI's sign-in page, told why.
SIGN_IN_FAILED = "/#/signin?failed=1"

router = APIRouter(tags=["browser session"], responses=error_responses(400, 403, 413, 415, 422, 429))


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=500, pattern=r"^[!-~]+$")


class SessionOut(BaseModel):
    signed_in: bool
    name: str | None = None


async def start_session(request: Request, secret: str) -> str | None:
    """A new session secret for the user of API token ``secret`` (the session belongs to that token), or None
    when the token is not valid. A valid token is accepted even from a limited address (see ``auth``).

    Raises:
        ServiceError: 429 ``AUTH_RATE_LIMITED``, a wrong token from a client whose tokens failed too often lately.
    """
    limiter, db = login_limiter(request), database(request)
    principal = await principal_for(db, secret)
    if principal is None:
        if limiter is not None:
            await limiter.check(request)
            await limiter.failed(request)
        return None
    async with db.session() as session:
        tokens = Repositories(session).tokens
        await tokens.delete_sessions_before(utcnow() - session_length(request))  # expired ones sign no one in anyway
        issued = await tokens.issue(principal.user_id, name="browser", kind="session", opened_by=principal.token_id)
    return issued.secret


def set_session_cookie(request: Request, response: Response, secret: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
        max_age=int(session_length(request).total_seconds()),  # the session's own end, not the browser's
    )


class TokenLogin:
    """``GET /?token=…``: exchanges the token for a session cookie and drops it from the address."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != "/" or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        if not tokens:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        try:
            session_secret = await start_session(request, tokens[0].strip())
        except ServiceError as error:  # too many failed sign-ins
            body = {"error": {"code": error.code, "message": error.message, "params": error.params}}
            limited = JSONResponse(body, status_code=http_status(error), headers={**headers, **http_headers(error)})
            await limited(scope, receive, send)
            return
        if session_secret is None:
            response = RedirectResponse(SIGN_IN_FAILED, status_code=status.HTTP_303_SEE_OTHER, headers=headers)
        else:
            response = RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER, headers=headers)
            set_session_cookie(request, response, session_secret)
        await response(scope, receive, send)


@router.post("/session", response_model=SessionOut, responses=error_responses(401))
async def sign_in(body: SessionCreate, request: Request) -> Any:
    """Sign the browser in with a token: sets the session cookie."""
    session_secret = await start_session(request, body.token)
    if session_secret is None:
        raise auth_invalid()
    lifetime = session_length(request)
    principal = await principal_for(database(request), session_secret, kind="session", lifetime=lifetime)
    response = JSONResponse({"signed_in": True, "name": principal.name if principal else None})
    set_session_cookie(request, response, session_secret)
    return response


@router.delete("/session", response_model=SessionOut)
async def sign_out(request: Request) -> Any:
    """Sign the browser out: its session ends at once, and the cookie is cleared."""
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        async with database(request).session() as session:
            await Repositories(session).tokens.revoke_secret(secret)
    response = JSONResponse({"signed_in": False, "name": None})
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


_TOKEN_IN_QUERY = re.compile(r"(?i)([?&]token=)[^&\s\"]*")


class _RedactTokens(logging.Filter):
    """The access log shows ``/?token=…`` as ``/?token=[redacted]``: a token never reaches a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_QUERY.sub(r"\1[redacted]", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def quiet_tokens_in_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactTokens) for f in access.filters):
        access.addFilter(_RedactTokens())


#: Headers that carry a token (``x-api-key`` on /v1): such a request is not signed in by the cookie.
_TOKEN_HEADERS = frozenset({b"authorization", b"x-api-key"})


class CsrfGuard(CSRFMiddleware):
    """``starlette-csrf`` with the envelope for its refusal, and no check for bearer-authenticated requests."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and any(name in _TOKEN_HEADERS for name, _ in scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def _get_error_response(self, request: Request) -> Response:
        body = {
            "error": {
                "code": "CSRF_FAILED",
                "message": f"A signed-in browser's change needs the {CSRF_HEADER} header (the {CSRF_COOKIE} cookie).",
                "params": {},
            }
        }
        return JSONResponse(body, status_code=403)


def csrf_options(secret: str) -> dict[str, Any]:
    return {
        "secret": secret,
        "sensitive_cookies": {SESSION_COOKIE},
        "cookie_name": CSRF_COOKIE,
        "header_name": CSRF_HEADER,
        "cookie_samesite": "strict",
        "cookie_httponly": False,  # the UI's script reads it to echo it
    }
