"""Who is calling (N2). :class:`AuthMiddleware` signs in every request under ``/api/`` (and ``/v1/``) before
anything else reads it, whatever route (or none) answers it, so no route can be left open by mistake.

A request signs in with ``Authorization: Bearer <token>`` (on ``/v1`` also ``x-api-key: <token>``, as the
``anthropic`` SDK sends it) or, without either, the browser's session cookie (whose changes the CSRF check
guards). A missing token is 401 ``AUTH_REQUIRED``, a wrong, revoked or
disabled user's token 401 ``AUTH_INVALID``, both in the usual envelope and with ``WWW-Authenticate: Bearer``.
Routes take the signed-in user as ``Caller`` (``principal: Caller``); admin-only routes take ``Admin`` (403
``FORBIDDEN`` for others). The :func:`caller` dependency is on every API route, which also puts the bearer
scheme in the OpenAPI document.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..service.accounts import SESSION_LIFETIME
from ..service.errors import Refusal, ServiceError
from ..storage import Database, Repositories
from ..storage.database import DatabaseBusy
from ..storage.repositories.users import hash_secret, stale
from ..storage.tables import ApiTokenRow, UserRow
from ..storage.types import utcnow
from .deps import database, login_limiter, session_length
from .errors import error_response, http_headers, http_status

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="A contextshift token: printed at first start, made by `contextshift token create` "
    "or POST /api/v2/tokens.",
)

#: The browser's session cookie (see ``browser.py``); a session lasts ``SESSION_LIFETIME``.
SESSION_COOKIE = "contextshift_session"
#: Paths that need a signed-in user: the API and the OpenAI-compatible endpoint.
PROTECTED_PREFIXES = ("/api/", "/v1/")
#: The header the ``anthropic`` SDK sends its API key in (a contextshift token, on ``/v1`` only).
API_KEY_HEADER = "x-api-key"


@dataclass(frozen=True)
class Principal:
    """The signed-in user of a request, and the token they used."""

    user_id: str
    name: str
    role: str
    token_id: str
    #: V7: the strategy of the token used (``/v1`` fits with it when a request names none).
    context_strategy: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class AuthError(ServiceError):
    """401 with the challenge header."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(Refusal.UNAUTHENTICATED, code, message)


def session_lifetime(days: float | None = None) -> timedelta:
    """How long a browser session lasts (its cookie's ``Max-Age`` too): ``days`` (``CONTEXTSHIFT_SESSION_DAYS``,
    checked by ``Settings``), else ``SESSION_LIFETIME`` (30 days)."""
    return SESSION_LIFETIME if days is None else timedelta(days=days)


def auth_required() -> AuthError:
    return AuthError("AUTH_REQUIRED", "Sign in: send Authorization: Bearer <token>.")


def auth_invalid() -> AuthError:
    return AuthError("AUTH_INVALID", "The token is not valid (wrong, revoked, or its user is disabled).")


async def principal_for(
    db: Database, secret: str, kind: str = "api", lifetime: timedelta = SESSION_LIFETIME
) -> Principal | None:
    """The principal a secret stands for, or None when it is not a valid token of that ``kind`` (``api`` for
    bearer tokens, ``session`` for the browser's cookie, which ends ``lifetime`` after it was opened) of an
    enabled user."""
    key = ("sign-in", hash_secret(secret))
    found: tuple[ApiTokenRow, UserRow] | None = db.reads.get(key)  # kept until a write to tokens or users
    if found is None:
        stamp = db.reads.stamp("api_tokens", "users")
        async with db.session(write=False) as session:  # a read: no turn at the write lock (N5)
            found = await Repositories(session).tokens.find(secret, touch=False)
        if found is None:
            return None
        db.reads.put(key, found, stamp)
    token, user = found
    if stale(token):  # at most once a minute per token
        async with db.session() as session:
            await Repositories(session).tokens.touch(token.id)
    if user.disabled or token.kind != kind:
        return None
    if kind == "session" and utcnow() - token.created_at > lifetime:
        return None
    return Principal(
        user_id=user.id, name=user.name, role=user.role, token_id=token.id, context_strategy=token.context_strategy
    )


def bearer_secret(header: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None when the header is not that."""
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value or " " in value:
        return None
    return value


def compat_path(path: str) -> bool:
    """The compatible endpoints (V7), where ``x-api-key`` signs in too."""
    return path == "/v1" or path.startswith("/v1/")


def protected(path: str) -> bool:
    return path in ("/api", "/v1") or path.startswith(PROTECTED_PREFIXES)


class AuthMiddleware:
    """Signs in each request to a protected path (or answers 401); the principal goes to ``request.state``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not protected(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            principal = await self.authenticate(request)
        except ServiceError as error:  # AUTH_REQUIRED, AUTH_INVALID, AUTH_RATE_LIMITED
            # (on /v1, compat_errors gives it the shape the endpoint's SDKs read)
            body: dict[str, Any] = {"error": {"code": error.code, "message": error.message, "params": error.params}}
            response = JSONResponse(body, status_code=http_status(error), headers=http_headers(error))
            await response(scope, receive, send)
            return
        except DatabaseBusy as error:  # the token could not be looked up: 503, not the 500 of an escaped error
            await error_response(error)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)

    async def authenticate(self, request: Request) -> Principal:
        header = request.headers.get("authorization")
        # V7: the anthropic SDK sends its key as x-api-key (the openai SDK as a bearer token)
        api_key = request.headers.get(API_KEY_HEADER) if header is None and compat_path(request.url.path) else None
        cookie = request.cookies.get(SESSION_COOKIE) if header is None and api_key is None else None
        if header is None and api_key is None and not cookie:
            raise auth_required()
        limiter = login_limiter(request)
        secret = bearer_secret(header) if header is not None else (api_key.strip() or None) if api_key else cookie
        found = None
        if secret is not None:
            kind = "session" if header is None and api_key is None else "api"
            found = await principal_for(database(request), secret, kind=kind, lifetime=session_length(request))
        if found is None:
            if limiter is not None:
                await limiter.check(request)  # a limited client is told when to try again, uncounted
                await limiter.failed(request)
            raise auth_invalid()
        # a valid token is accepted even from a limited address (N2): guessing one of 256 random bits is
        # hopeless, so the limit only slows guessing; refusing valid tokens would let one noisy client behind
        # a shared address lock everyone out (docs/limits.md)
        return found


async def caller(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> Principal:
    """The dependency every API route has: the user :class:`AuthMiddleware` signed in (401 if none did)."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise auth_required()
    return principal


Caller = Annotated[Principal, Depends(caller)]


def forbidden(message: str = "Only an admin may do this.") -> ServiceError:
    return ServiceError(Refusal.FORBIDDEN, "FORBIDDEN", message)


async def require_admin(principal: Caller) -> Principal:
    if not principal.is_admin:
        raise forbidden()
    return principal


Admin = Annotated[Principal, Depends(require_admin)]
