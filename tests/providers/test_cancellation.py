"""V3: a consumer that stops (break, aclose, task cancellation) closes the HTTP stream at once."""

from __future__ import annotations

import asyncio
import gc

import pytest

from contextshift.core import Message
from contextshift.providers import TextDelta, chat_request
from tests.fakes import Error, Reply
from tests.fakes.server import FakeProvider

from .conftest import ClientFactory

KINDS = ["openai", "anthropic"]

#: 20 chunks, 0.25 s apart: five seconds if nobody hangs up.
SLOW = Reply(" ".join(f"w{i}" for i in range(20)), chunk_delay=0.25)


@pytest.mark.parametrize("kind", KINDS)
async def test_breaking_out_of_the_stream_closes_the_connection(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(SLOW)
    request = chat_request(kind, [Message("user", "go")], model="m", stream=True)
    async with client_for(kind).stream(request) as events:
        async for event in events:
            assert isinstance(event, TextDelta)
            break
    sent = fake_provider.last
    assert await fake_provider.await_for(sent.disconnected.is_set, timeout=3)
    assert not sent.completed.is_set()


@pytest.mark.parametrize("kind", KINDS)
async def test_aclose_closes_the_connection(kind: str, client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    fake_provider.script(SLOW)
    events = client_for(kind).stream(chat_request(kind, [Message("user", "go")], model="m", stream=True))
    first = await events.__anext__()
    assert isinstance(first, TextDelta)
    await events.aclose()
    assert await fake_provider.await_for(fake_provider.last.disconnected.is_set, timeout=3)
    with pytest.raises(StopAsyncIteration):
        await events.__anext__()


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_the_consuming_task_closes_the_connection(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(SLOW)
    client = client_for(kind)
    got_first = asyncio.Event()
    texts: list[str] = []

    async def consume() -> None:
        async with client.stream(chat_request(kind, [Message("user", "go")], model="m", stream=True)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                    got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), timeout=3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake_provider.await_for(fake_provider.last.disconnected.is_set, timeout=3)
    assert len(texts) < 20


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_a_complete_call_closes_the_connection(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("late", delay=5))
    client = client_for(kind)
    task = asyncio.create_task(client.complete(chat_request(kind, [Message("user", "go")], model="m")))
    assert await fake_provider.await_for(lambda: len(fake_provider.requests) == 1, timeout=3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake_provider.await_for(fake_provider.last.disconnected.is_set, timeout=3)


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_during_retry_backoff_stops_retrying(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(429, retry_after=2), Reply("never"))
    client = client_for(kind)
    task = asyncio.create_task(client.complete(chat_request(kind, [Message("user", "go")], model="m")))
    assert await fake_provider.await_for(lambda: len(fake_provider.requests) == 1, timeout=3)
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert len(fake_provider.requests) == 1


async def test_the_client_is_usable_after_a_cancelled_stream(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(SLOW, Reply("next"))
    client = client_for("openai")
    async with client.stream(chat_request("openai", [Message("user", "go")], model="m", stream=True)) as events:
        async for _ in events:
            break
    result = await client.complete(chat_request("openai", [Message("user", "go")], model="m"))
    assert result.text == "next"


async def test_a_dropped_stream_is_closed_when_collected(
    client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    """Without ``async with`` the stream is closed once it is garbage collected (the loop finalizes it)."""
    fake_provider.script(SLOW)
    client = client_for("anthropic")

    async def first_delta() -> str:
        async for event in client.stream(chat_request("anthropic", [Message("user", "go")], model="m", stream=True)):
            assert isinstance(event, TextDelta)
            return event.text
        raise AssertionError("no delta")

    assert await first_delta() == "w0"
    gc.collect()
    assert await fake_provider.await_for(fake_provider.last.disconnected.is_set, timeout=3)
