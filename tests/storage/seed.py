"""Small builders shared by the storage tests."""

from __future__ import annotations

from dataclasses import dataclass

from contextshift.storage import Database, Repositories


@dataclass(frozen=True)
class Seeded:
    provider_id: str
    model_id: str
    bot_id: str
    chat_id: str


async def seed_chat(db: Database, *, api_key: str | None = "sk-test-SECRET-123") -> Seeded:
    """A provider, a chat model, a bot on it and one chat."""
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(
            name="local", kind="openai", base_url="http://127.0.0.1:9/v1", api_key=api_key
        )
        model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=8192)
        bot = await repos.bots.create(name="Ada", chat_model_id=model.id)
        chat = await repos.chats.create(bot_id=bot.id, title="first")
        return Seeded(provider.id, model.id, bot.id, chat.id)
