"""Request limits (N1, N5, N6): body size, the shape of a JSON body, text that cannot be stored, the head.

- A request body over ``max_body_bytes`` gets 413 ``PAYLOAD_TOO_LARGE`` before the body is read: a
  ``Content-Length`` over the limit is refused before anything else runs; a body sent without one (chunked)
  is counted as it streams in and refused at the first chunk that passes the limit (``BodyTooLarge``, an
  HTTP exception the error handlers give the usual envelope). FastAPI's own ``max_body_size`` is not used:
  Starlette's limiter replaces every answer to an over-long request with a plain-text one.
- A readable 413 (issue 25): before it answers, the server reads and discards up to ``MAX_DISCARD_BYTES`` of
  an oversized body (unless the client sent ``Expect: 100-continue``, which uvicorn answers only when the body
  is read: such a client waits for the 413 and never sends the body), so the client, still sending, receives
  the 413 instead of a reset connection. A body larger than that is answered at once and the connection closed.
- N6: a JSON body (a state-changing request to ``/api/``, ``/v1/`` or ``/session``) of a signed-in caller is
  checked on its raw bytes before it becomes objects (:class:`BodyChecks`, :func:`check_body`): at most
  ``MAX_NESTING`` levels of arrays and objects (400 ``JSON_TOO_DEEP``), at most ``MAX_PARTS`` values in all
  (every member of an object and every element of an array; 413 ``TOO_MANY_PARTS``), and no text a database
  cannot store: a ``\\u0000`` escape or a lone surrogate (escaped or as bytes) is 400 ``TEXT_NOT_STORABLE``.
  The strings are cut out by splitting at the quotes and the brackets counted with C loops, so a body costs
  its own size a few times over, never a Python object per value. ``/v1`` adds ``MAX_MESSAGES`` (see
  ``compat_forward``). docs/limits.md has the numbers and why.
- Memory returns after a large request (issue 25): once a request whose body was at least ``RELEASE_AFTER_BYTES``
  has been answered, glibc's ``malloc_trim(0)`` (through ctypes, in a worker thread, one at a time) hands the
  heap pages its objects freed back to the system. Without it the freed memory stays with the process: measured
  by ``benchmarks/limits.py`` (docs/limits.md has the figures). ``CONTEXTSHIFT_RELEASE_MEMORY=0`` turns it off;
  where there is no glibc (macOS, musl) it does nothing.
- A request line and headers over ``MAX_HEAD_BYTES`` get 431 ``REQUEST_HEADERS_TOO_LARGE``.
- A path or query string with NUL or another control character answers 404 ``NOT_FOUND`` on every backend:
  no stored id can hold one (ids are hex; the query strings hold id filters, numbers and flags), and
  PostgreSQL cannot even compare such a string.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
from array import array
from collections.abc import Awaitable, Callable, MutableMapping
from itertools import accumulate
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio

from ..core.errors import ContextShiftError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The default limit of a request body: 8 MiB. ``CONTEXTSHIFT_MAX_BODY_BYTES`` (through ``Settings``) changes it.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
#: The largest request line and headers: h11's own limit of a head that arrives in pieces, which uvicorn uses
#: (api/protocol.py answers that one); a head that arrives whole is measured here, so both answer 431 alike.
MAX_HEAD_BYTES = 16 * 1024
#: The most of an oversized body read (and thrown away) so that the client gets to read the 413: 64 MiB.
MAX_DISCARD_BYTES = 64 * 1024 * 1024
#: How long the server goes on reading an oversized body it discards, at most ...
DISCARD_SECONDS = 30.0
#: ... and how long it waits for the next piece: a client that sent only the head and waits is let go.
DISCARD_IDLE_SECONDS = 1.0
#: N6: the deepest nesting of arrays and objects in a JSON body (the body itself is level 1).
MAX_NESTING = 64
#: N6: the most values in a JSON body: every member of an object and every element of an array counts.
MAX_PARTS = 200_000
#: N6: the most messages in one ``/v1`` request (``messages``; Anthropic's ``system`` blocks are parts).
MAX_MESSAGES = 10_000
#: A request body at least this large hands the memory it freed back to the system once answered (glibc).
RELEASE_AFTER_BYTES = 256 * 1024
#: The setting that turns the release off (``Settings.release_memory``; benchmarks/limits.py sets it).
RELEASE_MEMORY_ENV = "CONTEXTSHIFT_RELEASE_MEMORY"
JSON_TOO_DEEP = "JSON_TOO_DEEP"
TOO_MANY_PARTS = "TOO_MANY_PARTS"
TOO_MANY_MESSAGES = "TOO_MANY_MESSAGES"
TEXT_NOT_STORABLE = "TEXT_NOT_STORABLE"
#: Methods whose body is read: the others carry none worth checking.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Paths whose bodies are JSON (as guard.JSON_PATHS).
_JSON_PATHS = ("/api/", "/v1/")

#: C0 controls and DEL: never part of an id or a sensible query value.
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")


class BodyTooLarge(ContextShiftError):
    """Raised from ``receive`` when a streamed body passes the limit: 413 ``PAYLOAD_TOO_LARGE``.

    Args:
        limit: the largest body the server reads, in bytes.
    """

    code = PAYLOAD_TOO_LARGE

    def __init__(self, limit: int) -> None:
        super().__init__(too_large_body(limit)[0], limit=limit)
        self.limit = limit


def too_large_body(limit: int | None) -> tuple[str, dict[str, Any]]:
    """The message and params of a 413 ``PAYLOAD_TOO_LARGE``."""
    if limit is None:
        return "The request body is too large.", {}
    return f"The request body is larger than the limit of {limit} bytes.", {"limit": limit}


async def _answer(
    send: Send,
    status: int,
    code: str,
    message: str,
    params: dict[str, Any] | None = None,
    *,
    close: bool = False,
    more: bool = False,
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "params": params or {}}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the unread body is not waited for
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": more})


def _has_control(raw: bytes) -> bool:
    return _CONTROL.search(unquote_to_bytes(raw)) is not None


#: Every byte but the brackets and the comma: what :func:`check_body` deletes once the strings are gone.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"[]{},")
#: ``[`` and ``{`` as +1, ``]`` and ``}`` as -1 (a signed byte), everything else as 0.
_DEPTH_STEP = bytes(1 if b in b"[{" else 255 if b in b"]}" else 0 for b in range(256))
#: An escape of NUL or of a surrogate, after an even run of backslashes (so not ``\\u0000``, a text).
_SUSPECT_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
#: A backslash and the byte it escapes.
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
#: Where a NUL or surrogate escape may be (a cheap scan first: most bodies have none).
_MAYBE_SUSPECT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
#: A surrogate written as UTF-8 bytes (CESU-style, not UTF-8) or NUL: never valid in a stored text.
_RAW_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


#: The HTTP status of each refusal of a body's shape or text.
BODY_REFUSALS = {JSON_TOO_DEEP: 400, TEXT_NOT_STORABLE: 400, TOO_MANY_PARTS: 413, TOO_MANY_MESSAGES: 413}


class BodyRefused(ContextShiftError):
    """A JSON body refused for its shape or its text (N6), before it became objects.

    Args:
        code: ``JSON_TOO_DEEP`` or ``TEXT_NOT_STORABLE`` (400), ``TOO_MANY_PARTS`` or ``TOO_MANY_MESSAGES`` (413).
        message: what is wrong, with the limit.
        **params: the limit and what was found.
    """

    code = TEXT_NOT_STORABLE

    def __init__(self, code: str, message: str, **params: object) -> None:
        super().__init__(message, **params)
        self.code = code

    @property
    def status(self) -> int:
        """The HTTP status of its code."""
        return BODY_REFUSALS[self.code]


def _unstorable(raw: bytes) -> str | None:
    """Why ``raw``'s text cannot be stored (NUL, a lone surrogate), or None."""
    if _RAW_SURROGATE.search(raw) is not None:
        return "a surrogate code point written as bytes"
    if _MAYBE_SUSPECT.search(raw) is None:
        return None
    expect_low = -1  # where a high surrogate's low half must start
    for match in _SUSPECT_ESCAPE.finditer(raw):
        digits = match.group(1).lower()
        at = match.start(1) - 2
        if digits == b"0000":
            return "a NUL character (\\u0000)"
        low = digits[1:2] in b"cdef"
        if low and at == expect_low:
            expect_low = -1
            continue
        if low or expect_low != -1:
            return "a lone surrogate escape (\\ud800-\\udfff without its pair)"
        expect_low = match.end()
    return "a lone surrogate escape (\\ud800-\\udfff without its pair)" if expect_low != -1 else None


def _structure(raw: bytes) -> bytes:
    """The brackets and commas of a JSON text outside its strings, in order.

    Outside strings JSON has no backslash, so removing every escape (a backslash and the byte after it, left
    to right) leaves quotes that only open and close strings; the even pieces between them are what is outside.
    """
    unescaped = _ESCAPE.sub(b"", raw) if b"\\" in raw else raw
    return b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_STRUCTURE)


def check_body(raw: bytes) -> None:
    """Refuse a JSON body over the N6 limits or with text that cannot be stored, from its bytes alone.

    A body that is not JSON passes: the route's own parsing refuses it in its own words.

    Args:
        raw: the request body.

    Raises:
        BodyRefused: 400 ``TEXT_NOT_STORABLE`` or ``JSON_TOO_DEEP``, 413 ``TOO_MANY_PARTS``.
    """
    reason = _unstorable(raw)
    if reason is not None:
        raise BodyRefused(TEXT_NOT_STORABLE, f"The request holds text that cannot be stored: {reason}.")
    structure = _structure(raw)
    containers = structure.count(b"[") + structure.count(b"{")
    parts = containers + structure.count(b",")  # members and elements, from above: n of them have n-1 commas
    if parts > MAX_PARTS:
        raise BodyRefused(
            TOO_MANY_PARTS,
            f"The request holds more than {MAX_PARTS} values (members and elements); send fewer messages or parts.",
            limit=MAX_PARTS,
        )
    if containers <= MAX_NESTING:
        return
    steps = array("b", structure.translate(_DEPTH_STEP, b","))
    if max(accumulate(steps, initial=0)) > MAX_NESTING:
        raise BodyRefused(
            JSON_TOO_DEEP,
            f"The request nests arrays and objects more than {MAX_NESTING} levels deep.",
            limit=MAX_NESTING,
        )


def _json_body(scope: Scope) -> bool:
    """A state-changing request whose body is (or claims to be) JSON on a path whose bodies are JSON."""
    if str(scope.get("method", "GET")).upper() not in _BODY_METHODS:
        return False
    path = str(scope.get("path", ""))
    if not (path == "/session" or path.startswith(_JSON_PATHS)):
        return False
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))
    return True  # no type: read as JSON by the routes


def _expects_continue(scope: Scope) -> bool:
    return any(n == b"expect" and v.strip().lower() == b"100-continue" for n, v in scope.get("headers", ()))


async def _discard(receive: Receive, already: int = 0) -> None:
    """Read and drop the rest of a body, up to ``MAX_DISCARD_BYTES`` and ``DISCARD_SECONDS``, while it keeps
    coming (a pause of ``DISCARD_IDLE_SECONDS`` ends it): the client that is still sending then reads the answer
    instead of a reset connection."""
    read = already
    with anyio.move_on_after(DISCARD_SECONDS):
        while read < MAX_DISCARD_BYTES:
            message: Message | None = None
            with anyio.move_on_after(DISCARD_IDLE_SECONDS):
                message = await receive()
            if message is None or message["type"] != "http.request":
                return
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def malloc_trim(enabled: bool = True) -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (give the free pages at the heap's top and inside it back to the system), or None
    where the C library has none (macOS, musl) or when not ``enabled`` (``CONTEXTSHIFT_RELEASE_MEMORY=0``)."""
    if not enabled:
        return None
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class MemoryRelease:
    """``malloc_trim(0)`` after a large request, in a worker thread (it walks the heap: not on the event loop),
    one at a time: a request that ends while a trim runs asks for one more pass after it, never a second thread."""

    def __init__(self, trim: Callable[[int], int] | None) -> None:
        self.trim = trim
        self.running = False
        self.again = False
        #: Passes made (for tests and the benchmark's log).
        self.passes = 0

    async def __call__(self) -> None:
        if self.trim is None:
            return
        if self.running:
            self.again = True
            return
        self.running = True
        try:
            while True:
                self.again = False
                await anyio.to_thread.run_sync(self.trim, 0)
                self.passes += 1
                if not self.again:
                    return
        finally:
            self.running = False


class _Counted:
    """A request's ``receive`` that counts the body and raises :class:`BodyTooLarge` past the limit."""

    def __init__(self, receive: Receive, scope: Scope, limit: int) -> None:
        self.inner = receive
        self.scope = scope
        self.limit = limit
        self.received = 0

    async def __call__(self) -> Message:
        message = await self.inner()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                if message.get("more_body", False) and not _expects_continue(self.scope):
                    await _discard(self.inner, self.received)  # so that the client reads the 413 (issue 25)
                raise BodyTooLarge(self.limit)
        return message


class RequestLimits:
    """ASGI middleware: 413 for a body over ``max_body_bytes`` (readable: see the module's doc), 404 for a path or
    a query string with a control character, 431 for a large head; the memory of a large request given back
    once it is answered (:class:`MemoryRelease`; not when ``release_memory`` is False). :class:`BodyChecks` does
    N6, further in."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        release: MemoryRelease | None = None,
        *,
        release_memory: bool = True,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.release = release if release is not None else MemoryRelease(malloc_trim(release_memory))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
        if (
            _has_control(raw_path)
            or _CONTROL.search(scope["path"].encode("utf-8", "surrogateescape"))
            or _has_control(scope.get("query_string", b"").replace(b"+", b" "))
        ):
            await _answer(send, 404, "NOT_FOUND", "No object has an id with a control character.")
            return
        headers = scope.get("headers", ())
        if len(raw_path) + len(scope.get("query_string", b"")) + sum(len(n) + len(v) for n, v in headers) > (
            MAX_HEAD_BYTES
        ):
            message = "The request line and headers are larger than this server reads."
            await _answer(send, 431, "REQUEST_HEADERS_TOO_LARGE", message, {"limit": MAX_HEAD_BYTES}, close=True)
            return
        for name, value in headers:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                await self._too_large(scope, receive, send, declared=int(value))
                return
        counted = _Counted(receive, scope, self.max_body_bytes)
        await self.app(scope, counted, send)
        if counted.received >= RELEASE_AFTER_BYTES:
            await self.release()

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, declared: int | None, read: int = 0) -> None:
        """The 413, then (unless the client waits for ``100 Continue`` or the body is past the discard limit)
        the rest of the body read and dropped before the answer ends and the connection closes."""
        message, params = too_large_body(self.max_body_bytes)
        drain = not _expects_continue(scope) and (declared is None or declared <= MAX_DISCARD_BYTES)
        await _answer(send, 413, PAYLOAD_TOO_LARGE, message, params, close=True, more=drain)
        if drain:
            await _discard(receive, read)
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class BodyChecks:
    """ASGI middleware: the N6 checks of a JSON body (:func:`check_body`) before any route reads it.

    It sits inside the sign-in (``AuthMiddleware``): a caller who is not signed in gets 401 without a byte of
    their body read, so only signed-in callers can make the service buffer a body (of at most the size limit,
    which :class:`RequestLimits`, outside, counts).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _json_body(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client left: nothing to answer
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except BodyTooLarge as error:  # RequestLimits counted past the limit (and read the rest)
            chunks.clear()
            message_text, params = too_large_body(error.limit)
            await _answer(send, 413, PAYLOAD_TOO_LARGE, message_text, params, close=True)
            return
        body = b"".join(chunks)
        chunks.clear()
        try:
            check_body(body)
        except BodyRefused as refused:
            del body
            await _answer(send, refused.status, refused.code, refused.message, dict(refused.params))
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered, body
            if not delivered:
                delivered = True
                whole, body = body, b""  # the route's copy is the only one kept
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # after the body: a disconnect, for a streaming answer to notice

        await self.app(scope, replay, send)
