"""N5: every path that calls a provider honours its ``timeout_seconds`` and the call's total deadline.

The same faults on each path, over real sockets with the fake provider: the chat route, ``/v1/chat/completions``,
``/v1/messages`` and the compaction summarizer. The provider has ``timeout_seconds`` 1 (a deadline of 5 s)
and the service has no ``timeouts`` of its own, so only the provider's limits can end a call. Bounds are
request counts and outcomes; the fake's delays are far longer than the limits, so no assertion is timed.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.providers import RetryPolicy
from tests.api.conftest import ADMIN_TOKEN, Server, Service, bearer
from tests.api.test_compaction import SUMMARY, fill, logs
from tests.api.test_provider_faults import sse
from tests.databases import Backend
from tests.fakes import Error, FakeProvider, Reply, ScriptItem

OPTIONS: dict[str, Any] = {"retry": RetryPolicy(retries=2, backoff_base=0.01, backoff_max=0.02)}
PATHS = ["chat", "openai", "anthropic", "compaction"]


@pytest.fixture
async def limited(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Service]:
    app = create_app(database=backend.database(), client_options=OPTIONS, admin_token=ADMIN_TOKEN)
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake_provider, backend)


async def setup(service: Service, *, context_window: int = 8000) -> dict[str, str]:
    ids = await service.setup_chat(context_window=context_window)
    patched = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"timeout_seconds": 1})
    assert patched.status_code == 200, patched.text
    return ids


async def call(
    service: Service, path: str, item: ScriptItem, *, stream: bool = False, first: ScriptItem | None = None
) -> tuple[int, str, Any]:
    """Run one call on ``path`` with the provider answering ``item`` (after ``first``, when given): (HTTP status,
    error code, body)."""
    ids = await setup(service, context_window=4000 if path == "compaction" else 8000)
    if path == "compaction":
        await fill(service, ids["chat"], 12)
    service.fake.script(*([first] if first is not None else []), item, item, item)
    if path == "chat":
        response = await service.http.post(
            f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": stream}
        )
        if stream:
            kind, data = sse(response.text)[-1]
            return response.status_code, data["code"] if kind == "error" else "", sse(response.text)
        return response.status_code, response.json().get("error", {}).get("code", ""), response.json()
    if path == "openai":
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        response = await service.http.post("/v1/chat/completions", json=body)
        if stream:
            code = "upstream_timeout" if "upstream_timeout" in response.text else ""
            return response.status_code, code, response.text
        return response.status_code, (response.json()["error"] or {}).get("code", ""), response.json()
    if path == "anthropic":
        body = {"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        response = await service.http.post("/v1/messages", json=body)
        return response.status_code, response.json()["error"]["type"], response.json()
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/compact")
    outcome = response.json()
    assert outcome["status"] == "failed" and outcome["message_count"] == 0
    assert (await logs(service, ids["chat"]))[0]["error_code"] == outcome["error_code"]
    return response.status_code, outcome["error_code"], outcome


TIMED_OUT = {
    "chat": (504, "PROVIDER_TIMEOUT"),
    "openai": (504, "upstream_timeout"),
    "anthropic": (504, "timeout_error"),
    "compaction": (200, "PROVIDER_TIMEOUT"),
}


@pytest.mark.parametrize("path", PATHS)
async def test_a_provider_that_never_answers_is_given_up_after_its_timeout(limited: Service, path: str) -> None:
    never = threading.Event()  # never set: the fake holds the request open until the client goes away
    try:
        status, code, _ = await call(limited, path, Reply("never", hold=never))
    finally:
        never.set()
    assert (status, code) == TIMED_OUT[path]
    assert len(limited.fake.requests) == 1  # it reached the provider: never sent again


@pytest.mark.parametrize("path", PATHS)
async def test_a_reply_later_than_the_timeout_is_not_accepted(limited: Service, path: str) -> None:
    status, code, _ = await call(limited, path, Reply(SUMMARY, delay=4.0))
    assert (status, code) == TIMED_OUT[path]


@pytest.mark.parametrize("path", ["chat", "openai"])
async def test_a_stream_that_trickles_past_the_deadline_is_stopped_there(limited: Service, path: str) -> None:
    # A word every 0.4 s keeps each wait under the 1 s timeout; 60 words would take 24 s, the deadline is 5 s.
    status, code, body = await call(limited, path, Reply("word " * 60, chunk_delay=0.4), stream=True)
    assert status == 200 and code == ("PROVIDER_TIMEOUT" if path == "chat" else "upstream_timeout")
    if path == "chat":
        tokens = [data["text"] for kind, data in body if kind == "token"]
        assert 0 < len(tokens) < 60
        kept = body[-1][1]["partial"]
        assert kept["content"] == "".join(tokens) and kept["meta"]["partial"] is True
    assert len(limited.fake.requests) == 1


@pytest.mark.parametrize("path", PATHS)
async def test_the_resend_after_a_context_length_rejection_is_bounded_like_the_first_send(
    limited: Service, path: str
) -> None:
    never = threading.Event()
    try:
        status, code, _ = await call(limited, path, Reply("never", hold=never), first=Error.context_length())
    finally:
        never.set()
    assert (status, code) == TIMED_OUT[path]
    assert len(limited.fake.requests) == 2  # the rejected send and the one resend, never a third
