"""N2 ownership: bots, lorebooks and chats (with their messages, memories, audits, previews, compaction logs,
summaries and status) are their owner's alone; providers and models are shared and managed by admins.

The main test walks every route of the OpenAPI document as another user, on SQLite and PostgreSQL, so a route
added later is held to the same rule: with an owned object in its path it answers ``<RESOURCE>_NOT_FOUND``,
and no route shows, changes or uses the owner's objects.
"""

from __future__ import annotations

import re
from typing import Any

from tests.api.conftest import Account, Service
from tests.fakes import Reply

#: Path parameters that name an owned object, and the code another user gets for each (the first one wins).
OWNED = {
    "chat_id": "CHAT_NOT_FOUND",
    "bot_id": "BOT_NOT_FOUND",
    "lorebook_id": "LOREBOOK_NOT_FOUND",
    "memory_id": "MEMORY_NOT_FOUND",
    "audit_id": "PROXY_AUDIT_NOT_FOUND",
    "session_id": "SESSION_NOT_FOUND",
}


def _operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if path.startswith(("/api/v2", "/v1")) and method in ("get", "post", "put", "patch", "delete")
    ]


async def _admin_world(service: Service) -> dict[str, str]:
    """The admin's objects of every kind: provider, model, bot, chat with a reply (so an audit), lorebook,
    memory, message; plus the admin's own user and token ids."""
    ids = await service.setup_chat()
    service.fake.script(Reply("Lisbon it is."))
    done = await service.http.post(
        f"/api/v2/chats/{ids['chat']}/generate", json={"content": "Where do we fly?", "stream": False}
    )
    assert done.status_code == 200, done.text
    entries = [{"keys": ["x"], "content": "Vermax sleeps."}]
    lorebook = await service.post("/api/v2/lorebooks", {"name": "secret lore", "entries": entries})
    await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"lorebook_ids": [lorebook["lorebook"]["id"]]})
    memory = await service.post(f"/api/v2/bots/{ids['bot']}/memories", {"content": "The admin's secret memory."})
    message = await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "mine"})
    service.fake.script(Reply("Porto, then."))
    proxied = await service.http.post(
        "/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "And then?"}]}
    )
    assert proxied.status_code == 200, proxied.text
    me = (await service.http.get("/api/v2/me")).json()["user"]
    token = (await service.http.get("/api/v2/tokens")).json()["tokens"][0]
    async with service.client() as browser:  # the admin's browser session
        assert (await browser.post("/session", json={"token": service.token})).status_code == 200
    session = (await service.http.get("/api/v2/sessions")).json()["sessions"][0]
    return {
        **ids,
        "lorebook": lorebook["lorebook"]["id"],
        "memory": memory["memory"]["id"],
        "message": message["message"]["id"],
        "user": me["id"],
        "token": token["id"],
        "audit": proxied.headers["x-contextshift-audit"],
        "session": session["id"],
    }


async def _snapshot(service: Service, world: dict[str, str]) -> list[Any]:
    """Everything the admin owns or manages, as the admin reads it (``last_used_at`` left out: reads set it)."""
    paths = [
        f"/api/v2/bots/{world['bot']}",
        f"/api/v2/chats/{world['chat']}",
        f"/api/v2/chats/{world['chat']}/messages",
        f"/api/v2/chats/{world['chat']}/context-audit",
        f"/api/v2/chats/{world['chat']}/compaction/logs",
        f"/api/v2/chats/{world['chat']}/summaries",
        f"/api/v2/lorebooks/{world['lorebook']}",
        f"/api/v2/bots/{world['bot']}/memories",
        f"/api/v2/providers/{world['provider']}",
        f"/api/v2/models/{world['model']}",
        f"/api/v2/proxy-audits/{world['audit']}",
        "/api/v2/users",
        "/api/v2/bots",
        "/api/v2/chats",
        "/api/v2/lorebooks",
    ]
    shots: list[Any] = []
    for path in paths:
        response = await service.http.get(path)
        assert response.status_code == 200, (path, response.text)
        body = response.json()
        if "model" in body:  # the shared model learns its calibration from everyone's calls (T5): not a change
            body["model"].pop("calibration", None)
        shots.append((path, body))
    tokens = (await service.http.get("/api/v2/tokens")).json()["tokens"]
    shots.append([{k: v for k, v in t.items() if k != "last_used_at"} for t in tokens])
    return shots


def _bodies(world: dict[str, str], fake_url: str) -> dict[tuple[str, str], Any]:
    """Valid bodies, so that a refusal is about ownership, not about the body."""
    return {
        ("POST", "/api/v2/providers"): {"name": "p", "kind": "openai", "base_url": fake_url},
        ("PATCH", "/api/v2/providers/{provider_id}"): {"name": "taken over", "base_url": "http://127.0.0.1:9/v1"},
        ("POST", "/api/v2/models"): {"provider_id": world["provider"], "name": "m"},
        ("PATCH", "/api/v2/models/{model_id}"): {"enabled": False},
        ("POST", "/api/v2/bots"): {"name": "mine", "lorebook_ids": [world["lorebook"]]},
        ("PATCH", "/api/v2/bots/{bot_id}"): {"name": "taken over"},
        ("POST", "/api/v2/bots/{bot_id}/memories"): {"content": "planted"},
        ("PATCH", "/api/v2/bots/{bot_id}/memories/{memory_id}"): {"content": "taken over"},
        ("POST", "/api/v2/lorebooks"): {"name": "mine"},
        ("PATCH", "/api/v2/lorebooks/{lorebook_id}"): {"name": "taken over"},
        ("POST", "/api/v2/chats"): {"bot_id": world["bot"]},
        ("PATCH", "/api/v2/chats/{chat_id}"): {"title": "taken over"},
        ("POST", "/api/v2/chats/{chat_id}/messages"): {"role": "user", "content": "planted"},
        ("PATCH", "/api/v2/chats/{chat_id}/messages/{message_id}"): {"pinned": True},
        ("POST", "/api/v2/chats/{chat_id}/generate"): {"content": "hello", "stream": False},
        ("POST", "/api/v2/chats/{chat_id}/compact"): None,
        ("POST", "/api/v2/context-preview"): {"bot_id": world["bot"], "user_message": "hi"},
        ("POST", "/api/v2/users"): {"name": "eve"},
        ("PATCH", "/api/v2/users/{user_id}"): {"role": "user"},
        ("POST", "/api/v2/tokens"): {"name": "mine"},
        ("POST", "/v1/chat/completions"): {"model": "gpt-4o", "messages": [{"role": "user", "content": "hey"}]},
    }


#: Routes whose body names the admin's object: the code another user gets.
BODY_REFERENCES = {
    ("POST", "/api/v2/bots"): "LOREBOOK_NOT_FOUND",
    ("POST", "/api/v2/chats"): "BOT_NOT_FOUND",
    ("POST", "/api/v2/context-preview"): "BOT_NOT_FOUND",
}


def _is_admin_only(method: str, template: str) -> bool:
    if template.startswith("/api/v2/users"):
        return True
    return method != "GET" and template.startswith(("/api/v2/providers", "/api/v2/models"))


async def test_no_route_lets_another_user_reach_an_owners_objects(service: Service, other_user: Account) -> None:
    world = await _admin_world(service)
    before = await _snapshot(service, world)
    provider_calls = len(service.fake.requests)
    params = {
        "bot_id": world["bot"],
        "chat_id": world["chat"],
        "message_id": world["message"],
        "lorebook_id": world["lorebook"],
        "memory_id": world["memory"],
        "provider_id": world["provider"],
        "model_id": world["model"],
        "user_id": world["user"],
        "token_id": world["token"],
        "audit_id": world["audit"],
        "session_id": world["session"],
    }
    private = [world[k] for k in ("bot", "chat", "message", "lorebook", "memory", "audit")]
    private += ["secret lore", "Vermax sleeps.", "The admin's secret memory.", "Lisbon it is.", "Porto, then."]
    private += ["sk-test-KEY-789", "And then?"]
    bodies = _bodies(world, service.fake.base_url)
    document = (await service.http.get("/openapi.json")).json()
    checked = 0
    for method, template in _operations(document):
        names = re.findall(r"\{([^}]+)\}", template)
        unknown = [n for n in names if n not in params]
        assert not unknown, f"{method} {template}: add an object for {unknown} to this test"
        path = template.format(**params)
        default = {} if method in ("POST", "PUT", "PATCH") else None
        body = bodies.get((method, template), default)
        response = await other_user.http.request(method, path, json=body)
        sent = path + repr(body)  # an error may name what the caller sent; nothing else of the owner's
        where = f"{method} {template}: {response.status_code} {response.text[:300]}"
        owned = [OWNED[n] for n in names if n in OWNED]
        if owned:
            known = (method, template) in bodies or method in ("GET", "DELETE")
            allowed = {404} if known else {404, 422}
            assert response.status_code in allowed, where
            if response.status_code == 404:
                assert response.json()["error"]["code"] == owned[0], where
        elif _is_admin_only(method, template):
            assert (response.status_code, response.json()["error"]["code"]) == (403, "FORBIDDEN"), where
        elif (method, template) == ("DELETE", "/api/v2/tokens/{token_id}"):
            assert (response.status_code, response.json()["error"]["code"]) == (404, "TOKEN_NOT_FOUND"), where
        elif (method, template) in BODY_REFERENCES:
            code = BODY_REFERENCES[(method, template)]
            assert (response.status_code, response.json()["error"]["code"]) == (404, code), where
        else:
            assert response.status_code < 500, where
        assert not [p for p in private if p in response.text and p not in sent], where
        checked += 1
    assert checked >= 45
    assert await _snapshot(service, world) == before
    # Nothing was generated or compacted on the admin's chat: the one provider call is the user's own proxy call.
    assert len(service.fake.requests) == provider_calls + 1


async def test_lists_show_only_the_callers_own(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    admin_lore = (await service.post("/api/v2/lorebooks", {"name": "admin lore"}))["lorebook"]["id"]
    bob_bot = await other_user.http.post("/api/v2/bots", json={"name": "bob's", "chat_model_id": ids["model"]})
    assert bob_bot.status_code == 201, bob_bot.text
    bob_bot_id = bob_bot.json()["bot"]["id"]
    bob_chat = (await other_user.http.post("/api/v2/chats", json={"bot_id": bob_bot_id})).json()["chat"]["id"]
    bob_lore = (await other_user.http.post("/api/v2/lorebooks", json={"name": "bob lore"})).json()["lorebook"]["id"]

    async def listed(http: Any, path: str, key: str) -> list[str]:
        return [row["id"] for row in (await http.get(path)).json()[key]]

    assert await listed(service.http, "/api/v2/bots", "bots") == [ids["bot"]]
    assert await listed(other_user.http, "/api/v2/bots", "bots") == [bob_bot_id]
    assert await listed(service.http, "/api/v2/chats", "chats") == [ids["chat"]]
    assert await listed(other_user.http, "/api/v2/chats", "chats") == [bob_chat]
    assert await listed(other_user.http, f"/api/v2/chats?bot_id={ids['bot']}", "chats") == []
    assert await listed(service.http, "/api/v2/lorebooks", "lorebooks") == [admin_lore]
    assert await listed(other_user.http, "/api/v2/lorebooks", "lorebooks") == [bob_lore]
    # The admin is no exception: another user's bot is not found for them either.
    foreign = await service.http.get(f"/api/v2/bots/{bob_bot_id}")
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (404, "BOT_NOT_FOUND")


async def test_a_user_chats_on_a_shared_model_and_sees_no_key(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    providers = await other_user.http.get("/api/v2/providers")
    models = await other_user.http.get("/api/v2/models")
    assert [p["id"] for p in providers.json()["providers"]] == [ids["provider"]]
    assert providers.json()["providers"][0]["has_api_key"] is True and "sk-test-KEY-789" not in providers.text
    assert [m["id"] for m in models.json()["models"]] == [ids["model"]]
    bot = (await other_user.http.post("/api/v2/bots", json={"name": "b", "chat_model_id": ids["model"]})).json()
    chat = (await other_user.http.post("/api/v2/chats", json={"bot_id": bot["bot"]["id"]})).json()["chat"]
    service.fake.script(Reply("Hello, Bob."))
    reply = await other_user.http.post(f"/api/v2/chats/{chat['id']}/generate", json={"content": "hi", "stream": False})
    assert reply.status_code == 200 and reply.json()["message"]["content"] == "Hello, Bob."
    assert "sk-test-KEY-789" not in reply.text


async def test_a_chat_memory_must_be_on_the_callers_own_chat(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    bot = (await other_user.http.post("/api/v2/bots", json={"name": "b"})).json()["bot"]["id"]
    planted = await other_user.http.post(f"/api/v2/bots/{bot}/memories", json={"content": "x", "chat_id": ids["chat"]})
    assert (planted.status_code, planted.json()["error"]["code"]) == (404, "CHAT_NOT_FOUND")


async def test_deleting_a_user_deletes_what_they_own(service: Service, other_user: Account) -> None:
    bot = (await other_user.http.post("/api/v2/bots", json={"name": "b"})).json()["bot"]["id"]
    await other_user.http.post("/api/v2/chats", json={"bot_id": bot})
    await service.http.delete(f"/api/v2/users/{other_user.id}")
    user_id, token = await service.create_user("bob2")
    async with service.client(token) as again:
        assert (await again.get("/api/v2/bots")).json()["bots"] == []
    database = service.backend.database()
    await database.start()
    try:
        from sqlalchemy import text

        async with database.session() as session:
            left = (await session.execute(text("SELECT COUNT(*) FROM bots WHERE id = :b"), {"b": bot})).scalar()
    finally:
        await database.close()
    assert left == 0 and user_id != other_user.id
