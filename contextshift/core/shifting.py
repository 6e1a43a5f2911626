"""Context shifting (S1–S8): fit an assembled prompt into a token budget.

Protected messages (M4) always stay; unprotected tool groups (M3) leave whole, oldest first, until the
prompt fits. Each message is counted once; removal subtracts its group's cost, so the work is linear in
the number of messages (S8), and the reported ``tokens`` is a fresh count of what was kept (S6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import TokenBudgetExceeded
from .groups import Group, build_groups, group_index
from .messages import Message, MessageLike, normalize_messages
from .tokens import ChatFormatProfile, TokenCounter, TokenizerProfile, message_costs, prompt_tokens

# Stable reason codes, one for every input message id.
PROTECTED = "protected"
FIT = "fit"
CONTEXT_SHIFT = "context-shift"
MANUAL = "manual"
SUMMARIZED = "summarized"
LOW_RELEVANCE = "low-relevance"
PLUGIN_REJECTED = "plugin-rejected"
REASONS = frozenset({PROTECTED, FIT, CONTEXT_SHIFT, MANUAL, SUMMARIZED, LOW_RELEVANCE, PLUGIN_REJECTED})

Counter = TokenCounter | TokenizerProfile


@dataclass(frozen=True, slots=True)
class Truncation:
    """A block compressed instead of dropped: the replacement and the messages it stands for."""

    replacement: Message
    source_ids: list[str]
    tokens_before: int
    tokens_after: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "replacement": self.replacement.to_dict(),
            "source_ids": list(self.source_ids),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(slots=True)
class ShiftResult:
    """What fits (``kept``, in prompt order), what was dropped (``excluded``, in removal order) and why."""

    kept: list[Message]
    excluded: list[Message]
    truncated: list[Truncation]
    tokens: int
    reasons: dict[str, str]
    strategy: str = "truncate"
    diagnostics: list[str] = field(default_factory=list)
    budget: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "budget": self.budget,
            "tokens": self.tokens,
            "kept": [m.to_dict() for m in self.kept],
            "excluded": [m.to_dict() for m in self.excluded],
            "truncated": [t.to_dict() for t in self.truncated],
            "reasons": dict(self.reasons),
            "diagnostics": list(self.diagnostics),
        }


def check_budget(budget: object) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"budget must be a positive integer, got {budget!r}")
    if budget <= 0:
        raise ValueError(f"budget must be a positive integer, got {budget}")
    return budget


class Prompt:
    """A normalized prompt with every message counted once and its tool groups found."""

    def __init__(
        self,
        messages: Sequence[MessageLike],
        counter: Counter,
        per_message_overhead: int = 4,
        *,
        groups: Sequence[Group] | None = None,
    ) -> None:
        """``groups`` replaces the groups found in ``messages`` (the host keeps the original prompt's groups)."""
        self.messages: list[Message] = normalize_messages(messages)
        self.counter = counter
        self.per_message_overhead = per_message_overhead
        self.costs, self.fixed = message_costs(self.messages, counter, per_message_overhead)
        self.groups: list[Group] = (
            sorted(groups, key=lambda g: g.first) if groups is not None else build_groups(self.messages)
        )
        self.owner: list[int] = group_index(self.groups, len(self.messages))
        self.group_costs = [sum(self.costs[p] for p in g.members) for g in self.groups]
        self.position = {m.id: i for i, m in enumerate(self.messages)}

    @property
    def additive(self) -> bool:
        """Whether the sum of message costs is the whole-prompt count (true for callables and our profiles)."""
        return not isinstance(self.counter, TokenizerProfile) or isinstance(self.counter, ChatFormatProfile)

    def fresh_count(self, positions: Iterable[int]) -> int:
        return prompt_tokens([self.messages[p] for p in positions], self.counter, self.per_message_overhead)

    def group_of(self, message_id: str) -> Group:
        return self.groups[self.owner[self.position[message_id]]]


@dataclass(slots=True)
class Outcome:
    """Positions removed (in removal order) with their reason, and the fresh count of the rest."""

    removed: list[int]
    reasons: dict[int, str]
    tokens: int

    def kept_positions(self, size: int) -> list[int]:
        gone = set(self.removed)
        return [p for p in range(size) if p not in gone]


def shift_prompt(
    prompt: Prompt,
    budget: int,
    *,
    order: Sequence[int] | None = None,
    removed: Mapping[int, str] | None = None,
    reason: Callable[[Group], str] | None = None,
) -> Outcome:
    """Remove unprotected groups (group numbers in ``order``; default oldest first) until the prompt fits.

    ``removed`` are positions already taken out (with their reason), e.g. manual exclusions. Raises
    :class:`TokenBudgetExceeded` when the protected groups alone do not fit.
    """
    check_budget(budget)
    gone: dict[int, str] = dict(removed or {})
    removal: list[int] = list(gone)
    pre_gone_groups = {prompt.owner[p] for p in gone}
    remaining = len(prompt.messages) - len(gone)
    # The fixed cost (reply priming) belongs to a prompt with at least one message; an empty one costs 0.
    total = (prompt.fixed if remaining else 0) + sum(c for p, c in enumerate(prompt.costs) if p not in gone)
    candidates = [
        n
        for n in (range(len(prompt.groups)) if order is None else order)
        if not prompt.groups[n].protected and n not in pre_gone_groups
    ]
    protected_groups = [n for n, g in enumerate(prompt.groups) if g.protected]
    if prompt.additive:
        protected_total = (prompt.fixed if protected_groups else 0) + sum(
            prompt.group_costs[n] for n in protected_groups
        )
    else:  # a profile whose whole-prompt count is not the sum of its messages: only its own count decides
        protected_total = prompt.fresh_count(p for n in protected_groups for p in prompt.groups[n].members)
    if protected_total > budget:
        raise TokenBudgetExceeded(protected_total, budget)
    label = reason or (lambda _group: "context-shift")
    queue = iter(candidates)

    def remove_next() -> bool:
        nonlocal total, remaining
        number = next(queue, None)
        if number is None:
            return False
        group = prompt.groups[number]
        code = label(group)
        for position in group.members:
            if position not in gone:
                gone[position] = code
                removal.append(position)
                total -= prompt.costs[position]
                remaining -= 1
        if not remaining:
            total = 0
        return True

    if prompt.additive:
        while total > budget and remove_next():
            pass
        tokens = total
    else:
        # Recount after every removal: correct for any profile, linear only for additive ones.
        tokens = prompt.fresh_count(p for p in range(len(prompt.messages)) if p not in gone)
        while tokens > budget and remove_next():
            tokens = prompt.fresh_count(p for p in range(len(prompt.messages)) if p not in gone)
    return Outcome(removed=removal, reasons=gone, tokens=tokens)


def build_result(
    prompt: Prompt,
    outcome: Outcome,
    budget: int,
    *,
    strategy: str = "truncate",
    diagnostics: Sequence[str] = (),
) -> ShiftResult:
    reasons: dict[str, str] = {}
    for position, message in enumerate(prompt.messages):
        code = outcome.reasons.get(position)
        if code is None:
            code = "protected" if prompt.groups[prompt.owner[position]].protected else "fit"
        reasons[message.id] = code
    return ShiftResult(
        kept=[prompt.messages[p] for p in outcome.kept_positions(len(prompt.messages))],
        excluded=[prompt.messages[p] for p in outcome.removed],
        truncated=[],
        tokens=outcome.tokens,
        reasons=reasons,
        strategy=strategy,
        diagnostics=list(diagnostics),
        budget=budget,
    )


def shift_context(
    messages: Sequence[MessageLike],
    count_tokens: Counter,
    budget: int,
    *,
    per_message_overhead: int = 4,
) -> ShiftResult:
    """Fit ``messages`` into ``budget`` tokens by dropping the oldest unprotected tool groups (S1–S8)."""
    check_budget(budget)
    prompt = Prompt(messages, count_tokens, per_message_overhead)
    outcome = shift_prompt(prompt, budget)
    diagnostics = []
    if outcome.removed:
        diagnostics.append(f"context shift excluded {len(outcome.removed)} message(s)")
    return build_result(prompt, outcome, budget, diagnostics=diagnostics)
