"""What the endpoint (V7) writes, and when: the reply goes back once its audit is written, and the call's end
(status, usage, calibration) is written after it, by a task that whatever reads it waits for; signing in
reads the token without a turn at the write lock; a resent history is read from the message cache.

Bounded by counts and states, never by time: right after ``complete`` returns, the call's end is still
pending (nothing has yielded to the event loop since it was scheduled).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from contextshift.api.auth import principal_for
from contextshift.api.jsonspans import parse
from contextshift.service import proxy_fit as fit
from contextshift.service.proxy import ProxyCall, ProxyService
from contextshift.storage import Database, Repositories
from contextshift.storage.database import DatabaseBusy
from contextshift.tokenizers import get_tokenizer
from tests.api.conftest import CLIENT_OPTIONS
from tests.databases import Backend
from tests.fakes import Reply
from tests.fakes.server import FakeProvider


@dataclass
class Setup:
    db: Database
    user_id: str
    model_id: str
    secret: str


@pytest.fixture
async def setup(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Setup]:
    db = backend.database(sqlite_busy_timeout=0.2)
    await db.start()
    try:
        async with db.session() as session:
            repos = Repositories(session)
            user = await repos.users.create(name="alice")
            issued = await repos.tokens.issue(user.id, name="script")
            provider = await repos.providers.create(
                name="fake", kind="openai", base_url=fake_provider.base_url, api_key="sk-test"
            )
            model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8000)
        yield Setup(db, user.id, model.id, issued.secret)
    finally:
        await db.close()


def call(user_id: str, text: str = "hi") -> ProxyCall:
    return ProxyCall(model="gpt-4o", messages=[{"role": "user", "content": text}], user_id=user_id)


async def status_of(db: Database, audit_id: str, user_id: str) -> tuple[str, dict[str, int] | None]:
    async with db.session(write=False) as session:
        row = await Repositories(session).proxy_audits.get(audit_id, user_id=user_id)
    assert row is not None  # the audit the reply names is always in the database
    return row.status, row.usage


async def calls_folded_in(db: Database, model_id: str) -> int:
    async with db.session(write=False) as session:
        calibration = await Repositories(session).calibrations.get(model_id, get_tokenizer("gpt-4o").name)
    return calibration.calls


async def test_the_reply_returns_before_its_end_is_written_and_the_end_is_there_once_settled(
    setup: Setup, fake_provider: FakeProvider
) -> None:
    service = ProxyService(setup.db, client_options=dict(CLIENT_OPTIONS))
    fake_provider.script(Reply("Hello!", input_tokens=20, output_tokens=2))
    prepared = await service.prepare(call(setup.user_id))
    reply = await service.complete(prepared)
    assert reply.text == "Hello!"
    assert service.finishing(audit_id=prepared.audit_id) and service.finishing(model_id=setup.model_id)
    assert (await status_of(setup.db, prepared.audit_id, setup.user_id))[0] == "prepared"
    await service.settled(audit_id=prepared.audit_id)
    assert not service.finishing()
    status, usage = await status_of(setup.db, prepared.audit_id, setup.user_id)
    assert status == "completed" and usage is not None and usage["input_tokens"] == 20
    assert await calls_folded_in(setup.db, setup.model_id) == 1


async def test_every_pending_end_is_written_before_the_service_stops(setup: Setup, fake_provider: FakeProvider) -> None:
    service = ProxyService(setup.db, client_options=dict(CLIENT_OPTIONS))
    audit_ids = []
    for n in range(3):
        fake_provider.script(Reply(f"reply {n}", input_tokens=10 + n, output_tokens=2))
        prepared = await service.prepare(call(setup.user_id, f"question {n}"))
        await service.complete(prepared)
        audit_ids.append(prepared.audit_id)
    await service.settle()  # what the app's lifespan does before it closes the database
    assert not service.finishing()
    assert [(await status_of(setup.db, a, setup.user_id))[0] for a in audit_ids] == ["completed"] * 3
    assert await calls_folded_in(setup.db, setup.model_id) == 3


async def test_the_next_call_to_a_model_counts_with_the_calibration_of_the_call_before(
    setup: Setup, fake_provider: FakeProvider
) -> None:
    service = ProxyService(setup.db, client_options=dict(CLIENT_OPTIONS))
    fake_provider.script(Reply("one", input_tokens=30, output_tokens=1), Reply("two", input_tokens=30, output_tokens=1))
    first = await service.prepare(call(setup.user_id, "first"))
    await service.complete(first)
    assert service.finishing(model_id=setup.model_id)
    second = await service.prepare(call(setup.user_id, "second"))  # waits for the first call's end
    assert second.counting.calibration.calls == 1
    await service.complete(second)
    await service.settle()


async def test_signing_in_with_a_recently_used_token_does_not_wait_for_the_write_lock(
    setup: Setup, backend: Backend
) -> None:
    if backend.name != "sqlite":
        pytest.skip("the process's write lock is SQLite's")
    first = await principal_for(setup.db, setup.secret)  # never used: notes the use, a write
    assert first is not None and first.user_id == setup.user_id
    async with setup.db._writer():  # another request is writing (an endpoint call's end, say)
        again = await principal_for(setup.db, setup.secret)
    assert again == first


async def test_a_token_not_used_for_a_while_notes_its_use(setup: Setup, backend: Backend) -> None:
    if backend.name != "sqlite":
        pytest.skip("the process's write lock is SQLite's")
    async with setup.db._writer():  # its last use is unknown: signing in writes, so it waits its turn
        with pytest.raises(DatabaseBusy):
            await principal_for(setup.db, setup.secret)
    assert await principal_for(setup.db, setup.secret) is not None
    async with setup.db.session(write=False) as session:
        tokens = await Repositories(session).tokens.list_for(setup.user_id)
    assert [t.last_used_at is not None for t in tokens] == [True]


# -- the message cache ------------------------------------------------------------------------------------


def request_messages(size: int) -> tuple[list[dict[str, object]], list[bytes]]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "Be brief."}]
    for n in range(size):
        messages.append({"role": "user", "content": f"question {n} " + "word " * (n % 40)})
        messages.append({"role": "assistant", "content": f"answer {n}"})
    messages.append({"role": "developer", "content": "Answer in French.", "pinned": True})
    messages.append({"role": "user", "content": "and now?"})
    parsed = parse(json.dumps({"model": "m", "messages": messages}).encode())
    assert parsed.messages_json is not None
    return parsed.value["messages"], parsed.messages_json


def texts_of(messages: list[dict[str, object]]) -> list[bytes]:
    """Each message's JSON as the endpoint reads it from a request body."""
    texts = parse(json.dumps({"model": "m", "messages": messages}).encode()).messages_json
    assert texts is not None
    return texts


def test_a_resent_history_fits_the_same_from_the_message_cache() -> None:
    raw, texts = request_messages(300)
    shape = fit.Shape(get_tokenizer("gpt-4o"), 4000, 500, 0, "truncate", [], None)
    cache = fit.MessageCache()
    items = fit.caller_dicts(raw)
    plain = fit.fit_lean(items, raw, texts, shape)
    first = cache.messages(raw, texts)
    assert first is not None and len(cache) == len(raw)
    again_raw, again_texts = request_messages(300)  # the same history, sent again: new objects, same text
    again_items = fit.caller_dicts(again_raw)
    again = cache.messages(again_raw, again_texts)
    assert again is not None and len(cache) == len(raw)
    assert all(a is b for a, b in zip(again, first, strict=True))  # read once, not again
    cached = fit.fit_lean(again_items, again_raw, again_texts, shape, again)
    assert plain.excluded == cached.excluded > 0 and plain.prompt_tokens == cached.prompt_tokens
    assert plain.messages.json_bytes == cached.messages.json_bytes  # type: ignore[attr-defined]
    assert fit.lean_audit(items, plain, shape) == fit.lean_audit(again_items, cached, shape)


def test_a_message_is_cached_by_its_position_and_protection_too() -> None:
    raw, texts = request_messages(3)
    cache = fit.MessageCache()
    first = cache.messages(raw, texts)
    assert first is not None
    shorter_raw, shorter_texts = raw[:-1], texts[:-1]  # the last user message is now another one
    shorter = cache.messages(shorter_raw, shorter_texts)
    assert shorter is not None
    assert shorter[-3].pinned and not first[-4].pinned and shorter[-3].text == first[-4].text
    assert [m.id for m in shorter] == [f"m{i}" for i in range(len(shorter_raw))]


def test_a_message_that_cannot_be_read_leaves_the_error_to_the_shift() -> None:
    raw = [{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}, {"role": "user"}]
    texts = [json.dumps(m).encode() for m in raw]
    cache = fit.MessageCache()
    assert cache.messages(raw, texts) is None and len(cache) == 0
    shape = fit.Shape(get_tokenizer("gpt-4o"), 4000, 500, 0, "truncate", [], None)
    with pytest.raises(Exception) as raised:
        fit.fit_lean(fit.caller_dicts(raw), raw, texts, shape)
    assert getattr(raised.value, "code", None) == "INVALID_REQUEST"


def test_an_agents_next_call_takes_the_history_it_shares_with_the_last_one() -> None:
    raw, texts = request_messages(40)
    cache = fit.MessageCache()
    first = cache.messages(raw, texts)
    assert first is not None
    entries = len(cache)
    longer_raw = [*raw, {"role": "assistant", "content": "bien sûr"}, {"role": "user", "content": "and then?"}]
    longer_texts = texts_of(longer_raw)  # the next call: new objects, the same JSON, two more
    longer = cache.messages(longer_raw, longer_texts)
    assert longer is not None and [m.id for m in longer] == [f"m{i}" for i in range(len(longer_raw))]
    same = len(raw) - 1  # all but the old last user message, which is no longer the protected input
    assert all(a is b for a, b in zip(longer[:same], first[:same], strict=True))
    assert first[same].pinned and not longer[same].pinned and longer[-1].pinned
    assert longer[same].text == first[same].text and longer[same] is not first[same]
    assert len(cache) == entries + 3  # the old input unprotected, and the two new messages, were read
    shift = fit.Shape(get_tokenizer("gpt-4o"), 1500, 500, 0, "truncate", [], None)
    from_cache = fit.fit_lean(fit.caller_dicts(longer_raw), longer_raw, longer_texts, shift, longer)
    from_dicts = fit.fit_lean(fit.caller_dicts(longer_raw), longer_raw, longer_texts, shift)
    assert from_cache.messages == from_dicts.messages and from_cache.excluded == from_dicts.excluded > 0
    assert from_cache.prompt_tokens == from_dicts.prompt_tokens


def test_a_call_that_changes_an_earlier_message_reads_it_again() -> None:
    raw, texts = request_messages(10)
    cache = fit.MessageCache()
    first = cache.messages(raw, texts)
    assert first is not None
    edited = [dict(m) for m in raw]
    edited[3]["content"] = "an edited question"
    edited_texts = texts_of(edited)
    again = cache.messages(edited, edited_texts)
    assert again is not None and again[3].text == "an edited question"
    assert all(a is b for a, b in zip(again[:3], first[:3], strict=True))
    assert all(a is b for a, b in zip(again[4:], first[4:], strict=True))  # found by their JSON and place


def test_the_message_cache_keeps_at_most_its_characters() -> None:
    raw, texts = request_messages(50)
    cache = fit.MessageCache(max_bytes=sum(map(len, texts)) // 2)
    assert cache.messages(raw, texts) is not None
    assert 0 < len(cache) < len(raw)
    assert cache._bytes <= cache.max_bytes
