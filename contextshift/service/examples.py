"""The bundled example conversations as bots and chats (UI onboarding).

Each ``contextshift/examples/*.json`` becomes one bot (its system prompt, persona, a lorebook of its lorebook
blocks, its memories) and one chat holding its history; the current input (source ``input``) is returned as
the chat's draft, for the composer. The bots have no chat model, so the context meter and the prompt preview
work before any provider is configured. Importing again skips the examples whose bot already exists.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..storage import Repositories
from ..storage.tables import BotRow, ChatRow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: Settings that make each example's meter interesting: a budget its history does not fit in.
SETTINGS: dict[str, dict[str, Any]] = {
    "roleplay-lorebook": {"context_limit": 1600, "response_reserve": 300, "context_strategy": "summarize"},
    "support-anthropic-tools": {"context_limit": 420, "response_reserve": 160, "context_strategy": "truncate"},
    "travel-agent-tools": {"context_limit": 900, "response_reserve": 250, "context_strategy": "truncate"},
}

_STOP = frozenset(
    {
        *("A", "An", "And", "As", "At", "But", "By", "For", "From", "He", "Her", "His", "If", "In", "Is"),
        *("It", "Its", "Of", "On", "Or", "She", "The", "Their", "They", "This", "To", "When", "With", "World"),
    }
)


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.json"))


def title_of(stem: str) -> str:
    return "Example: " + stem.replace("-", " ").capitalize()


def lore_keys(content: str, limit: int = 4) -> list[str]:
    """Key words of a lorebook block: its capitalized words (names), most frequent first."""
    words = re.findall(r"\b[A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})?\b", content)
    seen: dict[str, int] = {}
    for word in words:
        if word.split()[0] in _STOP:
            continue
        seen[word] = seen.get(word, 0) + 1
    return [w for w, _ in sorted(seen.items(), key=lambda kv: -kv[1])][:limit]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def split_example(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The parts of one example: system prompt, persona, lore entries, memories, history and draft."""
    system: list[str] = []
    persona: list[str] = []
    lore: list[dict[str, Any]] = []
    memories: list[str] = []
    history: list[dict[str, Any]] = []
    draft: str | None = None
    for message in messages:
        source = message.get("source")
        role = message.get("role")
        if source == "input":
            draft = _text(message.get("content"))
        elif source in ("persona", "character"):
            persona.append(_text(message.get("content")))
        elif source == "lorebook":
            content = _text(message.get("content"))
            relevance = message.get("relevance")
            lore.append(
                {
                    "keys": lore_keys(content),
                    "content": content,
                    "constant": bool(message.get("pinned")),
                    "order": int(100 * float(relevance)) if isinstance(relevance, int | float) else 100,
                }
            )
        elif source == "memory":
            memories.append(_text(message.get("content")))
        elif role == "system" and source in (None, "system") and not history:
            system.append(_text(message.get("content")))
        else:
            item = {k: v for k, v in message.items() if k not in ("id", "source", "relevance")}
            history.append(item)
    return {
        "system_prompt": "\n\n".join(system),
        "persona": "\n\n".join(persona),
        "lore": lore,
        "memories": memories,
        "history": history,
        "draft": draft,
    }


@dataclass(frozen=True, slots=True)
class ImportedExample:
    """One example made into a bot and a chat."""

    example: str
    bot: BotRow
    chat: ChatRow
    messages: int
    draft: str | None


async def import_examples(repos: Repositories, owner_id: str | None) -> tuple[list[ImportedExample], list[str]]:
    """Import every bundled example whose bot the owner does not have yet, as the owner's own.

    Args:
        repos: the repositories of one open session (the caller commits).
        owner_id: the user the bots, lorebooks and chats belong to.

    Returns:
        The examples imported, and the names of those skipped because their bot already exists.
    """
    existing = {bot.name for bot in await repos.bots.list_all(owner_id=owner_id)}
    imported: list[ImportedExample] = []
    skipped: list[str] = []
    for path in example_files():
        name = title_of(path.stem)
        if name in existing:
            skipped.append(path.stem)
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        parts = split_example(list(data.get("messages", [])))
        lorebook_ids: list[str] = []
        if parts["lore"]:
            book = await repos.lorebooks.create(name=f"{name} lore", entries=parts["lore"], owner_id=owner_id)
            lorebook_ids.append(book.id)
        settings = SETTINGS.get(path.stem, {})
        bot = await repos.bots.create(
            name=name,
            owner_id=owner_id,
            system_prompt=parts["system_prompt"],
            persona=parts["persona"],
            lorebook_ids=lorebook_ids,
            **settings,
        )
        for memory in parts["memories"]:
            await repos.memories.create(bot_id=bot.id, content=memory, chat_id=None)
        chat = await repos.chats.create(bot_id=bot.id, type="chat", title=name.removeprefix("Example: "))
        rows = await repos.messages.append_many(chat.id, parts["history"])
        imported.append(ImportedExample(path.stem, bot, chat, len(rows), parts["draft"]))
    return imported, skipped
