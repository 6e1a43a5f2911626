"""Providers, models and bots: CRUD, validation, and the foreign keys between them."""

from __future__ import annotations

import logging
from datetime import UTC

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from contextshift.storage import Database, InvalidValue, NotFound, Repositories
from contextshift.storage.tables import ProviderRow

from .seed import seed_chat


async def test_provider_crud_round_trip(db: Database) -> None:
    async with db.session() as session:
        repos = Repositories(session)
        created = await repos.providers.create(
            name="OpenRouter", kind="openai", base_url="https://openrouter.ai/api/v1", api_key="sk-or-1"
        )
    async with db.session() as session:
        repos = Repositories(session)
        got = await repos.providers.get(created.id)
        assert got is not None
        assert (got.name, got.kind, got.base_url, got.api_key, got.enabled) == (
            "OpenRouter",
            "openai",
            "https://openrouter.ai/api/v1",
            "sk-or-1",
            True,
        )
        assert got.created_at.tzinfo == UTC and got.updated_at.tzinfo == UTC
        updated = await repos.providers.update(created.id, {"enabled": False, "api_key": None})
        assert updated is not None and not updated.enabled and not updated.has_api_key
        assert updated.updated_at >= got.created_at
        assert [p.id for p in await repos.providers.list_all()] == [created.id]
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.providers.delete(created.id) is True
        assert await repos.providers.delete(created.id) is False
        assert await repos.providers.get(created.id) is None
        assert await repos.providers.update(created.id, {"name": "x"}) is None


async def test_provider_api_key_is_not_in_repr_or_logs(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "sk-test-NEVER-SHOWN-789"
    async with db.session() as session:
        provider = await Repositories(session).providers.create(
            name="p", kind="anthropic", base_url="https://api.anthropic.com", api_key=secret
        )
    assert secret not in repr(provider)
    assert provider.has_api_key
    with pytest.raises(IntegrityError) as caught:  # a failing statement does not quote its parameters
        async with db.session() as session:
            await session.execute(
                insert(ProviderRow).values(
                    id=provider.id,
                    name="dup",
                    kind="openai",
                    base_url="http://x",
                    api_key=secret,
                    enabled=True,
                    created_at=provider.created_at,
                    updated_at=provider.updated_at,
                )
            )
    assert secret not in str(caught.value)
    assert secret not in caplog.text


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "gemini"}, "kind"),
        ({"name": ""}, "name"),
        ({"base_url": 42}, "base_url"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
async def test_invalid_provider_fields_are_rejected(db: Database, fields: dict[str, object], field: str) -> None:
    values: dict[str, object] = {"name": "p", "kind": "openai", "base_url": "http://a", **fields}
    async with db.session() as session:
        with pytest.raises(InvalidValue) as caught:
            await Repositories(session).providers.create(**values)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.code == "VALIDATION"


async def test_updating_an_unknown_field_is_rejected_and_changes_nothing(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        with pytest.raises(InvalidValue, match="id"):
            await Repositories(session).providers.update(seeded.provider_id, {"name": "new", "id": "x"})
        provider = await Repositories(session).providers.get(seeded.provider_id)
        assert provider is not None and provider.name == "local"


async def test_model_crud_and_provider_check(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        embed = await repos.models.create(
            provider_id=seeded.provider_id, name="text-embedding-3-small", type="embedding", tokenizer="cl100k_base"
        )
        assert (embed.type, embed.context_window, embed.max_output_tokens, embed.enabled) == (
            "embedding",
            None,
            None,
            True,
        )
        with pytest.raises(NotFound) as caught:
            await repos.models.create(provider_id="missing", name="x")
        assert caught.value.code == "PROVIDER_NOT_FOUND"
        with pytest.raises(InvalidValue):
            await repos.models.create(provider_id=seeded.provider_id, name="x", context_window=0)
        changed = await repos.models.update(embed.id, {"context_window": 8191, "enabled": False})
        assert changed is not None and changed.context_window == 8191 and not changed.enabled
        assert {m.id for m in await repos.models.list_all(seeded.provider_id)} == {seeded.model_id, embed.id}
        assert await repos.models.delete(embed.id)
        assert await repos.models.get(embed.id) is None


async def test_deleting_a_provider_deletes_its_models_and_unsets_bots(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        assert await Repositories(session).providers.delete(seeded.provider_id)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.models.get(seeded.model_id) is None
        bot = await repos.bots.get(seeded.bot_id)
        assert bot is not None and bot.chat_model_id is None
        assert await repos.chats.get(seeded.chat_id) is not None


async def test_bot_defaults_and_update(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        bot = await repos.bots.create(name="Plain")
        assert (bot.chat_model_id, bot.system_prompt, bot.persona, bot.context_strategy) == (None, "", "", "truncate")
        assert (bot.response_reserve, bot.context_limit, bot.lorebook_ids, bot.template) == (0, None, [], None)
        assert (bot.author_note, bot.author_note_depth) == (None, 4)
        updated = await repos.bots.update(
            bot.id,
            {
                "chat_model_id": seeded.model_id,
                "system_prompt": "You are Ada.",
                "context_limit": 4096,
                "lorebook_ids": ["lb1"],
                "template": ["system_prompt", "history", "current_input"],
                "author_note": "Stay in character.",
                "author_note_depth": 2,
            },
        )
        assert updated is not None
    async with db.session() as session:
        bot_again = await Repositories(session).bots.get(bot.id)
        assert bot_again is not None
        assert bot_again.chat_model_id == seeded.model_id
        assert bot_again.template == ["system_prompt", "history", "current_input"]
        assert (bot_again.context_limit, bot_again.author_note_depth) == (4096, 2)
        assert [b.name for b in await Repositories(session).bots.list_all()] == ["Ada", "Plain"]


async def test_bot_chat_model_must_exist_and_be_a_chat_model(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        with pytest.raises(NotFound) as caught:
            await repos.bots.create(name="x", chat_model_id="nope")
        assert caught.value.code == "MODEL_NOT_FOUND"
        image = await repos.models.create(provider_id=seeded.provider_id, name="dall-e", type="image")
        with pytest.raises(InvalidValue, match="chat_model_id"):
            await repos.bots.update(seeded.bot_id, {"chat_model_id": image.id})
        with pytest.raises(InvalidValue, match="response_reserve"):
            await repos.bots.create(name="x", response_reserve=-1)
        with pytest.raises(InvalidValue, match="colour"):
            await repos.bots.create(name="x", colour="red")


async def test_deleting_a_bot_deletes_its_chats(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        assert await Repositories(session).bots.delete(seeded.bot_id)
    async with db.session() as session:
        assert await Repositories(session).chats.get(seeded.chat_id) is None
