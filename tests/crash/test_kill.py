"""N5: ``kill -9`` of a real ``contextshift serve`` during a stream and during a compaction pass, then a restart.

After the restart: nothing stored is lost, nothing is left ``prepared`` or ``running``, no lease holds the chat,
and the chat answers again; each within a minute, bounded by counting polls of 0.1 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx

from tests.crash.conftest import POLLS_PER_MINUTE, Served
from tests.fakes import FakeProvider, RecordedRequest, Reply

SUMMARIZER = "You condense the older part of a conversation"
SUMMARY = "The user and the helper planned a trip to Lisbon; budget 2400 euros."


def is_summarizer(request: RecordedRequest) -> bool:
    first = (request.json or {}).get("messages", [{}])[0]
    return str(first.get("content", "")).startswith(SUMMARIZER)


async def _post(http: httpx.AsyncClient, path: str, body: Any, expect: int = 201) -> dict[str, Any]:
    response = await http.post(path, json=body)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def _setup_chat(http: httpx.AsyncClient, fake: FakeProvider, context_window: int) -> str:
    provider = await _post(
        http, "/api/v2/providers", {"name": "fake", "kind": "openai", "base_url": fake.base_url, "api_key": "sk-x"}
    )
    model = await _post(
        http,
        "/api/v2/models",
        {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "context_window": context_window},
    )
    bot = await _post(http, "/api/v2/bots", {"name": "helper", "chat_model_id": model["model"]["id"]})
    chat = await _post(http, "/api/v2/chats", {"bot_id": bot["bot"]["id"]})
    return str(chat["chat"]["id"])


async def _messages(http: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v2/chats/{chat_id}/messages", params={"limit": 500})
    assert response.status_code == 200, response.text
    return response.json()["messages"]  # type: ignore[no-any-return]


async def _until(probe: Any, polls: int = POLLS_PER_MINUTE) -> Any:
    """Poll ``probe()`` (every 0.1 s) until it returns something true; at most ``polls`` times."""
    for _ in range(polls):
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"still not so after {polls} polls")


async def _usable(http: httpx.AsyncClient, fake: FakeProvider, chat_id: str) -> dict[str, Any]:
    """A new turn on the chat answers (the fake's default echo)."""
    fake.script(Reply("Back again."))
    answered = await _post(http, f"/api/v2/chats/{chat_id}/generate", {"content": "still there?", "stream": False}, 200)
    assert answered["message"]["content"] == "Back again."
    return answered


async def test_a_kill_during_a_stream_loses_nothing_and_the_chat_answers_after_a_restart(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.start()
    async with served.client() as http:
        chat_id = await _setup_chat(http, fake_provider, 8000)
        await _post(http, f"/api/v2/chats/{chat_id}/messages", {"role": "user", "content": "Earlier question"})
        await _post(http, f"/api/v2/chats/{chat_id}/messages", {"role": "assistant", "content": "Earlier answer"})
        # The provider sends its first token, then hangs: the stream is open when the process dies.
        fake_provider.script(Reply("First words and then a long silence", chunk_delay=3600))
        async with http.stream(
            "POST", f"/api/v2/chats/{chat_id}/generate", json={"content": "Tell me a story", "stream": True}
        ) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: token"):
                    break  # the generation is under way
            served.kill()
    assert len(fake_provider.requests) == 1

    served.start()  # a new process: a new instance id; the killed one is dead once its heartbeat expires
    async with served.client() as http:

        async def audit_closed() -> dict[str, Any] | None:
            audit = (await http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]
            return audit if audit["status"] != "prepared" else None

        audit = await _until(audit_closed)
        assert (audit["status"], audit["error_code"]) == ("failed", "GENERATION_INTERRUPTED")
        stored = [(m["role"], m["content"]) for m in await _messages(http, chat_id)]
        assert stored[:3] == [
            ("user", "Earlier question"),
            ("assistant", "Earlier answer"),
            ("user", "Tell me a story"),
        ]
        await _usable(http, fake_provider, chat_id)
        after = [(m["role"], m["content"]) for m in await _messages(http, chat_id)]
        assert after[-2:] == [("user", "still there?"), ("assistant", "Back again.")]
        audit = (await http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]
        assert audit["status"] == "completed"


async def test_a_kill_during_a_compaction_pass_frees_the_chat_and_closes_the_log_after_a_restart(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.env["CONTEXTSHIFT_INSTANCE_ID"] = "crash-test-node"  # a restart keeps its id: it cleans up at once
    served.start()
    async with served.client() as http:
        chat_id = await _setup_chat(http, fake_provider, 3000)
        for n in range(22):
            role = "user" if n % 2 == 0 else "assistant"
            body = {"role": role, "content": f"turn {n}: " + " ".join(f"word{n}x{i}" for i in range(30))}
            await _post(http, f"/api/v2/chats/{chat_id}/messages", body)
        before = await _messages(http, chat_id)
        fake_provider.script(Reply(SUMMARY, delay=3600))  # the summarizer hangs before answering
        compacting = asyncio.create_task(http.post(f"/api/v2/chats/{chat_id}/compact"))
        await _until(lambda: _true(len(fake_provider.requests) == 1))
        assert is_summarizer(fake_provider.requests[0])
        served.kill()
        try:
            await compacting
        except httpx.TransportError:
            pass  # the connection died with the process
        else:
            raise AssertionError("the /compact call answered although the process was killed")

    served.start()
    async with served.client() as http:

        async def log_closed() -> list[dict[str, Any]] | None:
            logs = (await http.get(f"/api/v2/chats/{chat_id}/compaction/logs")).json()["logs"]
            return logs if logs and all(e["status"] != "running" for e in logs) else None

        logs = await _until(log_closed)
        assert [(e["trigger"], e["status"], e["error_code"]) for e in logs] == [
            ("manual", "failed", "COMPACTION_INTERRUPTED")
        ]
        after = await _messages(http, chat_id)
        assert [(m["id"], m["content"], m["summarized_by"]) for m in after] == [
            (m["id"], m["content"], None) for m in before
        ]
        fake_provider.script(Reply(SUMMARY))
        compacted = await _post(http, f"/api/v2/chats/{chat_id}/compact", None, 200)  # the lease is free
        # The first pass commits the summary (a manual run goes on until the fake's default echo is refused).
        assert compacted["message_count"] > 0 and SUMMARY in compacted["summary"]
        folded = [m for m in await _messages(http, chat_id) if m["summarized_by"] is not None]
        assert len(folded) == compacted["message_count"]
        await _usable(http, fake_provider, chat_id)


async def _true(value: bool) -> bool:
    return value


async def test_a_kill_mid_reply_keeps_what_the_client_saw_marked_interrupted(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.start()
    async with served.client() as http:
        chat_id = await _setup_chat(http, fake_provider, 8000)
        # Two chunks, then the provider goes quiet: the client has seen both when the process dies.
        fake_provider.script(
            Reply("Once upon a time there was", chunks=["Once upon ", "a time ", "there was"], hang_after=2)
        )
        seen = []
        async with http.stream(
            "POST", f"/api/v2/chats/{chat_id}/generate", json={"content": "Tell me a story", "stream": True}
        ) as stream:
            # Held until the kill: a line iterator left behind by ``break`` is closed by the garbage collector,
            # which closes the connection, and the server would rightly keep the reply as cancelled, not killed.
            lines = stream.aiter_lines()
            async for line in lines:
                if line.startswith("data: ") and len(seen) < 2:
                    seen.append(json.loads(line[6:])["text"])
                if len(seen) == 2:
                    break

            async def stored_as_seen() -> bool:
                return any(m["content"] == "".join(seen) for m in await _messages(http, chat_id))

            await _until(stored_as_seen)  # written while it streams, not when it ends
            served.kill()

    served.start()
    async with served.client() as http:
        stored = await _messages(http, chat_id)
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "Tell me a story"),
            ("assistant", "Once upon a time "),
        ]
        meta = stored[1]["meta"]
        assert (meta["partial"], meta["partial_reason"], meta["finish_reason"]) == (True, "interrupted", "interrupted")
        assert stored[1]["reply_to"] == stored[0]["id"]
        await _usable(http, fake_provider, chat_id)
        roles = [m["role"] for m in fake_provider.requests[-1].messages]
        assert roles == ["user", "assistant", "user"]


async def test_an_input_whose_turn_died_before_any_text_is_marked_and_not_sent_twice_in_a_row(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.start()
    async with served.client() as http:
        chat_id = await _setup_chat(http, fake_provider, 8000)
        fake_provider.script(Reply("never", delay=3600))
        turn = asyncio.create_task(
            http.post(f"/api/v2/chats/{chat_id}/generate", json={"content": "Lost question", "stream": False})
        )
        await _until(lambda: _true(len(fake_provider.requests) == 1))
        served.kill()
        with contextlib.suppress(httpx.TransportError):
            await turn

    served.start()
    async with served.client() as http:
        await _usable(http, fake_provider, chat_id)
        sent = fake_provider.requests[-1].messages
        assert [(m["role"], m["content"]) for m in sent] == [("user", "still there?")]
        lost, question, answer = await _messages(http, chat_id)
        assert lost["content"] == "Lost question" and lost["meta"]["failed"] == {"code": "GENERATION_INTERRUPTED"}
        assert (question["content"], answer["content"]) == ("still there?", "Back again.")
