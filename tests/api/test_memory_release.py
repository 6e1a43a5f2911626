"""Issue 25, point 1: memory returns after a large request.

Two causes, each checked where it lives: the JSON of each ``/v1`` message, kept across requests by the
endpoint's message cache, must cost its own length (orjson's result kept the 8 KiB buffer it wrote into), and a
request whose body is at least ``RELEASE_AFTER_BYTES`` hands freed heap back to the system once answered
(glibc's ``malloc_trim``), over a real socket. ``benchmarks/limits.py`` measures the whole server's RSS.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from typing import Any

import httpx
import pytest

from contextshift.api.jsonspans import parse
from contextshift.api.limits import RELEASE_AFTER_BYTES, RELEASE_MEMORY_ENV, MemoryRelease, RequestLimits, malloc_trim
from contextshift.settings import Settings
from tests.api.conftest import Server

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")


def test_each_messages_json_costs_its_own_length_not_the_parsers_buffer() -> None:
    messages = [{"role": "user", "content": f"{n} " + "x" * 780} for n in range(1000)]
    raw = json.dumps({"model": "m", "messages": messages}).encode()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        texts = parse(raw).messages_json
        assert texts is not None
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    written = sum(map(len, texts))
    assert written == sum(len(json.dumps(m, separators=(",", ":"))) for m in messages)
    # the parsed body itself (about the body's size again) and the texts: well under twice the body, where
    # orjson's buffers alone came to about ten times the texts' length
    assert held < 3 * len(raw), (held, written)


async def _echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that reads the whole body and answers its length."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@linux_only
async def test_a_large_request_releases_memory_once_answered_and_a_small_one_does_not() -> None:
    release = MemoryRelease(malloc_trim())
    assert release.trim is not None  # glibc has it
    app = RequestLimits(_echo, max_body_bytes=8 * 1024 * 1024, release=release)  # type: ignore[arg-type]
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            small = await http.post("/v1/anything", content=b"x" * (RELEASE_AFTER_BYTES - 1))
            assert (small.status_code, small.text, release.passes) == (200, str(RELEASE_AFTER_BYTES - 1), 0)
            large = await http.post("/v1/anything", content=b"x" * RELEASE_AFTER_BYTES)
            assert (large.status_code, large.text) == (200, str(RELEASE_AFTER_BYTES))
    assert release.passes == 1 and not release.running


@pytest.mark.parametrize("value", ["0", "false", "no", "off", " OFF "])
def test_the_release_can_be_turned_off(value: str) -> None:
    settings = Settings.from_env({RELEASE_MEMORY_ENV: value})
    assert settings.release_memory is False
    assert malloc_trim(settings.release_memory) is None
    assert RequestLimits(_echo, release_memory=settings.release_memory).release.trim is None  # type: ignore[arg-type]


async def test_without_a_trim_function_the_release_does_nothing() -> None:
    release = MemoryRelease(None)
    await release()
    assert release.passes == 0
