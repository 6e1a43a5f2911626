"""The web UI (V5), served by the same process: static files, no build step, works offline."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def mount_web(app: FastAPI) -> None:
    """Serve the UI at ``/`` (after the API routes, so ``/api`` and ``/healthz`` win)."""
    app.mount("/", StaticFiles(directory=STATIC, html=True, check_dir=False), name="web")
