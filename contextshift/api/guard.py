"""No web page can use the service against its user (N2): the checks every request passes first.

- ``Host`` must be one the service answers to: ``localhost``, ``127.0.0.1``, ``[::1]``, the address it is bound
  to, and any named with ``--allowed-host`` / ``CONTEXTSHIFT_ALLOWED_HOSTS`` (comma-separated). Anything else
  is 400 ``HOST_NOT_ALLOWED``: a DNS-rebinding page reaches the service under its own host name.
- A state-changing request (not GET/HEAD/OPTIONS) with an ``Origin`` that is not the service's own (or of an
  allowed extra host) is 403 ``ORIGIN_NOT_ALLOWED``.
- A state-changing request to the API with a body type other than JSON is 415 ``UNSUPPORTED_MEDIA_TYPE``, also
  on body-less routes (``/compact``): no HTML form can post to the API.
- Every response carries ``Content-Security-Policy`` (``default-src 'self'``, no inline script),
  ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Paths whose state-changing requests must be JSON (the API, the OpenAI-compatible endpoint, the sign-in).
JSON_PATHS = ("/api/", "/v1/", "/session")

CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
#: FastAPI's Swagger UI and ReDoc pages load their script from a CDN and start it inline; they show no user data.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src 'self' https://fonts.gstatic.com; img-src 'self' data: https:; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def host_name(value: str) -> str:
    """The host of a ``Host`` header or an allow-list entry, without port or brackets, lower case."""
    value = value.strip().lower().rstrip(".")
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def _refusal(status: int, code: str, message: str, **params: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "params": params}}, status_code=status)


class RequestGuard:
    """The Host, Origin and body-type checks, and the security headers (see the module's doc)."""

    def __init__(self, app: ASGIApp, *, extra_hosts: Iterable[str] = (), bound_host: str | None = None) -> None:
        self.app = app
        self.extra = {host_name(h) for h in extra_hosts if h.strip()}
        self.hosts = set(LOOPBACK_HOSTS) | self.extra
        if bound_host and bound_host not in ("0.0.0.0", "::", ""):
            self.hosts.add(host_name(bound_host))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        csp = DOCS_CSP if path in DOCS_PATHS or path.startswith("/docs/") else CSP

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("content-security-policy", csp)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        refusal = self.check(scope)
        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def check(self, scope: Scope) -> JSONResponse | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if host_name(host) not in self.hosts:
            return _refusal(
                400,
                "HOST_NOT_ALLOWED",
                "This service does not answer to that host name; start it with --allowed-host NAME to add one.",
            )
        method = str(scope.get("method", "GET")).upper()
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return _refusal(403, "ORIGIN_NOT_ALLOWED", "Requests from another site may not change anything here.")
        path = str(scope.get("path", ""))
        content_type = headers.get("content-type")
        if content_type is not None and (path == "/session" or path.startswith(JSON_PATHS)):
            media = content_type.split(";", 1)[0].strip().lower()
            if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
                return _refusal(415, "UNSUPPORTED_MEDIA_TYPE", "Send the request body as application/json.")
        return None

    def origin_allowed(self, origin: str, host: str) -> bool:
        try:
            parts = urlsplit(origin.strip().lower())
        except ValueError:  # e.g. an unclosed "[": not an origin at all
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (sandboxed frames, files) and anything odd
        if parts.netloc == host.strip().lower():
            return True
        return host_name(parts.netloc) in self.extra
