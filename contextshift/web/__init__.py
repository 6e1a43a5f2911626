"""The web UI (V5), served by the same process: static files, no build step, works offline.

``include_web_api(api)`` adds the UI's own small API (importing the bundled example conversations) to the
service's API router; ``mount_web(app)``, called last by ``create_app``, serves ``static/`` at ``/``.
Paths under ``/api/`` that no route answers get the API's ``NOT_FOUND`` envelope for every method, so the UI
can feature-detect endpoints.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import JSONResponse
from starlette.routing import Match, Mount
from starlette.types import Receive, Scope, Send

from .examples import router as examples_router

STATIC = Path(__file__).parent / "static"

__all__ = ["STATIC", "WebFiles", "include_web_api", "mount_web"]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message, "params": {}}})


def _method_mismatch(scope: Scope) -> bool:
    """True when an API route has this path but not this method (the router then falls through to us)."""
    router = getattr(scope.get("app"), "router", None)
    for route in getattr(router, "routes", []):
        if isinstance(route, Mount):
            continue
        match, _ = route.matches(scope)
        if match is Match.PARTIAL:
            return True
    return False


class WebFiles:
    """The static files. ``/api/...`` paths no API route answers get the API's envelope instead: 405 when the
    path exists with other methods, else 404 ``NOT_FOUND`` for every method (so the UI can feature-detect)."""

    def __init__(self, directory: Path) -> None:
        self.files = StaticFiles(directory=directory, html=True, check_dir=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and (path == "/api" or path.startswith("/api/")):
            if _method_mismatch(scope):
                response = _error(405, "METHOD_NOT_ALLOWED", "This route does not accept that method.")
            else:
                response = _error(404, "NOT_FOUND", "No such route.")
            await response(scope, receive, send)
            return
        await self.files(scope, receive, send)


def include_web_api(api: APIRouter) -> None:
    """The UI's own API routes (importing the bundled examples), added to the service's API router, so they
    share its prefix, its authentication and its documented errors."""
    api.include_router(examples_router)


def mount_web(app: FastAPI) -> None:
    """The UI at ``/``, mounted last (after the API routes, so ``/api`` and ``/healthz`` win)."""
    app.mount("/", WebFiles(STATIC), name="web")
