"""How the benchmarks serve the app and its upstream.

- :class:`Service`: ``create_app`` under uvicorn on a loopback port, in a daemon thread (``service``, ``load``);
- :func:`served_model`: the service as deployed (``contextshift serve`` on a fresh SQLite file, a process of
  its own) with a provider on a local upstream and one chat model (``endpoint``, ``limits``);
- the upstream itself: ``python -m benchmarks.serving`` answers every Chat Completions call with one fixed
  reply without parsing the body (a fake that parsed it would add the parsing to the direct path and hide
  the endpoint's own cost as the body grows); ``tests.fakes`` is the echoing one.

They sign in with ``signin.BENCH_TOKEN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.fakes.server import listening_socket

from .signin import BENCH_HEADERS, BENCH_TOKEN


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


# -- the service as deployed, with an upstream -------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """A running ``contextshift serve`` with one chat model on a local upstream."""

    url: str  # the service
    pid: int  # the service's process
    upstream_url: str  # the upstream's base URL (``{upstream_url}/chat/completions``)


@contextlib.contextmanager
def served_model(
    model: str, window: int, *, echo: bool = False, env: Mapping[str, str] | None = None
) -> Iterator[Served]:
    """Start an upstream (the fixed reply of :func:`main`, or ``tests.fakes``' echo with ``echo``) and
    ``contextshift serve`` on a fresh SQLite file in a temporary folder, three processes on loopback as
    deployed; create a provider on the upstream and the chat model ``model`` with a ``window``-token window.
    ``env``: more environment variables for the service."""
    from tests.serving import ServeProcess

    command = [sys.executable, "-m", "tests.fakes" if echo else "benchmarks.serving"]
    with tempfile.TemporaryDirectory() as folder:
        upstream = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert upstream.stdout is not None and upstream.stdin is not None
        try:
            upstream_url = f"http://127.0.0.1:{int(upstream.stdout.readline())}"
            service_env = {"CONTEXTSHIFT_ADMIN_TOKEN": BENCH_TOKEN, "CONTEXTSHIFT_DATA_DIR": folder, **(env or {})}
            log = Path(folder) / "serve.log"
            service = ServeProcess(f"sqlite:///{Path(folder) / 'bench.db'}", log, service_env).start()
            assert service.process is not None
            try:
                with httpx.Client(base_url=service.url, headers=BENCH_HEADERS, timeout=120) as client:
                    provider = client.post(
                        "/api/v2/providers",
                        json={"name": "upstream", "kind": "openai", "base_url": upstream_url, "api_key": "sk-bench"},
                    ).json()["provider"]
                    created = client.post(
                        "/api/v2/models",
                        json={"provider_id": provider["id"], "name": model, "type": "chat", "context_window": window},
                    )
                    assert created.status_code == 201, created.text
                yield Served(service.url, service.process.pid, upstream_url)
            finally:
                service.stop()
        finally:
            upstream.stdin.close()
            upstream.wait(timeout=30)


# -- the fixed upstream ------------------------------------------------------------------------------------

_REPLY = (
    b'{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"bench","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}'
)
_STREAM = (
    b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)
_MODELS = b'{"object":"list","data":[]}'


def _response(status: str, kind: bytes, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: ".encode() + kind + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return head + body


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer the requests of one connection: read each body whole and look at none of it, except for the
    bytes that ask for a stream."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line, _, headers = head.partition(b"\r\n")
            length, chunked = 0, False
            for header in headers.split(b"\r\n"):
                name, _, value = header.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
            body = await _chunked(reader) if chunked else await reader.readexactly(length) if length else b""
            method, path = line.split(b" ")[:2]
            if method == b"POST" and path.endswith(b"/chat/completions"):
                streamed = b'"stream":true' in body or b'"stream": true' in body
                writer.write(
                    _response("200 OK", b"text/event-stream", _STREAM)
                    if streamed
                    else _response("200 OK", b"application/json", _REPLY)
                )
            elif method == b"GET" and path.endswith(b"/models"):
                writer.write(_response("200 OK", b"application/json", _MODELS))
            else:
                writer.write(_response("404 Not Found", b"application/json", b"{}"))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    """A body sent in chunks (a client that streams its request body)."""
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        parts.append(await reader.readexactly(size + 2)) if size else await reader.readuntil(b"\r\n")
        if not size:
            return b"".join(parts)


async def _serve_until_stdin_closes() -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main() -> None:
    """``python -m benchmarks.serving``: the fixed upstream; prints its port, serves until stdin closes."""
    asyncio.run(_serve_until_stdin_closes())


if __name__ == "__main__":
    main()
