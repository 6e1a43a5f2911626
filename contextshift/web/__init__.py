"""The web UI (V5), served by the same process: static files, no build step, works offline.

``mount_web(app)`` is called last by ``create_app``: it serves ``static/`` at ``/`` (the UI's one route of its
own, importing the bundled examples, is an API route like any other). Paths under ``/api/`` that no route answers
get the API's ``NOT_FOUND`` envelope for every method, so the UI can feature-detect endpoints.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import JSONResponse
from starlette.routing import Match, Mount
from starlette.types import Receive, Scope, Send

STATIC = Path(__file__).parent / "static"

__all__ = ["STATIC", "WebFiles", "mount_web"]


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


def mount_web(app: FastAPI) -> None:
    """The UI at ``/``, mounted after the API routes (so ``/api`` and ``/healthz`` win)."""
    app.mount("/", WebFiles(STATIC), name="web")
