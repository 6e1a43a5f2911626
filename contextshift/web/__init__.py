"""The web UI (V5), served by the same process: static files, no build step, works offline.

``mount_web(app)`` is called last by ``create_app``: it serves ``static/`` at ``/`` (the UI's one route of its
own, importing the bundled examples, is an API route like any other). Paths under ``/api/`` that no route answers
get the API's ``NOT_FOUND`` envelope for every method, so the UI can feature-detect endpoints; a method a path
does not accept gets 405 with the ``Allow`` header (RFC 9110).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import JSONResponse
from starlette.routing import Match, Mount
from starlette.types import Receive, Scope, Send

STATIC = Path(__file__).parent / "static"

__all__ = ["STATIC", "WebFiles", "allowed_methods", "method_not_allowed", "mount_web"]


#: The methods a route may accept (what ``Allow`` can list).
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")
#: What the static files answer (StaticFiles serves GET and HEAD only).
STATIC_METHODS = ("GET", "HEAD")


def _error(
    status: int, code: str, message: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"code": code, "message": message, "params": params or {}}},
        headers=headers,
    )


def method_not_allowed(allowed: Iterable[str]) -> JSONResponse:
    """405 ``METHOD_NOT_ALLOWED`` with the ``Allow`` header RFC 9110 requires (and the same list in params)."""
    methods = sorted(set(allowed))
    return _error(
        405,
        "METHOD_NOT_ALLOWED",
        "This route does not accept that method.",
        {"allowed": methods},
        {"Allow": ", ".join(methods)},
    )


def allowed_methods(scope: Scope) -> set[str]:
    """The methods a route of this path accepts, asked when none accepts this method (the router then falls
    through to us): each method is tried against the app's routes. Empty when no route has this path."""
    router = getattr(scope.get("app"), "router", None)
    routes = [route for route in getattr(router, "routes", []) if not isinstance(route, Mount)]
    return {
        method
        for method in HTTP_METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    }


class WebFiles:
    """The static files. A path a route has, asked with a method no route there accepts, is 405 with ``Allow``;
    ``/api/...`` paths no API route has are 404 ``NOT_FOUND`` for every method (so the UI can feature-detect);
    the files themselves answer GET and HEAD (else 405 with ``Allow``)."""

    def __init__(self, directory: Path) -> None:
        self.files = StaticFiles(directory=directory, html=True, check_dir=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.files(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        allowed = allowed_methods(scope)
        if allowed:
            response = method_not_allowed(allowed)
        elif path == "/api" or path.startswith("/api/"):
            response = _error(404, "NOT_FOUND", "No such route.")
        elif scope.get("method") not in STATIC_METHODS:
            response = method_not_allowed(STATIC_METHODS)
        else:
            await self.files(scope, receive, send)
            return
        await response(scope, receive, send)


def mount_web(app: FastAPI) -> None:
    """The UI at ``/``, mounted after the API routes (so ``/api`` and ``/healthz`` win)."""
    app.mount("/", WebFiles(STATIC), name="web")
