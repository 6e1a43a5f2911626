"""A chat's own model (issue 27): PATCH ``model_id`` on a chat overrides the bot's chat model for that chat's
turns; the model brings its window, tokenizer and provider; the audit names it; null goes back to the bot's.
On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Account, Service
from tests.fakes import Reply


async def _claude(service: Service, *, window: int = 3000) -> str:
    """A second chat model, on a second provider (Anthropic's protocol, its own key) of the same fake."""
    body = {"name": "other", "kind": "anthropic", "base_url": service.fake.base_url, "api_key": "sk-ant-OTHER"}
    provider = (await service.post("/api/v2/providers", body))["provider"]
    model = {"provider_id": provider["id"], "name": "claude-3-5-haiku", "type": "chat", "context_window": window}
    return (await service.post("/api/v2/models", model))["model"]["id"]  # type: ignore[no-any-return]


async def _preview(service: Service, chat_id: str) -> dict[str, Any]:
    body = {"chat_id": chat_id, "user_message": "hello"}
    return (await service.post("/api/v2/context-preview", body, 200))["preview"]  # type: ignore[no-any-return]


async def test_a_chat_model_overrides_the_bots_with_its_window_provider_and_audit(service: Service) -> None:
    ids = await service.setup_chat(context_window=8000)
    other = await _claude(service, window=3000)
    chat = f"/api/v2/chats/{ids['chat']}"
    assert (await service.http.get(chat)).json()["chat"]["model_id"] is None
    changed = (await service.http.patch(chat, json={"model_id": other})).json()["chat"]
    assert changed["model_id"] == other and changed["title"] == ""
    preview = await _preview(service, ids["chat"])
    assert preview["model"] == "claude-3-5-haiku" and preview["provider_kind"] == "anthropic"
    assert preview["budget"]["context_limit"] == 3000

    service.fake.script(Reply("Hi from the other model."))
    await service.post(f"{chat}/generate", {"content": "hello", "stream": False}, 200)
    sent = service.fake.last
    assert sent.protocol == "anthropic" and sent.body["model"] == "claude-3-5-haiku"
    assert sent.headers["x-api-key"] == "sk-ant-OTHER"
    audit = (await service.http.get(f"{chat}/context-audit")).json()["audit"]
    assert audit["model"] == "claude-3-5-haiku" and audit["budget"]["context_limit"] == 3000

    back = (await service.http.patch(chat, json={"model_id": None})).json()["chat"]
    assert back["model_id"] is None
    preview = await _preview(service, ids["chat"])
    assert preview["model"] == "gpt-4o" and preview["budget"]["context_limit"] == 8000
    service.fake.script(Reply("Hi from the bot's model."))
    await service.post(f"{chat}/generate", {"content": "again", "stream": False}, 200)
    assert service.fake.last.protocol == "openai" and service.fake.last.body["model"] == "gpt-4o"


async def test_a_rename_keeps_the_chat_model_and_a_model_change_keeps_the_title(service: Service) -> None:
    ids = await service.setup_chat()
    other = await _claude(service)
    chat = f"/api/v2/chats/{ids['chat']}"
    await service.http.patch(chat, json={"model_id": other})
    renamed = (await service.http.patch(chat, json={"title": " Pets "})).json()["chat"]
    assert renamed["title"] == "Pets" and renamed["model_id"] == other
    await service.http.patch(chat, json={"model_id": ids["model"]})
    assert (await service.http.get(chat)).json()["chat"] | {"updated_at": None} == renamed | {
        "model_id": ids["model"],
        "updated_at": None,
    }


async def test_a_wrong_model_is_refused_and_changes_nothing(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    chat = f"/api/v2/chats/{ids['chat']}"
    missing = await service.http.patch(chat, json={"model_id": "no-such-model", "title": "New"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "MODEL_NOT_FOUND"
    body = {"provider_id": ids["provider"], "name": "text-embedding-3-small", "type": "embedding"}
    embedding = (await service.post("/api/v2/models", body))["model"]["id"]
    refused = await service.http.patch(chat, json={"model_id": embedding})
    assert refused.status_code == 422
    foreign = await other_user.http.patch(chat, json={"model_id": ids["model"]})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "CHAT_NOT_FOUND"
    stored = (await service.http.get(chat)).json()["chat"]
    assert stored["model_id"] is None and stored["title"] == ""


async def test_deleting_the_chats_model_falls_back_to_the_bots(service: Service) -> None:
    ids = await service.setup_chat(context_window=8000)
    other = await _claude(service)
    chat = f"/api/v2/chats/{ids['chat']}"
    await service.http.patch(chat, json={"model_id": other})
    assert (await service.http.delete(f"/api/v2/models/{other}")).status_code == 200
    assert (await service.http.get(chat)).json()["chat"]["model_id"] is None
    assert (await _preview(service, ids["chat"]))["model"] == "gpt-4o"
