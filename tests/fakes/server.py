"""The fake provider: a raw ASGI app served by uvicorn on a loopback port in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import replace
from types import TracebackType
from typing import Any

import uvicorn

from . import render
from . import tokenizer as fake_tokenizer
from .script import SECRET, Error, Raw, RecordedRequest, Reply, ScriptItem
from .tokens import Counting, rejection
from .validate import anthropic_problem, openai_problem

#: What ``GET .../models`` lists unless a test sets ``model_list``.
DEFAULT_MODEL_LIST: tuple[dict[str, Any], ...] = ({"id": "fake-model", "object": "model"},)
#: How often a held reply (``Reply.hold``) looks whether the test released it.
HOLD_POLL_SECONDS = 0.02

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _protocol_of(path: str) -> str:
    if path.endswith("/messages/count_tokens"):
        return "anthropic-count"
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/messages"):
        return "anthropic"
    return "other"


#: What local servers answer about the context they run a model with (``FakeProvider.server_context``).
CONTEXT_PATHS = ("/props", "/slots", "/api/ps", "/api/show")


def _context_answer(setting: tuple[str, int] | None, record: RecordedRequest, loaded: list[str]) -> tuple[int, Any]:
    """The (status, JSON) of a context endpoint, in the shape of the server ``setting`` names; Ollama's ``/api/ps``
    lists the models ``loaded``, tagged as Ollama names them (``name:latest``)."""
    kind, n_ctx = setting if setting is not None else ("", 0)
    body = record.body if isinstance(record.body, dict) else {}
    if kind == "llama.cpp" and record.path == "/props" and record.method == "GET":
        return 200, {"default_generation_settings": {"n_ctx": n_ctx, "temperature": 0.8}, "total_slots": 1}
    if kind == "llama.cpp-slots" and record.path == "/slots" and record.method == "GET":
        return 200, [{"id": 0, "n_ctx": n_ctx, "is_processing": False}, {"id": 1, "n_ctx": n_ctx}]
    if kind == "ollama" and record.path == "/api/ps" and record.method == "GET":
        tagged = [name if ":" in name else f"{name}:latest" for name in loaded]
        return 200, {"models": [{"name": n, "model": n, "size": 1, "context_length": n_ctx} for n in tagged]}
    if kind in ("ollama", "ollama-show") and record.path == "/api/show" and record.method == "POST":
        if not isinstance(body.get("model"), str):
            return 400, {"error": "model is required"}
        return 200, {
            "parameters": f'stop "<|im_end|>"\nnum_ctx {n_ctx}',
            "model_info": {"llama.context_length": 131072},
        }
    if kind.startswith("ollama") and record.path == "/api/ps":
        return 200, {"models": []}
    return 404, {"error": {"message": f"no route {record.path}", "type": "not_found_error"}}


def closed_port_url() -> str:
    """A loopback URL nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def unresolvable_url() -> str:
    """A URL whose host no resolver knows (RFC 6761 reserves ``.invalid``), for DNS-failure tests."""
    return "http://provider.invalid"


def tls_to_plain_url(fake: FakeProvider) -> str:
    """``https://`` to the fake's plain-HTTP port: the TLS handshake fails (for TLS-failure tests)."""
    return f"https://{fake.host}:{fake.port}"


class _Connection:
    """Per-request state on the server's event loop: the record and a disconnect watch."""

    def __init__(self, record: RecordedRequest, receive: Receive, send: Send) -> None:
        self.record = record
        self._send = send
        self.gone = asyncio.Event()
        self._watch = asyncio.ensure_future(self._watch_disconnect(receive))

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not self.record.completed.is_set():
                    self.record.disconnected.set()
                    self.gone.set()
                return

    async def pause(self, seconds: float) -> bool:
        """Sleep; False if the client went away meanwhile."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.gone.wait(), seconds)
        return not self.gone.is_set()

    async def held(self, hold: threading.Event | None) -> bool:
        """Wait until ``hold`` is set (polling, as it is set from the test's thread); False if the client went
        away meanwhile."""
        while hold is not None and not hold.is_set() and not self.gone.is_set():
            await asyncio.sleep(HOLD_POLL_SECONDS)
        return not self.gone.is_set()

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, more: bool = False) -> None:
        if not more:
            self.record.completed.set()
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(self, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        await self.start(status, headers or [(b"content-type", b"application/json")])
        await self.body(json.dumps(payload).encode())

    def close(self) -> None:
        self._watch.cancel()


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    """A bound, listening TCP socket on a free port of ``host``, for ``uvicorn.Server.run(sockets=...)``.

    Made with ``IPPROTO_TCP`` on purpose: asyncio sets ``TCP_NODELAY`` on an accepted connection only when
    the listening socket's protocol says TCP, and a plain ``socket.socket(AF_INET, SOCK_STREAM)`` says 0.
    Without ``TCP_NODELAY`` every keep-alive answer (headers, then body, in two writes) waited for the
    client's delayed ACK: about 40 ms per request on Linux, which the endpoint benchmark had taken for the
    endpoint's own overhead.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(128)
    return sock


class FakeProvider:
    """A scripted OpenAI + Anthropic server; see the package docstring for usage."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.expected_api_key: str | None = None
        #: Reject requests a real provider would reject (bad role order, missing max_tokens, ...).
        self.strict = True
        #: Serve tokenizer endpoints in this dialect (``llama-cpp-python``, ``llama.cpp``, ``vllm``); with a
        #: dialect, chat usage counts the templated prompt with the same tokenizer (see ``tests/fakes/tokenizer``).
        #: ``None`` (default): those paths answer 404. Tokenizer calls are recorded in ``tokenize_requests``,
        #: never in ``requests``.
        self.tokenizer: str | None = None
        self._tokenize_requests: list[RecordedRequest] = []
        #: Tell the context size the server runs its models with, as a real local server does (see
        #: ``contextshift.providers.server_context``): ``("llama.cpp", n)`` answers ``GET /props``,
        #: ``("llama.cpp-slots", n)`` only ``GET /slots`` (two slots), ``("ollama", n)`` ``GET /api/ps`` (every
        #: model asked about is loaded) and ``POST /api/show``, ``("ollama-show", n)`` only ``/api/show`` (no model
        #: loaded). ``None`` (default): those paths answer 404. Their requests are in ``context_requests``.
        self.server_context: tuple[str, int] | None = None
        #: While set and not released, the tokenizer and context endpoints take the request and never answer (a
        #: server that hangs on the side calls); released, they answer.
        self.side_hold: threading.Event | None = None
        self._context_requests: list[RecordedRequest] = []
        #: What ``GET .../models`` lists (OpenAI's and Anthropic's shape: ``{"data": [...]}``).
        self.model_list: list[dict[str, Any]] = list(DEFAULT_MODEL_LIST)
        self._models_script: deque[ScriptItem] = deque()
        self._model_requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque()
        self._counting: dict[str | None, Counting] = {}
        self._requests: list[RecordedRequest] = []
        self._serial = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Works for every kind: ``{base_url}/chat/completions`` and ``{base_url}/v1/messages``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeProvider:
        sock = listening_socket(self.host)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            log_config=None,
            access_log=False,
            lifespan="off",
            interface="asgi3",
            loop="asyncio",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-provider", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake provider did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- scripting --------------------------------------------------------------------------------------

    def script(self, *items: ScriptItem) -> FakeProvider:
        """Queue answers, used one per request in order; an empty queue answers with the default echo."""
        with self._lock:
            self._script.extend(items)
        return self

    def script_models(self, *items: ScriptItem) -> FakeProvider:
        """Queue answers to ``GET .../models``, one per request (``Error(503)``, ``Raw(...)``, a ``Reply`` only
        for its ``delay`` or ``hold``: a hang); an empty queue lists :attr:`model_list`."""
        with self._lock:
            self._models_script.extend(items)
        return self

    def count_as(self, counting: Counting | None = None, *, model: str | None = None, **options: Any) -> FakeProvider:
        """Count prompts with ``counting`` (or ``Counting(**options)``) for ``model`` (None: every model).

        Requests over its window are rejected with the real count; replies report the real count as usage.
        """
        with self._lock:
            self._counting[model] = counting or Counting(**options)
        return self

    def counting_for(self, model: Any) -> Counting | None:
        with self._lock:
            return self._counting.get(model if isinstance(model, str) else None) or self._counting.get(None)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._counting.clear()
            self._tokenize_requests.clear()
            self._models_script.clear()
            self._model_requests.clear()
        self.model_list = list(DEFAULT_MODEL_LIST)
        self.expected_api_key = None
        self.strict = True
        self.tokenizer = None
        self.server_context = None
        self.side_hold = None
        with self._lock:
            self._context_requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def tokenize_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._tokenize_requests)

    @property
    def context_requests(self) -> list[RecordedRequest]:
        """The requests to the servers' context endpoints (``/props``, ``/slots``, ``/api/ps``, ``/api/show``)."""
        with self._lock:
            return list(self._context_requests)

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The ``GET .../models`` requests (kept apart from the chat calls in :attr:`requests`)."""
        with self._lock:
            return list(self._model_requests)

    @property
    def last(self) -> RecordedRequest:
        requests = self.requests
        assert requests, "the fake provider received no request"
        return requests[-1]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Poll ``predicate`` (blocking; use :meth:`await_for` in async tests)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    async def await_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def _next(self) -> ScriptItem | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    # -- the ASGI app -----------------------------------------------------------------------------------

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = scope["path"]
        record = RecordedRequest(scope["method"], path, headers, bytes(raw), body, _protocol_of(path))
        conn = _Connection(record, receive, send)
        try:
            await self._answer(conn)
        finally:
            conn.close()

    async def _answer(self, conn: _Connection) -> None:
        record = conn.record
        if record.method == "GET" and record.path.rstrip("/").endswith("/models"):
            await self._list_models(conn)
            return
        if record.path in CONTEXT_PATHS:
            with self._lock:
                self._context_requests.append(record)
            if not await conn.held(self.side_hold):
                return
            loaded = [str(m.get("id")) for m in self.model_list]
            await conn.json(*_context_answer(self.server_context, record, loaded))
            return
        if record.path in fake_tokenizer.TOKENIZER_PATHS:
            if self.tokenizer is None:
                await conn.json(404, {"detail": "Not Found"})
                return
            with self._lock:
                self._tokenize_requests.append(record)
            if not await conn.held(self.side_hold):
                return
            status, payload = fake_tokenizer.answer(self.tokenizer, record.path, record.body)
            await conn.json(status, payload)
            return
        with self._lock:
            self._requests.append(record)
        if record.protocol == "other" or record.method != "POST":
            await conn.json(404, {"error": {"message": f"no route {record.path}", "type": "not_found_error"}})
            return
        if self.expected_api_key is not None and not self._authorized(record):
            await self._error(conn, Error(401))
            return
        if record.protocol == "anthropic-count":
            await self._count_tokens(conn)
            return
        if self.strict:
            problem = (
                openai_problem(record.body)
                if record.protocol == "openai"
                else anthropic_problem(record.body, record.headers)
            )
            if problem is not None:
                record.rejected = problem
                await self._error(conn, Error(400, message=problem, error_type="invalid_request_error"))
                return
        counting = self.counting_for(record.body.get("model")) if isinstance(record.body, dict) else None
        over = counting.over_window(record.body) if counting is not None and isinstance(record.body, dict) else None
        if counting is not None and counting.window is not None and over is not None:
            record.over_limit = True
            message, kind = rejection(record.protocol, counting.window, *over)
            await self._error(conn, Error(400, message=message, code="context_length_exceeded", error_type=kind))
            return
        item = self._next()
        record.answered_with = item
        if not await self._failure(conn, item):
            reply = item if isinstance(item, Reply) else Reply()
            if await conn.pause(reply.delay) and await conn.held(reply.hold):
                await self._reply(conn, reply)

    async def _failure(self, conn: _Connection, item: ScriptItem | None) -> bool:
        """Answer a scripted ``Error`` or ``Raw`` (after its delay); False for a reply or none, left to the caller."""
        if isinstance(item, Error):
            if await conn.pause(item.delay):
                await self._error(conn, item)
            return True
        if isinstance(item, Raw):
            if await conn.pause(item.delay):
                await conn.start(item.status, [(b"content-type", item.content_type.encode())])
                await conn.body(item.body.encode() if isinstance(item.body, str) else item.body)
            return True
        return False

    async def _list_models(self, conn: _Connection) -> None:
        with self._lock:
            self._model_requests.append(conn.record)
            item = self._models_script.popleft() if self._models_script else None
            listed = list(self.model_list)
        conn.record.answered_with = item
        key = self.expected_api_key
        if key is not None and key not in (
            conn.record.headers.get("x-api-key"),
            conn.record.headers.get("authorization", "").removeprefix("Bearer "),
        ):
            await self._error(conn, Error(401))
        elif await self._failure(conn, item):
            return
        elif not isinstance(item, Reply) or (await conn.pause(item.delay) and await conn.held(item.hold)):
            await conn.json(200, {"object": "list", "data": listed, "has_more": False})

    def _authorized(self, record: RecordedRequest) -> bool:
        if record.protocol.startswith("anthropic"):
            return record.headers.get("x-api-key") == self.expected_api_key
        return record.headers.get("authorization") == f"Bearer {self.expected_api_key}"

    async def _error(self, conn: _Connection, error: Error) -> None:
        await conn.start(error.status, render.error_headers(error))
        await conn.body(render.error_body(error, conn.record.protocol))

    async def _count_tokens(self, conn: _Connection) -> None:
        """Anthropic's ``POST /v1/messages/count_tokens``: the prompt's real size, no generation."""
        body = conn.record.body if isinstance(conn.record.body, dict) else {}
        counting = self.counting_for(body.get("model"))
        tokens = counting.prompt_tokens(body) if counting else render.estimate_prompt(body)
        await conn.json(200, {"input_tokens": tokens})

    async def _reply(self, conn: _Connection, reply: Reply) -> None:
        record = conn.record
        body = record.body if isinstance(record.body, dict) else {}
        counting = self.counting_for(body.get("model"))
        if counting is not None and reply.input_tokens is None:
            reply = replace(reply, input_tokens=counting.prompt_tokens(body))
        elif self.tokenizer is not None and reply.input_tokens is None and record.protocol == "openai":
            reply = replace(reply, input_tokens=fake_tokenizer.prompt_tokens(self.tokenizer, body))
        resolved = render.resolve(reply, body)
        serial = next(self._serial)
        if not record.stream:
            payload = (
                render.openai_completion(resolved, serial)
                if record.protocol == "openai"
                else render.anthropic_message(resolved, serial)
            )
            await conn.json(200, payload)
            return
        frames: Iterator[tuple[str, bool]]
        if record.protocol == "openai":
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            frames = render.openai_stream(resolved, serial, include_usage)
        else:
            frames = render.anthropic_stream(resolved, serial)
        await conn.start(200, [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")])
        sent_text = 0
        for frame, is_text in frames:
            if conn.gone.is_set():
                return
            await conn.body(frame.encode(), more=True)
            if is_text:
                sent_text += 1
                if reply.abort_after is not None and sent_text >= reply.abort_after:
                    return  # uvicorn closes the connection: an incomplete chunked body
                if reply.hang_after is not None and sent_text >= reply.hang_after:
                    await conn.gone.wait()  # a stalled stream: nothing more until the client gives up
                    return
                if not await conn.pause(reply.chunk_delay):
                    return
        await conn.body(b"")


__all__ = ["SECRET", "FakeProvider", "closed_port_url", "tls_to_plain_url", "unresolvable_url"]
