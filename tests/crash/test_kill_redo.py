"""N5: ``kill -9`` of a real ``contextshift serve`` during a streaming regenerate and a streaming continue.

What the client saw is stored while it streams and kept after the restart, marked ``interrupted``: a regenerate's
text as the new version of the reply (the earlier one untouched, the new one shown), a continue's as the reply's
original text followed by what came of the extension. Waits are bounded by counting polls of 0.1 s.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.crash.conftest import Served
from tests.crash.test_kill import _messages, _post, _setup_chat, _until, _usable
from tests.fakes import FakeProvider, Reply


async def _answered_chat(http: httpx.AsyncClient, fake: FakeProvider) -> tuple[str, str]:
    """A chat whose newest message is the model's reply "First answer."; its id and the reply's."""
    chat_id = await _setup_chat(http, fake, 8000)
    fake.script(Reply("First answer."))
    answered = await _post(
        http, f"/api/v2/chats/{chat_id}/generate", {"content": "Name a colour", "stream": False}, 200
    )
    return chat_id, str(answered["message"]["id"])


async def _kill_when_stored(
    served: Served, http: httpx.AsyncClient, chat_id: str, body: dict[str, Any], stored: str
) -> list[str]:
    """Stream a turn until two tokens came and the reply reads ``stored``, then kill the server; the tokens."""
    seen: list[str] = []
    async with http.stream("POST", f"/api/v2/chats/{chat_id}/generate", json={**body, "stream": True}) as stream:
        lines = stream.aiter_lines()  # held until the kill: closing it would cancel the turn instead
        async for line in lines:
            if line.startswith("data: ") and len(seen) < 2:
                seen.append(json.loads(line[6:])["text"])
            if len(seen) == 2:
                break

        async def stored_as_seen() -> bool:
            return any(m["content"] == stored for m in await _messages(http, chat_id))

        await _until(stored_as_seen)  # written while it streams, not when it ends
        served.kill()
    return seen


async def _audit_interrupted(http: httpx.AsyncClient, chat_id: str) -> None:
    """The killed turn's audit is closed by the restarted server as interrupted."""

    async def closed() -> dict[str, Any] | None:
        audit = (await http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]
        return audit if audit["status"] != "prepared" else None

    audit = await _until(closed)
    assert (audit["status"], audit["error_code"]) == ("failed", "GENERATION_INTERRUPTED")


def _interrupted(message: dict[str, Any]) -> tuple[Any, Any, Any]:
    meta = message["meta"]
    return meta.get("partial"), meta.get("partial_reason"), meta.get("finish_reason")


async def test_a_kill_mid_regenerate_keeps_the_new_version_marked_interrupted_and_the_old_one_whole(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.start()
    async with served.client() as http:
        chat_id, reply_id = await _answered_chat(http, fake_provider)
        fake_provider.script(Reply("Green, I think.", chunks=["Green, ", "I ", "think."], hang_after=2))
        seen = await _kill_when_stored(served, http, chat_id, {"regenerate_of": reply_id}, "Green, I ")
    assert seen == ["Green, ", "I "]

    served.start()
    async with served.client() as http:
        await _audit_interrupted(http, chat_id)
        question, reply = await _messages(http, chat_id)
        assert (question["content"], reply["id"], reply["content"]) == ("Name a colour", reply_id, "Green, I ")
        assert (reply["alternatives"], reply["alternative"]) == (2, 1)  # the version switcher shows it
        assert _interrupted(reply) == (True, "interrupted", "interrupted")
        assert reply["reply_to"] == question["id"]
        path = f"/api/v2/chats/{chat_id}/messages/{reply_id}"
        first = (await http.patch(path, json={"alternative": 0})).json()["message"]
        assert (first["content"], first["alternative"], _interrupted(first)) == (
            "First answer.",
            0,
            (None, None, "stop"),
        )
        await _usable(http, fake_provider, chat_id)
        sent = [(m["role"], m["content"]) for m in fake_provider.requests[-1].messages]
        assert sent == [("user", "Name a colour"), ("assistant", "First answer."), ("user", "still there?")]


async def test_a_kill_mid_continue_keeps_the_original_text_and_the_extension_marked_interrupted(
    served: Served, fake_provider: FakeProvider
) -> None:
    served.start()
    async with served.client() as http:
        chat_id, reply_id = await _answered_chat(http, fake_provider)
        fake_provider.script(Reply(" And blue, too.", chunks=[" And ", "blue, ", "too."], hang_after=2))
        seen = await _kill_when_stored(served, http, chat_id, {"continue_of": reply_id}, "First answer. And blue, ")
    assert seen == [" And ", "blue, "]

    served.start()
    async with served.client() as http:
        await _audit_interrupted(http, chat_id)
        question, reply = await _messages(http, chat_id)
        assert (reply["id"], reply["content"]) == (reply_id, "First answer. And blue, ")
        assert (reply["alternatives"], reply["alternative"]) == (1, 0)
        assert _interrupted(reply) == (True, "interrupted", "interrupted")
        assert reply["reply_to"] == question["id"]
        await _usable(http, fake_provider, chat_id)
        sent = [(m["role"], m["content"]) for m in fake_provider.requests[-1].messages]
        assert sent == [
            ("user", "Name a colour"),
            ("assistant", "First answer. And blue, "),
            ("user", "still there?"),
        ]
