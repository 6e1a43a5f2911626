"""Compaction through the service against the fake provider (C1-C14, V4).

The summarizer is the same fake; its requests are told apart by the summarizer's system prompt.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextshift.jobs import make_runner
from contextshift.service.compaction import Compactor
from tests.api.conftest import Service
from tests.fakes import Error, RecordedRequest, Reply

SUMMARIZER = "You condense the older part of a conversation"
SUMMARY = "Maria and the user fly to Lisbon on 14 March; budget 2400 euros; hotel near Alfama."


def is_summarizer(request: RecordedRequest) -> bool:
    first = (request.json or {}).get("messages", [{}])[0]
    return str(first.get("content", "")).startswith(SUMMARIZER)


async def fill(service: Service, chat_id: str, count: int, words: int = 30) -> list[str]:
    ids = []
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        body = {"role": role, "content": f"turn {n}: " + " ".join(f"word{n}x{i}" for i in range(words))}
        ids.append((await service.post(f"/api/v2/chats/{chat_id}/messages", body))["message"]["id"])
    return ids


async def messages(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages?limit=500")).json()["messages"]  # type: ignore[no-any-return]


async def compact(service: Service, chat_id: str, expect: int = 200) -> dict[str, Any]:
    response = await service.http.post(f"/api/v2/chats/{chat_id}/compact")
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def logs(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/compaction/logs")).json()["logs"]  # type: ignore[no-any-return]


async def test_new_bots_compact_automatically_with_no_settings(service: Service) -> None:
    ids = await service.setup_chat()
    bot = (await service.http.get(f"/api/v2/bots/{ids['bot']}")).json()["bot"]
    assert bot["compaction_enabled"] is True and bot["compaction_threshold"] == 0
    assert bot["compaction_ratio_used"] is False and bot["compaction_model_id"] is None
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["automatic"] == {"active": True, "reason": None}
    assert status["context"]["window"] == 8000 and status["context"]["estimated"] is False


async def test_the_picker_lists_only_models_that_can_summarize(service: Service) -> None:
    ids = await service.setup_chat()
    codex = await service.post("/api/v2/providers", {"name": "cx", "kind": "openai-codex", "base_url": "http://a.b"})
    codex_model = (
        await service.post(
            "/api/v2/models",
            {
                "provider_id": codex["provider"]["id"],
                "name": "codex-x",
                "context_window": 100_000,
            },
        )
    )["model"]
    no_window = (await service.post("/api/v2/models", {"provider_id": ids["provider"], "name": "mystery"}))["model"]
    eligible = (await service.http.get(f"/api/v2/bots/{ids['bot']}/compaction/models")).json()["models"]
    assert [m["id"] for m in eligible] == [ids["model"]]
    refused = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"compaction_model_id": codex_model["id"]})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "compaction.model_unavailable"
    assert refused.json()["error"]["params"]["reason"] == "output-limit-unsupported"
    window = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"compaction_model_id": no_window["id"]})
    assert window.json()["error"]["params"]["reason"] == "window-unknown"
    chosen = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"compaction_model_id": ids["model"]})
    assert chosen.json()["bot"]["compaction_model_id"] == ids["model"]
    reset = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"compaction_model_id": None})
    assert reset.json()["bot"]["compaction_model_id"] is None


async def test_a_codex_chat_model_without_a_compaction_model_does_not_compact_and_says_why(service: Service) -> None:
    ids = await service.setup_chat(kind="openai-codex")
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["automatic"] == {"active": False, "reason": "output-limit-unsupported"}
    error = (await compact(service, ids["chat"], expect=422))["error"]
    assert error["code"] == "compaction.model_unavailable" and error["params"]["reason"] == "output-limit-unsupported"
    answer = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/compact", "stream": False}, 200)
    assert "output-limit-unsupported" in answer["message"]["content"]
    assert service.fake.requests == []


@pytest.mark.parametrize("chat_type", ["chat", "discuss", "pipeline"])
async def test_compact_now_folds_old_history_into_a_stored_summary(service: Service, chat_type: str) -> None:
    ids = await service.setup_chat(context_window=4000)
    chat = (await service.post("/api/v2/chats", {"bot_id": ids["bot"], "type": chat_type}))["chat"]["id"]
    raw = await fill(service, chat, 12)
    service.fake.script(Reply(SUMMARY, output_tokens=20))
    outcome = await compact(service, chat)
    assert outcome["status"] == "completed" and outcome["summary"].endswith(SUMMARY)
    assert 0 < outcome["message_count"] < len(raw)
    assert is_summarizer(service.fake.last) and service.fake.last.json["max_tokens"] == 400
    stored = await messages(service, chat)
    assert len(stored) == len(raw)  # raw history is never deleted
    covered = [m["id"] for m in stored if m["summarized_by"]]
    assert covered == raw[: outcome["message_count"]]
    summaries = (await service.http.get(f"/api/v2/chats/{chat}/summaries")).json()["summaries"]
    assert [s["covers"] for s in summaries] == [covered]
    preview = (
        await service.http.post("/api/v2/context-preview", json={"chat_id": chat, "user_message": "next"})
    ).json()
    entries = preview["preview"]["entries"]
    block = next(e for e in entries if e["source"] == "summary")
    assert block["included"] and block["stands_for"] == covered
    listed = {e["identifier"]: e for e in entries if e["identifier"] in set(covered)}
    assert set(listed) == set(covered)  # the records the summary stands for, each marked summarized
    assert all(not e["included"] and e["reason"] == "summarized" for e in listed.values())
    entry = (await logs(service, chat))[0]
    assert entry["status"] == "completed" and entry["trigger"] == "manual" and entry["message_count"] == len(covered)
    assert entry["model"] == "gpt-4o" and entry["output_tokens"] == 20 and entry["id"] == outcome["log_id"]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply("   "), "COMPACTION_SUMMARY_EMPTY"),
        (Reply("A summary that was cut off", finish_reason="length"), "COMPACTION_SUMMARY_TRUNCATED"),
        (Reply("long " * 3000), "COMPACTION_SUMMARY_NOT_SMALLER"),
        (Error(500), "PROVIDER_SERVER_ERROR"),
    ],
)
async def test_a_bad_summary_or_a_provider_error_changes_nothing(service: Service, reply: Any, code: str) -> None:
    ids = await service.setup_chat(context_window=4000)
    raw = await fill(service, ids["chat"], 12)
    service.fake.script(reply, reply)
    outcome = await compact(service, ids["chat"])
    assert outcome["status"] == "failed" and outcome["error_code"] == code and outcome["message_count"] == 0
    stored = await messages(service, ids["chat"])
    assert [m["id"] for m in stored] == raw and not any(m["summarized_by"] for m in stored)
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/summaries")).json()["summaries"] == []
    assert (await logs(service, ids["chat"]))[0]["error_code"] == code


async def test_a_failure_arms_the_cooldown_and_compact_bypasses_it(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 12)
    service.fake.script(Error(500), Error(500))
    assert (await compact(service, ids["chat"]))["status"] == "failed"
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["automatic"] == {"active": False, "reason": "cooldown"}
    service.fake.script(Reply(SUMMARY))
    assert (await compact(service, ids["chat"]))["status"] == "completed"
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["automatic"]["active"] is True and status["last_compaction"]["status"] == "completed"


async def test_a_session_at_75_percent_compacts_before_the_next_turn_is_sent(service: Service) -> None:
    ids = await service.setup_chat(context_window=3000, response_reserve=200)
    await fill(service, ids["chat"], 22)  # ~2,400 compactable tokens: over 75% of 3,000, one pass from 40%
    service.fake.script(Reply(SUMMARY), Reply("Here is my answer."))
    reply = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "so?", "stream": False}, 200)
    assert reply["message"]["content"] == "Here is my answer."
    first, second = service.fake.requests[:2]
    assert is_summarizer(first) and not is_summarizer(second)
    assert any(SUMMARY in str(m.get("content")) for m in second.json["messages"])
    assert (await logs(service, ids["chat"]))[0]["trigger"] == "sync"


async def test_a_turn_over_half_the_window_schedules_a_background_pass(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000, response_reserve=200)
    await fill(service, ids["chat"], 20)  # ~2,200 compactable tokens: over 50% of 4,000, under 75%
    service.fake.script(Reply("Sure."), Reply(SUMMARY))
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "go on", "stream": False}, 200)
    for _ in range(200):
        done = [entry for entry in await logs(service, ids["chat"]) if entry["status"] != "running"]
        if done:
            break
        await asyncio.sleep(0.05)
    assert done[0]["trigger"] == "background" and done[0]["status"] == "completed"
    assert not is_summarizer(service.fake.requests[0])  # the reply went first: nothing delayed it


async def test_a_history_over_twice_the_window_is_compacted_behind_the_turn_not_before_it(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=100)
    await fill(service, ids["chat"], 60)  # ~4,000 compactable tokens: over 200% of 1,200
    service.fake.script(
        Reply("Here is my answer."), *[Reply(f"Summary part {n}: words were counted.") for n in range(9)]
    )
    reply = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "so?", "stream": False}, 200)
    assert reply["message"]["content"] == "Here is my answer."
    assert not is_summarizer(service.fake.requests[0])  # no pass ran before the turn: nothing delayed it
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    assert any("compacted in the background" in note for note in audit["diagnostics"])
    for _ in range(200):  # a count, not a clock: the queued run finishes behind the turn
        done = [entry for entry in await logs(service, ids["chat"]) if entry["status"] != "running"]
        if done:
            break
        await asyncio.sleep(0.05)
    assert done[0]["trigger"] == "background" and done[0]["status"] == "completed"


async def test_a_session_far_over_its_window_compacts_in_several_passes(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=100)
    raw = await fill(service, ids["chat"], 60)  # ~4,000 tokens, more than three windows
    service.fake.script(*[Reply(f"Summary part {n}: the user counted words.") for n in range(20)])
    outcome = await compact(service, ids["chat"])
    assert outcome["status"] == "completed"
    entry = (await logs(service, ids["chat"]))[0]
    assert entry["passes"] > 1
    summarizer_calls = [r for r in service.fake.requests if is_summarizer(r)]
    assert len(summarizer_calls) == entry["passes"]
    stored = await messages(service, ids["chat"])
    assert len(stored) == len(raw)
    summaries = (await service.http.get(f"/api/v2/chats/{ids['chat']}/summaries")).json()["summaries"]
    assert len(summaries) == 1  # summaries roll up instead of stacking
    assert set(summaries[0]["covers"]) == {m["id"] for m in stored if m["summarized_by"]}


async def test_concurrent_compactions_of_one_chat_make_one_pass(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 12)
    service.fake.script(Reply(SUMMARY, delay=0.5), Reply("second summary should not be asked for"))
    first, second = await asyncio.gather(compact(service, ids["chat"]), compact(service, ids["chat"]))
    assert first["status"] == second["status"] == "completed"
    assert first["log_id"] == second["log_id"]
    assert len([r for r in service.fake.requests if is_summarizer(r)]) == 1


async def test_an_edit_during_a_pass_aborts_it(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    raw = await fill(service, ids["chat"], 12)
    service.fake.script(Reply(SUMMARY, delay=0.6))
    running = asyncio.create_task(compact(service, ids["chat"]))
    await service.fake.await_for(lambda: len(service.fake.requests) == 1)
    await service.http.patch(f"/api/v2/chats/{ids['chat']}/messages/{raw[0]}", json={"pinned": True})
    outcome = await running
    assert outcome["status"] == "failed" and outcome["error_code"] == "COMPACTION_HISTORY_CHANGED"
    assert not any(m["summarized_by"] for m in await messages(service, ids["chat"]))
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["automatic"]["active"] is True  # history moving on arms no cooldown


async def test_status_and_compact_commands_are_answered_in_the_chat_without_the_chat_model(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 4)
    status = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/status", "stream": False}, 200)
    assert status["message"]["content"].startswith("Context: ") and status["usage"] is None
    assert "Automatic compaction: on." in status["message"]["content"]
    service.fake.script(Reply(SUMMARY))
    streamed = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "/compact run"})
    assert "event: done" in streamed.text and "Compacted" in streamed.text
    assert all(is_summarizer(r) for r in service.fake.requests)
    commands = [m for m in await messages(service, ids["chat"]) if m["meta"].get("command")]
    assert [m["role"] for m in commands] == ["user", "assistant", "user", "assistant"]
    preview = await service.http.post("/api/v2/context-preview", json={"chat_id": ids["chat"], "user_message": "x"})
    assert not any(e["content"].startswith("/status") for e in preview.json()["preview"]["entries"])


async def test_logs_are_listed_newest_first_per_bot_and_paginated(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 12)
    service.fake.script(Error(500), Error(500), Reply(SUMMARY))
    await compact(service, ids["chat"])
    await compact(service, ids["chat"])
    page = (await service.http.get(f"/api/v2/bots/{ids['bot']}/compaction/logs?limit=1")).json()
    assert page["has_more"] is True and page["logs"][0]["status"] == "completed"
    older = (await service.http.get(f"/api/v2/bots/{ids['bot']}/compaction/logs?limit=1&offset=1")).json()
    assert older["logs"][0]["status"] == "failed" and older["has_more"] is False


async def test_pending_background_work_is_picked_up_after_a_restart(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 12)
    database = service.backend.database()
    await database.start()
    try:  # an instance that only queues (``serve --no-jobs``) queued a pass, and nothing ran it yet
        queueing = make_runner(database, Compactor(database), run_jobs=False)
        await queueing.start()
        try:
            assert await queueing.queue_compaction(ids["chat"]) is True
        finally:
            await queueing.stop()
    finally:
        await database.close()
    service.fake.script(Reply(SUMMARY))
    from contextshift.api.app import create_app
    from tests.api.conftest import CLIENT_OPTIONS, Server

    with Server(create_app(database=service.backend.database(), client_options=CLIENT_OPTIONS)):
        for _ in range(200):
            entries = await logs(service, ids["chat"])
            if entries and entries[0]["status"] != "running":
                break
            await asyncio.sleep(0.05)
    assert entries[0]["trigger"] == "background" and entries[0]["status"] == "completed"
