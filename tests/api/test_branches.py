"""Editing an older message makes a new branch (issue 27): the edit is a new version of the message, the old
continuation stays with the old version (nothing is lost), choosing a version brings its continuation back, and
the prompt (the preview and the next turn) follows the branch shown. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Account, Service
from tests.fakes import Reply


async def _messages(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


async def _turn(service: Service, chat_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return await service.post(f"/api/v2/chats/{chat_id}/generate", {**body, "stream": False}, 200)


async def _two_turns(service: Service) -> tuple[dict[str, str], list[dict[str, Any]]]:
    ids = await service.setup_chat()
    service.fake.script(Reply("Red."), Reply("Green."))
    await _turn(service, ids["chat"], {"content": "Name a colour"})
    await _turn(service, ids["chat"], {"content": "Another one?"})
    return ids, await _messages(service, ids["chat"])


async def _preview(service: Service, chat_id: str) -> list[str]:
    body = {"chat_id": chat_id, "user_message": "next"}
    preview = (await service.post("/api/v2/context-preview", body, 200))["preview"]
    sent = [m["content"] for m in preview["provider_messages"] if m["role"] != "system"]
    assert sent[-1] == "next"
    return sent[:-1]


async def test_an_edit_branches_and_the_next_turn_sends_only_the_new_branch(service: Service) -> None:
    ids, before = await _two_turns(service)
    question = before[0]
    path = f"/api/v2/chats/{ids['chat']}/messages/{question['id']}"
    edited = (await service.post(f"{path}/branch", {"content": "Name a fruit"}, 200))["message"]
    assert edited["content"] == "Name a fruit" and edited["alternatives"] == 2 and edited["alternative"] == 1
    assert edited["branch_point"] is True
    assert [m["id"] for m in await _messages(service, ids["chat"])] == [question["id"]]

    service.fake.script(Reply("A pear."), Reply("A plum."))
    await _turn(service, ids["chat"], {"retry_of": question["id"]})
    assert [m["content"] for m in service.fake.last.messages] == ["Name a fruit"]
    await _turn(service, ids["chat"], {"content": "And another?"})
    sent = [m["content"] for m in service.fake.last.messages]
    assert sent == ["Name a fruit", "A pear.", "And another?"]
    after = await _messages(service, ids["chat"])
    assert [m["content"] for m in after] == ["Name a fruit", "A pear.", "And another?", "A plum."]
    assert [m["seq"] for m in after] == [1, 5, 6, 7]  # a seq is never reused: the old branch keeps 2–4


async def test_switching_back_restores_the_old_continuation_and_nothing_is_lost(service: Service) -> None:
    ids, before = await _two_turns(service)
    question = before[0]
    path = f"/api/v2/chats/{ids['chat']}/messages/{question['id']}"
    pinned = f"/api/v2/chats/{ids['chat']}/messages/{before[1]['id']}"
    assert (await service.http.patch(pinned, json={"pinned": True})).status_code == 200
    before[1]["pinned"] = True
    await service.post(f"{path}/branch", {"content": "Name a fruit"}, 200)
    service.fake.script(Reply("A pear."))
    await _turn(service, ids["chat"], {"retry_of": question["id"]})
    new_branch = await _messages(service, ids["chat"])

    old = (await service.http.patch(path, json={"alternative": 0})).json()["message"]
    assert old["content"] == "Name a colour" and old["alternative"] == 0 and old["alternatives"] == 2
    restored = await _messages(service, ids["chat"])
    keys = ("id", "seq", "role", "content", "pinned", "meta", "created_at")
    assert [{k: m[k] for k in keys} for m in restored[1:]] == [{k: m[k] for k in keys} for m in before[1:]]
    assert await _preview(service, ids["chat"]) == ["Name a colour", "Red.", "Another one?", "Green."]
    service.fake.script(Reply("Blue."))
    await _turn(service, ids["chat"], {"content": "One more?"})
    sent = [m["content"] for m in service.fake.last.messages]
    assert sent == ["Name a colour", "Red.", "Another one?", "Green.", "One more?"]

    again = (await service.http.patch(path, json={"alternative": 1})).json()["message"]
    assert again["content"] == "Name a fruit"
    assert [m["id"] for m in await _messages(service, ids["chat"])] == [m["id"] for m in new_branch]
    assert await _preview(service, ids["chat"]) == ["Name a fruit", "A pear."]


async def test_a_branch_inside_a_branch_keeps_both_continuations(service: Service) -> None:
    ids, before = await _two_turns(service)
    first, _red, second, _green = before
    chat = f"/api/v2/chats/{ids['chat']}/messages"
    await service.post(f"{chat}/{second['id']}/branch", {"content": "A warm one?"}, 200)
    service.fake.script(Reply("Orange."))
    await _turn(service, ids["chat"], {"retry_of": second["id"]})
    await service.post(f"{chat}/{first['id']}/branch", {"content": "Name a fruit"}, 200)
    assert [m["content"] for m in await _messages(service, ids["chat"])] == ["Name a fruit"]

    await service.http.patch(f"{chat}/{first['id']}", json={"alternative": 0})
    shown = [m["content"] for m in await _messages(service, ids["chat"])]
    assert shown == ["Name a colour", "Red.", "A warm one?", "Orange."]
    await service.http.patch(f"{chat}/{second['id']}", json={"alternative": 0})
    shown = [m["content"] for m in await _messages(service, ids["chat"])]
    assert shown == ["Name a colour", "Red.", "Another one?", "Green."]


async def test_a_branch_of_a_reply_or_of_anothers_chat_is_refused_and_changes_nothing(
    service: Service, other_user: Account
) -> None:
    ids, before = await _two_turns(service)
    chat = f"/api/v2/chats/{ids['chat']}/messages"
    refused = await service.http.post(f"{chat}/{before[1]['id']}/branch", json={"content": "x"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "MESSAGE_NOT_EDITABLE"
    foreign = await other_user.http.post(f"{chat}/{before[0]['id']}/branch", json={"content": "x"})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "CHAT_NOT_FOUND"
    empty = await service.http.post(f"{chat}/{before[0]['id']}/branch", json={"content": ""})
    assert empty.status_code == 422
    missing = await service.http.post(f"{chat}/nope/branch", json={"content": "x"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "MESSAGE_NOT_FOUND"
    await service.post(f"{chat}/{before[0]['id']}/branch", {"content": "Name a fruit"}, 200)
    bad = await service.http.patch(f"{chat}/{before[0]['id']}", json={"alternative": 2})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "ALTERNATIVE_NOT_FOUND"
    assert [m["content"] for m in await _messages(service, ids["chat"])] == ["Name a fruit"]
