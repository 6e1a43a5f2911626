"""A2/N2: provider failures map to normalized codes, retries are bounded, and nothing upstream leaks."""

from __future__ import annotations

import json
import logging
import pickle
import traceback

import httpx
import pytest

from contextshift.core import Message
from contextshift.providers import (
    GENERATION_FAILED,
    PROVIDER_AUTH,
    PROVIDER_BAD_REQUEST,
    PROVIDER_CONNECTION_REFUSED,
    PROVIDER_CONTEXT_LENGTH,
    PROVIDER_DNS_FAILED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_SERVER_ERROR,
    PROVIDER_TIMEOUT,
    PROVIDER_TLS_FAILED,
    PROVIDER_UNAVAILABLE,
    ChatRequest,
    ProviderError,
    RetryPolicy,
    TextDelta,
    chat_request,
)
from contextshift.providers.base import ProviderClient
from contextshift.providers.errors import error_from_transport, parse_retry_after
from tests.fakes import SECRET, Error, Raw, Reply, closed_port_url, tls_to_plain_url, unresolvable_url
from tests.fakes.server import FakeProvider

from .conftest import API_KEY, ClientFactory

KINDS = ["openai", "anthropic"]


def request_for(kind: str, *, stream: bool = False) -> ChatRequest:
    return chat_request(kind, [Message("user", "hi")], model="fake-model", max_tokens=16, stream=stream)


async def call(client: ProviderClient, kind: str, stream: bool) -> list[str]:
    """Run one call; returns the streamed texts (or the completed text)."""
    if not stream:
        return [(await client.complete(request_for(kind))).text]
    texts: list[str] = []
    async with client.stream(request_for(kind, stream=True)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                texts.append(event.text)
    return texts


async def failure(client: ProviderClient, kind: str, stream: bool) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await call(client, kind, stream)
    return caught.value


def assert_clean(error: ProviderError, caplog: pytest.LogCaptureFixture) -> None:
    """Neither the upstream secret nor the API key in the error, its chain, its traceback or any log."""
    rendered = [
        str(error),
        repr(error),
        error.message,
        repr(error.params),
        repr(error.args),
        "".join(traceback.format_exception(error)),
    ]
    for text in rendered:
        assert SECRET not in text
        assert API_KEY not in text
    assert error.__cause__ is None
    assert error.__context__ is None
    for record in caplog.records:
        line = record.getMessage() + repr(record.args) + (record.exc_text or "")
        assert SECRET not in line, record.name
        assert API_KEY not in line, record.name
    assert SECRET not in caplog.text
    assert API_KEY not in caplog.text


STATUS_CASES = [
    (Error(401), PROVIDER_AUTH, False),
    (Error(403), PROVIDER_AUTH, False),
    (Error(429), PROVIDER_RATE_LIMITED, True),
    (Error(500), PROVIDER_SERVER_ERROR, True),
    (Error(503), PROVIDER_SERVER_ERROR, True),
    (Error(529), PROVIDER_SERVER_ERROR, True),
    (Error(400), PROVIDER_BAD_REQUEST, False),
    (Error(404), PROVIDER_BAD_REQUEST, False),
    (Error(422), PROVIDER_BAD_REQUEST, False),
    (Error.context_length(), PROVIDER_CONTEXT_LENGTH, False),
    (Error(400, message="This model's maximum context length is 4096 tokens."), PROVIDER_CONTEXT_LENGTH, False),
    (Error(400, message="prompt is too long: 210000 tokens > 200000 maximum"), PROVIDER_CONTEXT_LENGTH, False),
    (Error(408), PROVIDER_TIMEOUT, True),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("scripted", "code", "retryable"), STATUS_CASES)
async def test_status_maps_to_code_without_leaking(
    kind: str,
    stream: bool,
    scripted: Error,
    code: str,
    retryable: bool,
    client_for: ClientFactory,
    fake_provider: FakeProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_provider.script(scripted)
    error = await failure(client_for(kind, retries=0), kind, stream)
    assert error.code == code
    assert error.status == scripted.status
    assert error.retryable is retryable
    assert error.params["status"] == scripted.status
    assert_clean(error, caplog)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("first", [Error(429, retry_after=0), Error(500), Error(503), Error(529)])
async def test_retryable_failures_are_retried_then_succeed(
    kind: str, stream: bool, first: Error, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(first, Error(500), Reply("finally"))
    texts = await call(client_for(kind, retries=2), kind, stream)
    assert "".join(texts) == "finally"
    assert len(fake_provider.requests) == 3


@pytest.mark.parametrize("kind", KINDS)
async def test_retries_are_bounded(kind: str, client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    fake_provider.script(Error(500), Error(500), Error(500), Reply("never"))
    error = await failure(client_for(kind, retries=2), kind, False)
    assert error.code == PROVIDER_SERVER_ERROR
    assert len(fake_provider.requests) == 3
    assert fake_provider.pending == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_non_retryable_failures_are_not_retried(
    kind: str, stream: bool, status: int, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(status), Reply("never"))
    await failure(client_for(kind, retries=3), kind, stream)
    assert len(fake_provider.requests) == 1
    assert fake_provider.pending == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_retry_after_is_honoured(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="contextshift.providers")
    fake_provider.script(Error(429, retry_after=0.4), Reply("ok"))
    assert await call(client_for(kind), kind, False) == ["ok"]
    assert len(fake_provider.requests) == 2
    # The client logs the wait it sleeps before a retry: the server's Retry-After, not its own backoff.
    waits = [r.getMessage() for r in caplog.records if "retry 1 of" in r.getMessage()]
    assert len(waits) == 1 and waits[0].endswith("in 0.40s")


@pytest.mark.parametrize("kind", KINDS)
async def test_retry_after_beyond_the_cap_is_not_waited_for(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Error(429, retry_after=120), Reply("never"))
    error = await failure(client_for(kind, retry_after_cap=5), kind, False)
    assert error.code == PROVIDER_RATE_LIMITED
    assert error.retry_after == 120
    assert len(fake_provider.requests) == 1  # raised at once: no retry, so no wait before one
    assert fake_provider.pending == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [False, True])
async def test_read_timeout_maps_to_provider_timeout_and_is_not_retried(
    kind: str,
    stream: bool,
    client_for: ClientFactory,
    fake_provider: FakeProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """N5: the request reached the provider (it may be running and billed there): never sent again."""
    caplog.set_level(logging.DEBUG)
    fake_provider.script(Reply("late", delay=3), Reply("late", delay=3))
    error = await failure(client_for(kind, retries=1, read_timeout=0.3), kind, stream)
    assert error.code == PROVIDER_TIMEOUT
    assert not error.retryable
    assert len(fake_provider.requests) == 1
    assert not fake_provider.requests[0].completed.is_set()  # given up before the fake finished
    assert_clean(error, caplog)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_late_reply_is_not_asked_for_twice(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("late", delay=3), Reply("on time"))
    with pytest.raises(ProviderError) as caught:
        await call(client_for(kind, retries=1, read_timeout=0.3), kind, False)
    assert caught.value.code == PROVIDER_TIMEOUT
    assert len(fake_provider.requests) == 1 and fake_provider.pending == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stalled_stream_times_out_after_text_without_retry(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("first second", chunk_delay=3), Reply("never"))
    texts: list[str] = []
    client = client_for(kind, retries=2, read_timeout=0.3)
    with pytest.raises(ProviderError) as caught:
        async with client.stream(request_for(kind, stream=True)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
    assert caught.value.code == PROVIDER_TIMEOUT
    assert texts == ["first"]
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_connection_refused_has_its_own_code_and_is_retried(
    kind: str, client_for: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    error = await failure(client_for(kind, retries=1, base_url=closed_port_url()), kind, False)
    assert error.code == PROVIDER_CONNECTION_REFUSED
    assert error.retryable
    assert error.status is None
    assert_clean(error, caplog)


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unknown_host_and_a_failed_tls_handshake_have_codes_of_their_own(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for url, code, retryable in (
        (unresolvable_url(), PROVIDER_DNS_FAILED, True),
        (tls_to_plain_url(fake_provider), PROVIDER_TLS_FAILED, False),  # https:// to a plain-HTTP port
    ):
        error = await failure(client_for(kind, retries=0, base_url=url), kind, False)
        assert (error.code, error.retryable, error.status) == (code, retryable, None)
        assert_clean(error, caplog)
    assert fake_provider.requests == []


@pytest.mark.parametrize("kind", KINDS)
async def test_broken_stream_after_text_is_not_retried(
    kind: str, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Reply("one two three four", abort_after=2), Reply("never"))
    texts: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async with client_for(kind, retries=2).stream(request_for(kind, stream=True)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
    assert caught.value.code == PROVIDER_UNAVAILABLE
    assert texts == ["one", " two"]
    assert len(fake_provider.requests) == 1


MALFORMED = [
    Raw(200, b"this is not json"),
    Raw(200, b'{"choices": []}'),
    Raw(200, b"[1, 2, 3]"),
    Raw(200, b'{"content": "not a list", "choices": "nope"}'),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("raw", MALFORMED)
async def test_malformed_replies_are_generation_failed_and_not_retried(
    kind: str, raw: Raw, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(raw, Reply("never"))
    error = await failure(client_for(kind), kind, False)
    assert error.code == GENERATION_FAILED
    assert not error.retryable
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "frames",
    [
        b"data: {not json\n\n",
        b'data: {"choices": [{"index": 0, "delta": {"content": "cut"}}]}\n\n',
        b'event: message_start\ndata: {"type": "message_start", "message": {"usage": {}}}\n\n',
    ],
)
async def test_malformed_or_truncated_streams_are_generation_failed(
    kind: str, frames: bytes, client_for: ClientFactory, fake_provider: FakeProvider
) -> None:
    fake_provider.script(Raw(200, frames, content_type="text/event-stream"))
    error = await failure(client_for(kind, retries=0), kind, True)
    assert error.code == GENERATION_FAILED


async def test_anthropic_error_event_before_text_is_retried(
    client_for: ClientFactory, fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": SECRET}}
    frame = f"event: error\ndata: {json.dumps(payload)}\n\n"
    fake_provider.script(Raw(200, frame, content_type="text/event-stream"), Reply("recovered"))
    assert await call(client_for("anthropic"), "anthropic", True) == ["recovered"]
    assert len(fake_provider.requests) == 2
    fake_provider.script(*[Raw(200, frame, content_type="text/event-stream")] * 3)
    error = await failure(client_for("anthropic", retries=2), "anthropic", True)
    assert error.code == PROVIDER_UNAVAILABLE
    assert_clean(error, caplog)


async def test_openai_error_object_in_stream_is_mapped(client_for: ClientFactory, fake_provider: FakeProvider) -> None:
    frame = f"data: {json.dumps({'error': {'message': SECRET, 'code': 'context_length_exceeded'}})}\n\n"
    fake_provider.script(Raw(200, frame, content_type="text/event-stream"))
    error = await failure(client_for("openai"), "openai", True)
    assert error.code == PROVIDER_CONTEXT_LENGTH
    assert SECRET not in repr(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_key_is_not_in_the_client_repr(kind: str, client_for: ClientFactory) -> None:
    client = client_for(kind)
    assert API_KEY not in repr(client)
    assert API_KEY not in str(vars(client).get("base_url"))


def test_transport_errors_map_to_codes() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/x")
    cases = [
        (httpx.ConnectTimeout("t", request=request), PROVIDER_TIMEOUT),
        (httpx.ReadTimeout("t", request=request), PROVIDER_TIMEOUT),
        (httpx.PoolTimeout("t", request=request), PROVIDER_TIMEOUT),
        (httpx.ConnectError("no cause we can tell", request=request), PROVIDER_UNAVAILABLE),
        (httpx.RemoteProtocolError("eof", request=request), PROVIDER_UNAVAILABLE),
        (httpx.UnsupportedProtocol("ftp", request=request), PROVIDER_BAD_REQUEST),
    ]
    for exc, code in cases:
        mapped = error_from_transport(exc)
        assert mapped.code == code, exc
        sent = isinstance(exc, httpx.ReadTimeout)  # N5: it reached the provider
        assert mapped.retryable is (code != PROVIDER_BAD_REQUEST and not sent)


def test_retry_after_parsing() -> None:
    assert parse_retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert parse_retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_backoff_is_exponential_bounded_and_jittered() -> None:
    policy = RetryPolicy(retries=5, backoff_base=0.5, backoff_max=4.0, retry_after_cap=10)
    error = ProviderError(PROVIDER_UNAVAILABLE, "x", 500, retryable=True)
    for attempt, ceiling in enumerate([0.5, 1.0, 2.0, 4.0, 4.0]):
        waits = [policy.delay(attempt, error) for _ in range(50)]
        assert all(w is not None and ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 1
    assert policy.delay(5, error) is None
    assert policy.delay(0, ProviderError(PROVIDER_AUTH, "x", 401)) is None
    limited = ProviderError(PROVIDER_RATE_LIMITED, "x", 429, retryable=True, retry_after=3)
    assert policy.delay(0, limited) == 3
    assert policy.delay(0, ProviderError(PROVIDER_RATE_LIMITED, "x", 429, True, retry_after=11)) is None


def test_provider_error_pickles_and_has_stable_shape() -> None:
    error = ProviderError(PROVIDER_RATE_LIMITED, "The provider is rate limiting.", 429, True, retry_after=2)
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.code, clone.message, clone.status, clone.retryable, clone.retry_after) == (
        PROVIDER_RATE_LIMITED,
        "The provider is rate limiting.",
        429,
        True,
        2,
    )
    assert str(error) == "The provider is rate limiting."
    assert error.params == {"status": 429, "retry_after": 2}
