"""Export and import of chats over HTTP (issue 27), on SQLite and PostgreSQL: our JSON round trip, Markdown,
SillyTavern ``.jsonl``, ChatGPT and Open WebUI exports made here, and files that are refused and make nothing."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.server import Reply

from .conftest import Account, Service

IMPORT = "/api/v2/chat-imports"


async def _messages(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


def _shown(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            m["role"],
            m["content"],
            m["pinned"],
            m["standing"],
            bool(m["meta"].get("manualExcluded")),
            m["alternatives"],
            m["alternative"],
        )
        for m in messages
    ]


async def _import(service: Service, bot_id: str, content: str, expect: int = 201) -> dict[str, Any]:
    return await service.post(IMPORT, {"bot_id": bot_id, "content": content, "filename": "file"}, expect)


async def _chat_count(service: Service) -> int:
    return len((await service.http.get("/api/v2/chats")).json()["chats"])


async def test_an_exported_chat_imports_back_with_the_same_messages(service: Service) -> None:
    ids = await service.setup_chat()
    chat = ids["chat"]
    service.fake.script(Reply("Bonjour !", output_tokens=3), Reply("Salut !", output_tokens=3))
    await service.post(f"/api/v2/chats/{chat}/generate", {"content": "Always answer in French.", "stream": False}, 200)
    first, answer = await _messages(service, chat)
    await service.post(f"/api/v2/chats/{chat}/generate", {"regenerate_of": answer["id"], "stream": False}, 200)
    said = await service.post(f"/api/v2/chats/{chat}/messages", {"role": "user", "content": "你好，我叫山姆。"})
    await service.http.patch(f"/api/v2/chats/{chat}/messages/{said['message']['id']}", json={"pinned": True})
    await service.http.patch(f"/api/v2/chats/{chat}/messages/{first['id']}", json={"meta": {"manualExcluded": True}})
    before = await _messages(service, chat)
    exported = await service.http.get(f"/api/v2/chats/{chat}/export")
    assert exported.status_code == 200 and "attachment" in exported.headers["content-disposition"]
    document = exported.json()
    assert document["format"] == "contextshift.chat" and len(document["messages"]) == 3
    imported = await _import(service, ids["bot"], exported.text)
    assert imported["source"] == "contextshift" and imported["messages"] == 3
    (new,) = imported["chats"]
    assert new["id"] != chat and new["bot_id"] == ids["bot"]
    after = await _messages(service, new["id"])
    assert _shown(after) == _shown(before)
    assert _shown(after)[1][5:] == (2, 1)  # both versions of the regenerated reply, the second shown
    markdown = await service.http.get(f"/api/v2/chats/{chat}/export", params={"format": "markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert "## User · #3 (pinned)" in markdown.text and "你好，我叫山姆。" in markdown.text
    assert "## Assistant · #2 (version 2 of 2)" in markdown.text and "Salut !" in markdown.text


async def test_a_sillytavern_chat_imports_with_its_swipes(service: Service) -> None:
    ids = await service.setup_chat()
    lines = [
        {"user_name": "You", "character_name": "Seraphina", "create_date": "2025-01-01@10h00m00s"},
        {"name": "Seraphina", "is_user": False, "mes": "Welcome, traveller.", "swipes": ["Welcome, traveller."]},
        {"name": "You", "is_user": True, "mes": "Where am I?"},
        {
            "name": "Seraphina",
            "is_user": False,
            "mes": "In the glade.",
            "swipes": ["In the forest.", "In the glade."],
            "swipe_id": 1,
        },
        {"name": "System", "is_user": False, "is_system": True, "mes": "A note left out of prompts."},
    ]
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n"
    imported = await _import(service, ids["bot"], text)
    assert imported["source"] == "sillytavern" and imported["messages"] == 4
    (chat,) = imported["chats"]
    assert chat["title"] == "Seraphina (SillyTavern)"
    got = await _messages(service, chat["id"])
    assert [(m["role"], m["content"], m["name"]) for m in got] == [
        ("assistant", "Welcome, traveller.", "Seraphina"),
        ("user", "Where am I?", "You"),
        ("assistant", "In the glade.", "Seraphina"),
        ("assistant", "A note left out of prompts.", "System"),
    ]
    assert (got[2]["alternatives"], got[2]["alternative"]) == (2, 1)
    assert got[3]["meta"] == {"manualExcluded": True}


def _chatgpt(title: str, turns: list[tuple[str, str, str, str | None]], current: str) -> dict[str, Any]:
    """A ChatGPT conversation: (node id, role, text, parent id) nodes under a hidden root."""
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    for node, role, text, parent in turns:
        message = {"id": node, "author": {"role": role}, "content": {"content_type": "text", "parts": [text]}}
        mapping[node] = {"id": node, "message": message, "parent": parent or "root", "children": []}
        mapping[parent or "root"]["children"].append(node)
    return {"title": title, "create_time": 1.0, "mapping": mapping, "current_node": current}


async def test_a_chatgpt_export_imports_each_conversation_along_its_current_branch(service: Service) -> None:
    ids = await service.setup_chat()
    trip = _chatgpt(
        "Trip",
        [
            ("s", "system", "", None),
            ("u1", "user", "Plan a trip", "s"),
            ("a1", "assistant", "Where to?", "u1"),
            ("u2", "user", "Lisbon", "a1"),
            ("u2b", "user", "Porto", "a1"),  # an edit: the branch shown is the Porto one
            ("a2", "assistant", "Porto it is.", "u2b"),
        ],
        current="a2",
    )
    hello = _chatgpt("Hello", [("x", "user", "Hi 🎉", None)], current="x")
    imported = await _import(service, ids["bot"], json.dumps([trip, hello], ensure_ascii=False))
    assert imported["source"] == "chatgpt" and imported["messages"] == 5
    first, second = imported["chats"]
    assert (first["title"], second["title"]) == ("Trip", "Hello")
    texts = [(m["role"], m["content"]) for m in await _messages(service, first["id"])]
    assert texts == [
        ("user", "Plan a trip"),
        ("assistant", "Where to?"),
        ("user", "Porto"),
        ("assistant", "Porto it is."),
    ]
    assert [m["content"] for m in await _messages(service, second["id"])] == ["Hi 🎉"]


async def test_an_open_webui_export_imports_its_current_branch(service: Service) -> None:
    ids = await service.setup_chat()
    history = {
        "currentId": "b",
        "messages": {
            "q": {"id": "q", "parentId": None, "role": "user", "content": "Пятница?"},
            "a": {"id": "a", "parentId": "q", "role": "assistant", "content": "Old answer"},
            "b": {"id": "b", "parentId": "q", "role": "assistant", "content": "Да, в пятницу."},
        },
    }
    exported = [{"id": "c1", "title": "Неделя", "chat": {"title": "Неделя", "history": history}}]
    imported = await _import(service, ids["bot"], json.dumps(exported, ensure_ascii=False))
    assert imported["source"] == "openwebui"
    (chat,) = imported["chats"]
    assert chat["title"] == "Неделя"
    assert [m["content"] for m in await _messages(service, chat["id"])] == ["Пятница?", "Да, в пятницу."]


async def test_bad_files_are_refused_with_a_code_and_make_no_chat(service: Service) -> None:
    ids = await service.setup_chat()
    looped = _chatgpt("Loop", [("u", "user", "Hi", None)], current="u")
    looped["mapping"]["root"]["parent"] = "u"
    good = _chatgpt("Good", [("u", "user", "Hi", None)], current="u")
    broken = {"format": "contextshift.chat", "version": 1, "chat": {}, "messages": [{"role": "robot"}]}
    cases = [
        ("not json at all {", 400, "IMPORT_NOT_READABLE"),
        (json.dumps({"hello": "world"}), 422, "IMPORT_FORMAT_UNKNOWN"),
        (json.dumps([good, looped]), 422, "IMPORT_INVALID"),
        (json.dumps(broken), 422, "IMPORT_INVALID"),
        (json.dumps({**broken, "version": 99}), 422, "IMPORT_INVALID"),
        (json.dumps([_chatgpt("Empty", [("u", "user", "  ", None)], current="u")]), 422, "IMPORT_EMPTY"),
        (json.dumps({"mes": "nul \u0000 here", "is_user": True}), 400, "TEXT_NOT_STORABLE"),
        (json.dumps({"mes": "half \ud800 pair", "is_user": True}), 400, "TEXT_NOT_STORABLE"),
        ('{"user_name": "You"}\n{"name": "x"}\n', 422, "IMPORT_INVALID"),
        ("[" * 5000 + "]" * 5000, 400, "IMPORT_NOT_READABLE"),
        (
            json.dumps(
                {**broken, "messages": [{"role": "user", "content": "ok"}, {"role": "user", "name": "n" * 201}]}
            ),
            422,
            "VALIDATION",
        ),
    ]
    before = await _chat_count(service)
    for content, status, code in cases:
        answer = await _import(service, ids["bot"], content, expect=status)
        assert answer["error"]["code"] == code, content[:80]
    assert await _chat_count(service) == before


async def test_another_users_chat_and_bot_are_not_found(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    assert (await other_user.http.get(f"/api/v2/chats/{ids['chat']}/export")).status_code == 404
    body = {"bot_id": ids["bot"], "content": json.dumps(_chatgpt("x", [("u", "user", "Hi", None)], current="u"))}
    answer = await other_user.http.post(IMPORT, json=body)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "BOT_NOT_FOUND"
