"""Slash commands in a chat (V4, C6, C13, C14): ``/compact``, ``/compact run`` and ``/status``.

They are answered by the service itself, never by the chat model: the command and its answer are stored
as messages marked ``meta.command`` (shown in the chat, never sent to a model).
"""

from __future__ import annotations

from typing import Any

from ..core.vocabulary import COMPLETED, RUNNING, SKIPPED
from ..storage import Database, Repositories
from ..storage.tables import MessageRow
from .compaction import Compactor
from .counting import ServerCounting
from .history import COMMAND_KEY
from .status import chat_status
from .summarizer import CompactionUnavailable

COMMANDS = ("/compact", "/compact run", "/status")


def command_of(content: str) -> str | None:
    text = " ".join(content.split()).lower()
    return text if text in COMMANDS else None


#: A failed pass's code in plain words (the words the web UI's compaction refusal uses: web/static/js/words.js).
COMPACTION_ERROR_WORDS: dict[str, str] = {
    "COMPACTION_SUMMARY_UNFAITHFUL": "the summary was refused",
    "COMPACTION_SUMMARY_EMPTY": "the model wrote an empty summary",
    "COMPACTION_SUMMARY_TRUNCATED": "the summary was cut off by the model's output limit",
    "COMPACTION_SUMMARY_NOT_SMALLER": "the summary was not smaller than what it would replace",
    "COMPACTION_SUMMARY_REJECTED": "the summary was refused",
    "COMPACTION_WINDOW_TOO_SMALL": "the compaction model's window is too small to summarize this history",
    "COMPACTION_INPUT_TOO_LARGE": "the history to summarize is larger than the compaction model can read",
    "COMPACTION_HISTORY_CHANGED": "the history changed while it was being summarized",
    "COMPACTION_INTERRUPTED": "the pass was interrupted before it finished",
}

#: Why the summary check refused a summary (core/compaction/plausibility.py), as words.js' REJECTION_WORDS.
REJECTION_WORDS: dict[str, str] = {
    "other-script": "the summary is written in another alphabet than the conversation",
    "other-language": "the summary is in another language than the conversation",
    "few-facts": "the summary keeps too few of the conversation's names and numbers",
    "refusal": "the model refused to summarize instead of writing a summary",
}


#: Why automatic compaction is off (the status's ``automatic.reason``), as words.js' COMPACTION_REASONS says it.
OFF_WORDS: dict[str, str] = {
    "not-configured": "no compaction model is set and the bot has no chat model",
    "not-chat-model": "the compaction model is not a chat model",
    "model-disabled": "the compaction model is disabled",
    "provider-disabled": "the compaction model's provider is disabled",
    "provider-host-not-allowed": "the compaction model's provider points at a host this server does not allow",
    "output-limit-unsupported": "the model's provider does not enforce output token limits, so it cannot "
    "summarize safely; pick a compaction model in the bot's settings",
    "window-unknown": "the model has no declared context window; set one on the model",
    "disabled": "compaction is turned off in the bot's settings",
    "cooldown": "a recent automatic attempt failed; it waits a few minutes before trying again",
}


def failure_words(code: str | None, reason: str | None) -> str:
    """Why a compaction pass failed, in plain words, with its code for reference."""
    words = COMPACTION_ERROR_WORDS.get(code or "", "the pass failed")
    if reason:
        words += f": {REJECTION_WORDS.get(reason, reason.replace('-', ' '))}"
    return f"{words} ({code})" if code else words


def _compact_answer(outcome: dict[str, Any]) -> str:
    if outcome["status"] == COMPLETED:
        done = f"Compacted {outcome['message_count']} message(s) into a summary."
        if outcome.get("passes_failed"):
            why = failure_words(outcome["error_code"], outcome.get("reason"))
            done += f" A later pass failed: {why}; the rest of the history is unchanged."
        return done
    if outcome["status"] == SKIPPED:
        if outcome.get("reason") in ("busy", RUNNING):
            return "Another compaction pass of this chat is still running; try again in a moment."
        return "Nothing to compact: the history is already as small as it can be."
    why = failure_words(outcome["error_code"], outcome.get("reason"))
    return f"Compaction failed: {why}. Every message is still there."


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def status_answer(status: dict[str, Any]) -> str:
    context = status["context"]
    # The same figure as the context meter and the status panel: the budget the prompt is fitted to.
    estimate = ", estimate" if context["estimated"] else ""
    percent = f" ({context['percent']:.0f}%{estimate})" if context["percent"] is not None else estimate
    window = f"a {context['window']:,}-token window" if context["window"] else "an unknown window"
    reserve = f"{context['response_reserve']:,} reserved for the reply"
    lines = [f"Context: {context['tokens']:,} of {context['budget']:,} tokens{percent}; {window}, {reserve}."]
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
        "Automatic compaction: on."
        if automatic["active"]
        else f"Automatic compaction: off: {OFF_WORDS.get(automatic['reason'], automatic['reason'])} "
        f"({automatic['reason']})."
    )
    return "\n".join(lines)


async def run_command(
    db: Database, compactor: Compactor, chat_id: str, command: str, *, counting: ServerCounting | None = None
) -> MessageRow:
    """Store the command, answer it, store the answer; return the answer message. ``counting``: the service's
    server counting, so that ``/status`` counts as the status panel and the context meter do."""
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
        status = await chat_status(db, chat_id, cooldown=compactor.cooldown, counting=counting, rules=compactor.rules)
        answer = status_answer(status)
    async with db.session() as session:
        return await Repositories(session).messages.append(
            chat_id, {"role": "assistant", "content": answer, "meta": {COMMAND_KEY: command}}
        )
