"""The chat audit's payloads (A4, A5): what a prepared turn or a preview shows of its prompt, and what a turn
refused before sending records."""

from __future__ import annotations

from typing import Any

from ..core.errors import TokenBudgetExceeded
from ..core.vocabulary import SUMMARIZED
from ..pipeline import PipelineResult
from .turn import Turn


def history_counts(turn: Turn, result: PipelineResult) -> dict[str, int] | None:
    """What the entries cannot list, for a chat: history older than the window, and every message a summary
    stands for (stored compaction summaries, counted in full, and what this prompt's ``summarize`` folded)."""
    if turn.history is None:
        return None
    stored = {m.id for m in turn.request.sources.summarized}  # already in the database count
    folded = sum(1 for e in result.entries if e.reason == SUMMARIZED and e.identifier not in stored)
    return {**turn.history, "summarized": turn.history["summarized"] + folded}


def preview_payload(turn: Turn, result: PipelineResult) -> dict[str, Any]:
    return {
        "provider_id": turn.provider.id if turn.provider else None,
        "provider_kind": turn.provider.kind if turn.provider else None,
        "model": turn.model.name if turn.model else None,
        **result.to_dict(),
        "calibration": turn.counting.report(turn.profile) if turn.counting else None,
        "history": history_counts(turn, result),
    }


def failed_payload(turn: Turn, error: TokenBudgetExceeded) -> dict[str, Any]:
    params = error.params
    request = turn.request
    return {
        "provider_id": turn.provider.id if turn.provider else None,
        "provider_kind": turn.provider.kind if turn.provider else None,
        "model": turn.model.name if turn.model else None,
        "tokenizer": {"profile": turn.profile.name, "approximate": turn.profile.approximate},
        "budget": {
            "context_limit": int(str(params.get("context_limit", request.context_limit))),
            "response_reserve": int(str(params.get("response_reserve", request.response_reserve))),
            "prompt_tokens": int(str(params.get("prompt_tokens", error.protected_tokens))),
        },
        "context_strategy": request.strategy,
        "entries": [],
        "provider_messages": [],
        "diagnostics": [*turn.notes, error.message],
        "excluded_count": 0,
    }


__all__ = ["failed_payload", "history_counts", "preview_payload"]
