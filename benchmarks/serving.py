"""How the benchmarks serve the app: ``create_app`` under uvicorn on a loopback port, in a daemon thread.

One helper for every benchmark that starts the service (``service``, ``load``, ``endpoint``); they sign in
with ``signin.BENCH_TOKEN``.
"""

from __future__ import annotations

import contextlib
import cProfile
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn

from tests.fakes.server import listening_socket


class Service:
    """``create_app(url)`` under uvicorn on 127.0.0.1 (port chosen by the OS) in a background thread."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.profiler: cProfile.Profile | None = None  # set to profile the server thread (see ``profiling``)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, sock: socket.socket) -> None:
        assert self._server is not None
        self._server.run(sockets=[sock])

    def __enter__(self) -> Service:
        sock = listening_socket()
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._asgi,
            log_config=None,
            access_log=False,
            lifespan="on",
            loop="asyncio",
            interface="asgi3",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="contextshift-service", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the service did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The app, plus ``GET /__bench/profile/on|off``: the benchmark's switch for :meth:`profiling`."""
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/__bench/profile/"):
            if self.profiler is not None:
                (self.profiler.enable if path.endswith("/on") else self.profiler.disable)()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)

    @contextlib.contextmanager
    def profiling(self, client: httpx.Client) -> Iterator[cProfile.Profile]:
        """cProfile the server thread (cProfile sees only the thread it is enabled in): enable and disable
        it from inside the server's event loop, through two requests that the server's ASGI wrapper answers."""
        profiler = cProfile.Profile()
        self.profiler = profiler
        client.get("/__bench/profile/on")
        try:
            yield profiler
        finally:
            client.get("/__bench/profile/off")
            self.profiler = None
