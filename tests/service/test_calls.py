"""The provider-call engine (service/calls): one resend after a context-length rejection, exactly one recorded
end per call, the client's timeouts, over the fake provider's real socket.

The plans and recorders here are callers of the engine, as the chat turn, the endpoint and compaction are:
they count what the engine asks of them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from contextshift.providers import (
    PROVIDER_CONTEXT_LENGTH,
    ChatRequest,
    ChatResult,
    Finished,
    ProviderClient,
    ProviderError,
    RetryPolicy,
    TextDelta,
)
from contextshift.service.calls import Calls, CallTarget
from contextshift.service.provider_check import Endpoint
from tests.fakes import Error, FakeProvider, Reply

OPTIONS = {"retry": RetryPolicy(retries=0)}


class CountingPlan:
    """Sends one question; ``fits`` says whether it can be fitted again after a rejection."""

    def __init__(self, *, fits: bool = True) -> None:
        self.fits = fits
        self.refits: list[str] = []
        self.requests = 0

    async def request(self, client: ProviderClient) -> ChatRequest:
        self.requests += 1
        content = "shorter question" if self.refits else "question"
        return ChatRequest(model="gpt-4o", messages=[{"role": "user", "content": content}])

    async def refit(self, error: ProviderError) -> bool:
        self.refits.append(error.code)
        return self.fits


class EndsRecorder:
    """Writes down each end it is told of, and whether the provider call was under way."""

    def __init__(self) -> None:
        self.ends: list[str] = []
        self.sending_calls = 0

    @contextlib.contextmanager
    def sending(self, client: ProviderClient) -> Iterator[None]:
        self.sending_calls += 1
        yield

    async def completed(self, reply: ChatResult | None) -> None:
        self.ends.append("completed")

    async def failed(self, error: ProviderError) -> None:
        self.ends.append(f"failed:{error.code}")

    async def cancelled(self) -> None:
        self.ends.append("cancelled")


def target(fake: FakeProvider) -> CallTarget:
    return CallTarget("gpt-4o", Endpoint("openai", fake.base_url, "sk-test", 5), window=8000, reserve=1000)


async def test_a_context_length_rejection_is_fitted_again_and_sent_once_more(fake_provider: FakeProvider) -> None:
    fake_provider.script(Error.context_length(), Reply("fits now"))
    plan, recorder = CountingPlan(), EndsRecorder()
    reply = await Calls(options=dict(OPTIONS)).complete(target(fake_provider), plan, recorder)
    assert reply.text == "fits now"
    assert plan.refits == [PROVIDER_CONTEXT_LENGTH] and plan.requests == 2
    assert [r.messages[-1]["content"] for r in fake_provider.requests] == ["question", "shorter question"]
    assert recorder.ends == ["completed"] and recorder.sending_calls == 2


async def test_a_second_rejection_fails_the_call_without_a_third_send(fake_provider: FakeProvider) -> None:
    fake_provider.script(Error.context_length(), Error.context_length(), Reply("never sent"))
    plan, recorder = CountingPlan(), EndsRecorder()
    with pytest.raises(ProviderError) as raised:
        await Calls(options=dict(OPTIONS)).complete(target(fake_provider), plan, recorder)
    assert raised.value.code == PROVIDER_CONTEXT_LENGTH
    assert len(fake_provider.requests) == 2 and plan.refits == [PROVIDER_CONTEXT_LENGTH]
    assert recorder.ends == [f"failed:{PROVIDER_CONTEXT_LENGTH}"]


async def test_a_plan_that_cannot_fit_again_fails_with_the_rejection(fake_provider: FakeProvider) -> None:
    fake_provider.script(Error.context_length(), Reply("never sent"))
    plan, recorder = CountingPlan(fits=False), EndsRecorder()
    with pytest.raises(ProviderError):
        await Calls(options=dict(OPTIONS)).complete(target(fake_provider), plan, recorder)
    assert len(fake_provider.requests) == 1
    assert recorder.ends == [f"failed:{PROVIDER_CONTEXT_LENGTH}"]


async def test_any_other_failure_is_never_refitted(fake_provider: FakeProvider) -> None:
    fake_provider.script(Error(500), Reply("never sent"))
    plan, recorder = CountingPlan(), EndsRecorder()
    with pytest.raises(ProviderError) as raised:
        await Calls(options=dict(OPTIONS)).complete(target(fake_provider), plan, recorder)
    assert plan.refits == [] and len(fake_provider.requests) == 1
    assert recorder.ends == [f"failed:{raised.value.code}"]


async def test_an_empty_reply_fails_when_the_caller_needs_content(fake_provider: FakeProvider) -> None:
    fake_provider.script(Reply(""))
    recorder = EndsRecorder()
    with pytest.raises(ProviderError) as raised:
        await Calls(options=dict(OPTIONS)).complete(target(fake_provider), CountingPlan(), recorder, need_content=True)
    assert raised.value.code == "EMPTY_RESPONSE" and recorder.ends == ["failed:EMPTY_RESPONSE"]


async def test_a_stream_rejected_before_its_first_event_is_sent_once_more(fake_provider: FakeProvider) -> None:
    fake_provider.script(Error.context_length(), Reply("a b c"))
    plan, recorder = CountingPlan(), EndsRecorder()
    events = [e async for e in Calls(options=dict(OPTIONS)).stream(target(fake_provider), plan, recorder)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "a b c"
    assert isinstance(events[-1], Finished) and plan.refits == [PROVIDER_CONTEXT_LENGTH]
    assert recorder.ends == ["completed"]


async def test_closing_a_stream_early_records_it_cancelled_once(fake_provider: FakeProvider) -> None:
    fake_provider.script(Reply("a b c d e f", chunk_delay=0.2))
    recorder = EndsRecorder()
    stream = Calls(options=dict(OPTIONS)).stream(target(fake_provider), CountingPlan(), recorder)
    async with contextlib.aclosing(stream):
        async for event in stream:
            assert isinstance(event, TextDelta)
            break
    assert recorder.ends == ["cancelled"]
    assert await fake_provider.await_for(lambda: fake_provider.requests[0].disconnected.is_set())  # client closed
