"""The reference product's worked cases (research-seed-shifting.md 13.1-13.2), exact numbers asserted.

Counter: ceil(len/4), overhead 4, as in the reference tests.
"""

from __future__ import annotations

import math

import pytest

from contextshift import (
    ContextStrategyRegistry,
    Message,
    ShiftResult,
    TokenBudgetExceeded,
    shift_context,
    shift_with_strategy,
)
from contextshift.core.request import StrategyRequest
from contextshift.core.strategies import truncate
from contextshift.core.vocabulary import SUMMARY_HEADER


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_drops_oldest_and_protects_system() -> None:
    messages = [
        {"id": "system", "role": "system", "content": "SYSTEM " * 10},
        {"id": "one", "role": "user", "content": "one " * 20},
        {"id": "two", "role": "user", "content": "two " * 20},
        {"id": "three", "role": "user", "content": "three " * 20},
    ]
    result = shift_context(messages, ceil4, 60)
    assert ids(result.kept) == ["system", "three"]
    assert ids(result.excluded) == ["one", "two"]
    assert result.tokens == 56
    assert result.reasons == {
        "system": "protected",
        "one": "context-shift",
        "two": "context-shift",
        "three": "fit",
    }


def test_pinned_message_survives_even_when_newer_ones_go() -> None:
    messages = [
        {"id": "pinned", "role": "user", "content": "pinned " * 10, "pinned": True},
        {"id": "filler", "role": "user", "content": "filler " * 30},
        {"id": "recent", "role": "user", "content": "recent"},
    ]
    result = shift_context(messages, ceil4, 25)
    assert ids(result.kept) == ["pinned"]
    assert ids(result.excluded) == ["filler", "recent"]
    assert result.tokens == 22


def test_adjacent_call_and_result_leave_together() -> None:
    messages = [
        {"id": "call", "role": "assistant", "content": "calling tool " * 10},
        {"id": "result", "role": "tool", "content": "tool result " * 10},
        {"id": "recent", "role": "user", "content": "recent question"},
    ]
    result = shift_context(messages, ceil4, 12)
    assert ids(result.kept) == ["recent"]
    assert ids(result.excluded) == ["call", "result"]
    assert result.tokens == 8


def test_non_adjacent_pair_linked_by_id_leaves_together() -> None:
    messages = [
        {"id": "call", "role": "assistant", "content": "call " * 20, "meta": {"toolCallId": "pair-1"}},
        {"id": "other", "role": "user", "content": "other " * 20},
        {"id": "result", "role": "tool", "content": "result " * 20, "meta": {"toolCallId": "pair-1"}},
        {"id": "recent", "role": "user", "content": "recent"},
    ]
    result = shift_context(messages, ceil4, 15)
    assert ids(result.excluded) == ["call", "result", "other"]
    assert ids(result.kept) == ["recent"]
    assert result.tokens == 6


def test_protected_context_alone_over_budget_raises_with_counts() -> None:
    messages = [{"id": "p", "role": "system", "content": "protected " * 20, "pinned": True}]
    with pytest.raises(TokenBudgetExceeded) as caught:
        shift_context(messages, ceil4, 5)
    assert caught.value.code == "TOKEN_BUDGET_EXCEEDED"
    assert caught.value.protected_tokens == 54
    assert caught.value.budget == 5


def test_registry_lists_the_five_builtins() -> None:
    assert ContextStrategyRegistry().names() == ["manual", "recall", "summarize", "truncate", "vector-recall"]


def test_summarize_replaces_dropped_history_with_a_summary_that_fits() -> None:
    messages = [
        {"id": "old-1", "role": "user", "content": "first detail " * 20, "source": "history"},
        {"id": "old-2", "role": "assistant", "content": "second detail " * 20, "source": "history"},
        {"id": "recent", "role": "user", "content": "continue", "pinned": True},
    ]
    result = shift_with_strategy(messages, ceil4, 50, strategy="summarize")
    assert result.strategy == "summarize"
    assert ids(result.kept) == ["context-summary", "recent"]
    assert result.excluded == []
    assert len(result.truncated) == 1
    summary = result.truncated[0]
    assert summary.source_ids == ["old-1", "old-2"]
    assert summary.tokens_before == 69 + 74
    assert summary.tokens_after == ceil4(str(summary.replacement.content)) + 4
    assert summary.tokens_after < summary.tokens_before
    assert str(summary.replacement.content).startswith(SUMMARY_HEADER)
    assert result.tokens == summary.tokens_after + 6 <= 50
    assert result.reasons == {"old-1": "summarized", "old-2": "summarized", "recent": "protected"}


def test_vector_recall_drops_low_relevance_memory_first() -> None:
    messages = [
        {"id": "low", "role": "system", "source": "memory", "relevance": 0.1, "content": "low relevance " * 10},
        {"id": "high", "role": "system", "source": "memory", "relevance": 0.95, "content": "high relevance " * 10},
        {"id": "recent", "role": "user", "content": "recent", "pinned": True},
    ]
    result = shift_with_strategy(messages, ceil4, 50, strategy="vector-recall")
    assert ids(result.excluded) == ["low"]
    assert ids(result.kept) == ["high", "recent"]
    assert result.tokens == 48
    assert result.reasons["low"] == "low-relevance"


def test_manual_selection_takes_its_tool_partner_and_falls_back_to_truncation() -> None:
    messages = [
        {"id": "call", "role": "assistant", "content": "tool call " * 10},
        {"id": "result", "role": "tool", "content": "tool result " * 10},
        {"id": "old", "role": "user", "content": "old context " * 20},
        {"id": "recent", "role": "user", "content": "now", "pinned": True},
    ]
    result = shift_with_strategy(messages, ceil4, 20, strategy="manual", manual_excluded_ids={"call"})
    assert ids(result.excluded) == ["call", "result", "old"]
    assert result.reasons == {
        "call": "manual",
        "result": "manual",
        "old": "context-shift",
        "recent": "protected",
    }
    assert result.tokens == 5
    assert "manual exclusions were insufficient; safe truncation continued" in result.diagnostics


def test_override_registration_and_cleanup_restore_the_builtin() -> None:
    registry = ContextStrategyRegistry()
    builtin = registry.get("truncate")

    def louder(request: StrategyRequest) -> ShiftResult:
        return truncate(request)

    cleanup = registry.register("truncate", louder, priority=100)
    assert registry.get("truncate") is louder
    cleanup()
    assert registry.get("truncate") is builtin
    cleanup()  # a second call removes nothing else
    assert registry.get("truncate") is builtin
