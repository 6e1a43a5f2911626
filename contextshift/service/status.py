"""The session status (C14): context usage, prompt-cache hit rate, tools used, the last compaction, and
whether automatic compaction is active (or why not)."""

from __future__ import annotations

from typing import Any

from ..core.compaction import FAILURE_COOLDOWN_SECONDS, cooldown_active
from ..core.errors import TokenBudgetExceeded
from ..storage import Database, Repositories
from ..storage.tables import CompactionLogRow
from ..storage.types import utcnow
from .compaction import window_of
from .counting import ServerCounting, run_counted
from .rules import NO_RULES, Rules
from .summarizer import CompactionUnavailable, resolve
from .turn import chat_and_bot, load_turn


def log_dict(row: CompactionLogRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "bot_id": row.bot_id,
        "chat_id": row.chat_id,
        "status": row.status,
        "trigger": row.trigger,
        "summary": row.summary,
        "message_count": row.message_count,
        "passes": row.passes,
        "started_at": row.started_at,
        "completed_at": row.completed_at,
        "model": row.model,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "error_code": row.error_code,
    }


async def chat_status(
    db: Database,
    chat_id: str,
    *,
    cooldown: float = FAILURE_COOLDOWN_SECONDS,
    counting: ServerCounting | None = None,
    rules: Rules = NO_RULES,
) -> dict[str, Any]:
    async with db.session() as session:
        repos = Repositories(session)
        chat, bot = await chat_and_bot(repos, chat_id)
        turn = await load_turn(
            repos, bot=bot, chat=chat, draft="", max_tokens=None, preview=True, server_counting=counting, rules=rules
        )
        # One figure with the preview and the meter (issue 27): the prompt against the budget it is fitted to.
        try:
            fitted = (await run_counted(turn.request, turn.server, counting)).budget
            tokens, budget = fitted["prompt_tokens"], fitted["context_limit"] - fitted["response_reserve"]
        except TokenBudgetExceeded as error:
            tokens, budget = error.protected_tokens, error.budget
        window = window_of(bot, turn.model.context_window if turn.model else None)
        reason: str | None = None
        if not bot.compaction_enabled:
            reason = "disabled"
        elif window is None:
            reason = "window-unknown"
        else:
            try:
                await resolve(repos, bot, rules.provider_hosts)
            except CompactionUnavailable as error:
                reason = error.reason
        failed_at = chat.compaction_failed_at
        if reason is None and failed_at and cooldown_active(failed_at.timestamp(), utcnow().timestamp(), cooldown):
            reason = "cooldown"
        last = await repos.compaction.last_finished_log(chat_id)
        hit_rate = chat.usage_cached_tokens / chat.usage_input_tokens if chat.usage_input_tokens else None
        # Counted from the stored calls, so imported history counts too (chat.tools_used saw only new replies).
        used = await repos.messages.tools_used(chat_id)
        tools = sorted(used.items(), key=lambda item: (-int(item[1]), item[0]))
        status = {
            "context": {
                "tokens": tokens,
                "budget": budget,
                "response_reserve": turn.request.context_limit - budget,
                "window": window,
                "percent": round(100 * tokens / budget, 1) if budget > 0 else None,
                "estimated": turn.profile.approximate,
                "calibration": turn.counting.report(turn.profile) if turn.counting else None,
            },
            "prompt_cache": {
                "hit_rate": round(hit_rate, 4) if hit_rate is not None else None,
                "cached_tokens": chat.usage_cached_tokens,
                "input_tokens": chat.usage_input_tokens,
            },
            "tools_used": [{"name": name, "count": int(count)} for name, count in tools],
            "last_compaction": log_dict(last) if last else None,
            "automatic": {"active": reason is None, "reason": reason},
        }
        await session.rollback()  # reading the status changes nothing (rows read before the rollback)
    return status
