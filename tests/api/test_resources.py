"""V1 resources over HTTP: wrapped objects, write-only API keys, one error envelope with stable codes."""

from __future__ import annotations

import httpx

from tests.api.conftest import Service


async def test_provider_keys_are_stored_but_never_returned(service: Service) -> None:
    created = await service.post(
        "/api/v2/providers",
        {"name": "main", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-very-secret"},
    )
    provider = created["provider"]
    assert provider["has_api_key"] is True and provider["enforces_output_limit"] is True
    assert "api_key" not in provider
    listing = await service.http.get("/api/v2/providers")
    one = await service.http.get(f"/api/v2/providers/{provider['id']}")
    for response in (listing, one):
        assert "sk-very-secret" not in response.text
    patched = await service.http.patch(f"/api/v2/providers/{provider['id']}", json={"api_key": ""})
    assert patched.json()["provider"]["has_api_key"] is False


async def test_codex_providers_are_marked_as_not_enforcing_output_limits(service: Service) -> None:
    created = await service.post(
        "/api/v2/providers", {"name": "codex", "kind": "openai-codex", "base_url": "http://127.0.0.1:9"}
    )
    assert created["provider"]["enforces_output_limit"] is False


async def test_models_report_the_tokenizer_profile_they_resolve_to(service: Service) -> None:
    provider = (await service.post("/api/v2/providers", {"name": "p", "kind": "openai", "base_url": "http://x.test"}))[
        "provider"
    ]
    exact = (await service.post("/api/v2/models", {"provider_id": provider["id"], "name": "gpt-4o-mini"}))["model"]
    local = (await service.post("/api/v2/models", {"provider_id": provider["id"], "name": "llama-3-8b"}))["model"]
    forced = (
        await service.post(
            "/api/v2/models", {"provider_id": provider["id"], "name": "my-model", "tokenizer": "cl100k_base"}
        )
    )["model"]
    assert (exact["tokenizer_profile"], exact["tokenizer_approximate"]) == ("o200k_base", False)
    assert (local["tokenizer_profile"], local["tokenizer_approximate"]) == ("approximate", True)
    assert forced["tokenizer_profile"] == "cl100k_base"


async def test_bots_chats_messages_lorebooks_and_memories_round_trip(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="Be brief.", context_strategy="summarize")
    lorebook = (
        await service.post(
            "/api/v2/lorebooks",
            {"name": "world", "entries": [{"keys": ["dragon"], "content": "Vermax sleeps.", "position": "after"}]},
        )
    )["lorebook"]
    assert lorebook["entries"][0]["keys"] == ["dragon"]
    bot = (await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"lorebook_ids": [lorebook["id"]]})).json()
    assert bot["bot"]["lorebook_ids"] == [lorebook["id"]] and bot["bot"]["context_strategy"] == "summarize"
    memory = (await service.post(f"/api/v2/bots/{ids['bot']}/memories", {"content": "Likes tea."}))["memory"]
    memories = (await service.http.get(f"/api/v2/bots/{ids['bot']}/memories")).json()["memories"]
    assert [m["id"] for m in memories] == [memory["id"]]
    first = (await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "hello"}))[
        "message"
    ]
    pinned = await service.http.patch(
        f"/api/v2/chats/{ids['chat']}/messages/{first['id']}", json={"pinned": True, "meta": {"manualExcluded": True}}
    )
    assert pinned.json()["message"]["pinned"] is True
    assert pinned.json()["message"]["meta"] == {"manualExcluded": True}
    page = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()
    assert [m["content"] for m in page["messages"]] == ["hello"] and page["has_more"] is False
    deleted = await service.http.delete(f"/api/v2/chats/{ids['chat']}/messages/{first['id']}")
    assert deleted.json() == {"deleted": True}


async def test_missing_resources_answer_with_their_own_not_found_code(service: Service) -> None:
    for path, code in [
        ("/api/v2/chats/nope", "CHAT_NOT_FOUND"),
        ("/api/v2/bots/nope", "BOT_NOT_FOUND"),
        ("/api/v2/providers/nope", "PROVIDER_NOT_FOUND"),
        ("/api/v2/models/nope", "MODEL_NOT_FOUND"),
        ("/api/v2/lorebooks/nope", "LOREBOOK_NOT_FOUND"),
        ("/api/v2/chats/nope/context-audit", "CHAT_NOT_FOUND"),
    ]:
        response = await service.http.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == code


async def test_bad_requests_share_one_envelope(service: Service) -> None:
    unknown_field = await service.http.post(
        "/api/v2/providers", json={"name": "x", "kind": "openai", "base_url": "http://a", "x": 1}
    )
    assert unknown_field.status_code == 422 and unknown_field.json()["error"]["code"] == "VALIDATION"
    malformed = await service.http.post(
        "/api/v2/providers", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "MALFORMED_JSON"
    route = await service.http.get("/api/v2/no-such-thing")
    assert route.status_code == 404 and route.json()["error"]["code"] == "NOT_FOUND"
    method = await service.http.put("/api/v2/providers")
    assert method.status_code == 405 and method.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    for response in (unknown_field, malformed, route, method):
        assert set(response.json()["error"]) == {"code", "message", "params"}


async def test_an_unregistered_strategy_is_rejected_and_nothing_changes(service: Service) -> None:
    ids = await service.setup_chat()
    rejected = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"context_strategy": "no.such-plugin"})
    assert rejected.status_code == 422
    error = rejected.json()["error"]
    assert error["code"] == "VALIDATION" and error["params"]["field"] == "context_strategy"
    bot = (await service.http.get(f"/api/v2/bots/{ids['bot']}")).json()["bot"]
    assert bot["context_strategy"] == "truncate"


async def test_a_bad_template_is_rejected(service: Service) -> None:
    ids = await service.setup_chat()
    response = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"template": ["history", "bogus", "input"]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION" and error["message"].startswith("template.1")
    missing_input = await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"template": ["history"]})
    assert missing_input.status_code == 422 and "input" in missing_input.json()["error"]["message"]


async def test_deleting_a_chat_deletes_its_messages_and_audit(service: Service) -> None:
    ids = await service.setup_chat()
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": False}, expect=200)
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"] is not None
    assert (await service.http.delete(f"/api/v2/chats/{ids['chat']}")).json() == {"deleted": True}
    gone = await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")
    assert gone.status_code == 404
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:
            from sqlalchemy import text

            audits = (await session.execute(text("SELECT count(*) FROM prompt_context_audits"))).scalar_one()
            messages = (await session.execute(text("SELECT count(*) FROM messages"))).scalar_one()
        assert (audits, messages) == (0, 0)
    finally:
        await database.close()


async def test_health_and_openapi_are_served(service: Service) -> None:
    health = await service.http.get("/healthz")
    assert health.json()["status"] == "ok"
    spec = (await service.http.get("/openapi.json")).json()
    generate = spec["paths"]["/api/v2/chats/{chat_id}/generate"]["post"]["responses"]
    assert {"200", "404", "422", "502", "504"} <= set(generate)
    assert isinstance(httpx.URL(service.url).port, int)
