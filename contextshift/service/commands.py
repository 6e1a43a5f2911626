"""Slash commands in a chat (V4, C6, C13, C14): ``/compact``, ``/compact run`` and ``/status``.

They are answered by the service itself, never by the chat model: the command and its answer are stored
as messages marked ``meta.command`` (shown in the chat, never sent to a model).
"""

from __future__ import annotations

from typing import Any

from ..storage import Database, Repositories
from ..storage.tables import MessageRow
from .compaction import Compactor
from .history import COMMAND_KEY
from .status import chat_status
from .summarizer import CompactionUnavailable

COMMANDS = ("/compact", "/compact run", "/status")


def command_of(content: str) -> str | None:
    text = " ".join(content.split()).lower()
    return text if text in COMMANDS else None


def _compact_answer(outcome: dict[str, Any]) -> str:
    if outcome["status"] == "ok":
        done = f"Compacted {outcome['message_count']} message(s) into a summary."
        if outcome.get("passes_failed"):
            done += f" A later pass failed ({outcome['error_code']}); the rest of the history is unchanged."
        return done
    if outcome["status"] == "noop":
        return "Nothing to compact: the history is already as small as it can be."
    return f"Compaction failed ({outcome['error_code']}); every message is still there."


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def status_answer(status: dict[str, Any]) -> str:
    context = status["context"]
    window = f"{context['window']:,}" if context["window"] else "an unknown window"
    estimate = ", estimate" if context["estimated"] else ""
    percent = f" ({context['percent']:.0f}%{estimate})" if context["percent"] is not None else estimate
    lines = [f"Context: {context['tokens']:,} of {window} tokens{percent}."]
    cache = status["prompt_cache"]
    lines.append(f"Prompt cache hit rate: {_percent(cache['hit_rate'])}.")
    tools = ", ".join(f"{t['name']} ×{t['count']}" for t in status["tools_used"]) or "none"
    lines.append(f"Tools used: {tools}.")
    last = status["last_compaction"]
    if last:
        when = last["started_at"].strftime("%Y-%m-%d %H:%M UTC")
        lines.append(f"Last compaction: {last['status']}, {last['message_count']} message(s), {when}.")
    else:
        lines.append("Last compaction: never.")
    automatic = status["automatic"]
    lines.append(
        "Automatic compaction: on." if automatic["active"] else f"Automatic compaction: off ({automatic['reason']})."
    )
    return "\n".join(lines)


async def run_command(db: Database, compactor: Compactor, chat_id: str, command: str) -> MessageRow:
    """Store the command, answer it, store the answer; return the answer message."""
    async with db.session() as session:
        await Repositories(session).messages.append(
            chat_id, {"role": "user", "content": command, "meta": {COMMAND_KEY: command}}
        )
    if command.startswith("/compact"):
        try:
            answer = _compact_answer((await compactor.run(chat_id, "manual")).to_dict())
        except CompactionUnavailable as error:
            answer = f"Compaction is unavailable: {error.message} ({error.code}: {error.reason})"
    else:
        answer = status_answer(await chat_status(db, chat_id))
    async with db.session() as session:
        return await Repositories(session).messages.append(
            chat_id, {"role": "assistant", "content": answer, "meta": {COMMAND_KEY: command}}
        )
