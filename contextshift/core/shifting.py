"""Context shifting (S1–S8): fit an assembled prompt into a token budget.

Protected messages (M4) always stay; unprotected tool groups (M3) leave whole, oldest first, until the
prompt fits. Each message is counted once; removal subtracts its group's cost, so the work is linear in
the number of messages (S8), and the reported ``tokens`` is a fresh count of what was kept (S6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, cast

from .errors import TokenBudgetExceeded
from .groups import Group, build_groups, find_links, group_index
from .messages import Message, MessageLike, normalize_messages
from .tokens import (
    ChatFormatProfile,
    TokenCounter,
    TokenizerProfile,
    check_counter,
    check_overhead,
    checked_count,
    media_tokens,
    message_costs,
    profile_costs,
    prompt_tokens,
)
from .vocabulary import CONTEXT_SHIFT, FIT, PROTECTED

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
        costs = self.costs
        self.group_costs = [
            costs[members[0]] if len(members) == 1 else sum(costs[p] for p in members) for members, _ in self.groups
        ]
        self.position = dict(zip(map(_message_id, self.messages), range(len(self.messages)), strict=True))

    @property
    def additive(self) -> bool:
        """Whether the sum of message costs is the whole-prompt count (true for callables and our profiles)."""
        return _additive(self.counter)

    def fresh_count(self, positions: Iterable[int]) -> int:
        return prompt_tokens([self.messages[p] for p in positions], self.counter, self.per_message_overhead)

    def group_of(self, message_id: str) -> Group:
        return self.groups[self.owner[self.position[message_id]]]


def _additive(counter: Counter) -> bool:
    return not isinstance(counter, TokenizerProfile) or isinstance(counter, ChatFormatProfile)


@dataclass(slots=True)
class Removal:
    """Positions removed (in removal order) with their reason, and the fresh count of the rest."""

    removed: list[int]
    reasons: dict[int, str]
    tokens: int

    def kept_positions(self, size: int) -> list[int]:
        if not self.removed:
            return list(range(size))
        gone = set(self.removed)
        return [p for p in range(size) if p not in gone]


def shift_prompt(
    prompt: Prompt,
    budget: int,
    *,
    order: Sequence[int] | None = None,
    removed: Mapping[int, str] | None = None,
    reason: Callable[[Group], str] | None = None,
) -> Removal:
    """Remove unprotected groups (group numbers in ``order``; default oldest first) until the prompt fits.

    ``removed`` are positions already taken out (with their reason), e.g. manual exclusions. Raises
    :class:`TokenBudgetExceeded` when the protected groups alone do not fit.
    """
    check_budget(budget)
    groups, costs = prompt.groups, prompt.costs
    gone: dict[int, str] = dict(removed or {})
    removal: list[int] = list(gone)
    pre_gone_groups = {prompt.owner[p] for p in gone}
    remaining = len(prompt.messages) - len(gone)
    # The fixed cost (reply priming) belongs to a prompt with at least one message; an empty one costs 0.
    total = (prompt.fixed if remaining else 0) + sum(costs) - sum(costs[p] for p in gone)
    numbers: Iterable[int] = range(len(groups)) if order is None else order
    if pre_gone_groups:
        candidates = [n for n in numbers if not groups[n].protected and n not in pre_gone_groups]
    else:
        candidates = [n for n in numbers if not groups[n].protected]
    protected_groups = [n for n, g in enumerate(groups) if g.protected]
    if prompt.additive:
        protected_total = (prompt.fixed if protected_groups else 0) + sum(
            prompt.group_costs[n] for n in protected_groups
        )
    else:  # a profile whose whole-prompt count is not the sum of its messages: only its own count decides
        protected_total = prompt.fresh_count(p for n in protected_groups for p in groups[n].members)
    if protected_total > budget:
        raise TokenBudgetExceeded(protected_total, budget)
    additive = prompt.additive
    size = len(prompt.messages)
    tokens = total if additive else prompt.fresh_count(p for p in range(size) if p not in gone)
    for number in candidates:
        if tokens <= budget:
            break
        group = groups[number]
        code = CONTEXT_SHIFT if reason is None else reason(group)
        for position in group.members:
            if position not in gone:
                gone[position] = code
                removal.append(position)
                total -= costs[position]
                remaining -= 1
        if not remaining:
            total = 0
        # Additive: subtract the group's cost. Otherwise recount after every removal: correct for any
        # profile, linear only for additive ones.
        tokens = total if additive else prompt.fresh_count(p for p in range(size) if p not in gone)
    return Removal(removed=removal, reasons=gone, tokens=tokens)


def build_result(
    prompt: Prompt,
    outcome: Removal,
    budget: int,
    *,
    strategy: str = "truncate",
    diagnostics: Sequence[str] = (),
) -> ShiftResult:
    messages = prompt.messages
    codes = [PROTECTED if protected else FIT for _, protected in prompt.groups]
    reasons = dict(zip(map(_message_id, messages), map(codes.__getitem__, prompt.owner), strict=True))
    for position, code in outcome.reasons.items():
        reasons[messages[position].id] = code
    return ShiftResult(
        kept=[messages[p] for p in outcome.kept_positions(len(messages))],
        excluded=[messages[p] for p in outcome.removed],
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
    """Fit ``messages`` into ``budget`` tokens by dropping the oldest unprotected tool groups (S1–S8).

    With a plain callable or one of contextshift's chat-format profiles, only the protected messages and the
    newest groups down to the first one that no longer fits are counted (every older group leaves anyway),
    so a counter that returns a bad count (negative or not an integer) is only detected on a message it is
    actually asked about. Any other profile is asked about every message, and about the whole prompt.
    """
    check_budget(budget)
    prepared = _prepared(messages)
    if prepared is None:
        normalized = normalize_messages(messages)
        ids = list(map(_message_id, normalized))
        prepared = normalized, ids, list(map(_kind, normalized)), dict.fromkeys(ids, CONTEXT_SHIFT)
    result = _shift_oldest_first(*prepared, count_tokens, budget, per_message_overhead)
    if result is not None:
        return result
    prompt = Prompt(prepared[0], count_tokens, per_message_overhead)
    outcome = shift_prompt(prompt, budget)
    return build_result(prompt, outcome, budget, diagnostics=_excluded_note(len(outcome.removed)))


def _excluded_note(count: int) -> list[str]:
    return [f"context shift excluded {count} message(s)"] if count else []


_message_id = attrgetter("id")
_kind = attrgetter("_kind")

#: How many positions a chat-format profile counts in its first batch; every later batch is twice as big.
_FIRST_BATCH = 64


def _prepared(
    items: Sequence[MessageLike],
) -> tuple[list[Message], list[str], list[int], dict[str, str]] | None:
    """The messages, their ids, their kinds and every id's reason ``context-shift``, in order, when
    ``normalize_messages`` would return the items unchanged (every item a ``Message`` with an id of its own).

    The reasons are the result's, made here because building them is also the check that the ids are unique.
    """
    if not isinstance(items, list | tuple) or set(map(type, items)) - {Message}:
        return None
    ids: list[str] = list(map(_message_id, items))
    try:
        reasons = dict.fromkeys(ids, CONTEXT_SHIFT)
    except TypeError:  # an unhashable id: normalize_messages reports it
        return None
    if len(reasons) != len(ids) or not all(ids):
        return None  # a duplicate or a missing id: normalize_messages reports or assigns it
    messages = cast(list[Message], list(items))
    return messages, ids, list(map(_kind, messages)), reasons


def _shift_oldest_first(
    messages: list[Message],
    ids: list[str],
    kinds: list[int],
    reasons: dict[str, str],
    counter: Counter,
    budget: int,
    per_message_overhead: int,
) -> ShiftResult | None:
    """``shift_prompt`` with the default order, working from the newest group back (None: not applicable).

    Removing the oldest unprotected groups until the prompt fits keeps the longest run of the newest
    unprotected groups that fits beside the protected ones (a cost is never negative). So only the protected
    groups and the newest groups down to the first one that overflows are counted; everything older leaves
    in bulk. The result is the one ``shift_prompt`` and ``build_result`` give, message for message.
    """
    check_overhead(per_message_overhead)
    profile: ChatFormatProfile | None = None
    if isinstance(counter, ChatFormatProfile):
        profile = counter
    elif isinstance(counter, TokenizerProfile):
        return None  # maybe not additive: the general path asks the profile about whole prompts
    else:
        check_counter(counter)
    size = len(messages)
    links = find_links(messages, kinds, strict=False)
    if links is None:
        return None  # a malformed message: the general path derives (and fails on) it as it always did
    multi, root_of, scattered, protected = links
    protected_roots: set[int] = set()
    protected_members: list[int] = []
    for position in protected:
        root = root_of.get(position, position)
        if root not in protected_roots:
            protected_roots.add(root)
            protected_members.extend(multi.get(root, [root]))
    protected_members.sort()

    # -- costs, counted on demand ---------------------------------------------------------------------------
    cost_of: Callable[[int], int]
    costs: dict[int, int] = {}  # (profiles only) every position from ``boundary`` up, and the protected ones
    boundary = size
    batch = _FIRST_BATCH
    if profile is None:
        plain = cast(TokenCounter, counter)
        memo: dict[str, int] = {}

        def cost_of(position: int) -> int:
            message = messages[position]
            text = cast(str, message._text)  # set: the message is not malformed
            counted = memo.get(text)
            if counted is None:
                counted = plain(text)
                if type(counted) is not int or counted < 0:
                    counted = checked_count(counted, message.id)
                memo[text] = counted
            if isinstance(message.content, tuple):
                counted += media_tokens(message)
            return counted + per_message_overhead

        fixed = 0
        protected_total = sum(map(cost_of, protected_members))
    else:
        chat = profile

        def cost_of(position: int) -> int:
            cost = costs.get(position)
            if cost is None:
                # Count a batch of the positions below ``boundary``, which reaches down to this one.
                nonlocal boundary, batch
                low = max(0, min(position, boundary - batch))
                todo = [p for p in range(low, boundary) if p not in costs]
                costs.update(zip(todo, profile_costs(chat, [messages[p] for p in todo]), strict=True))
                boundary, batch = low, batch * 2
                cost = costs[position]
            return cost

        fixed = chat.reply_priming if size else 0
        costs.update(zip(protected_members, profile_costs(chat, [messages[p] for p in protected_members]), strict=True))
        protected_total = sum(costs.values())
    if protected_members:
        protected_total += fixed
        if protected_total > budget:
            raise TokenBudgetExceeded(protected_total, budget)

    # -- the walk from the newest group back ---------------------------------------------------------------
    total = protected_total if protected_members else fixed
    cut = -1  # the newest excluded group's root: every unprotected group with a root up to here leaves
    position = size
    while position:
        position -= 1
        owner = root_of.get(position)
        if owner is None:
            if position in protected_roots:
                continue  # counted already
            cost = cost_of(position)
        elif owner != position or owner in protected_roots:
            continue  # a later member of an older group, or a protected group (counted already)
        else:
            cost = sum(map(cost_of, multi[owner]))
        if total + cost > budget:
            cut = position
            break
        total += cost
    if profile is not None and any(cost < 0 for cost in costs.values()):
        return None  # a profile's negative cost breaks the walk's premise: remove oldest first, one by one
    return _oldest_first_result(
        messages, ids, reasons, budget, cut, multi, root_of, scattered, protected_roots, protected_members, total
    )


def _oldest_first_result(
    messages: list[Message],
    ids: list[str],
    reasons: dict[str, str],
    budget: int,
    cut: int,
    multi: dict[int, list[int]],
    root_of: dict[int, int],
    scattered: set[int],
    protected_roots: set[int],
    protected_members: list[int],
    tokens: int,
) -> ShiftResult:
    """The result of excluding every unprotected group whose root is at most ``cut``, built in bulk.

    ``reasons`` holds every id (in prompt order) with the reason ``context-shift``, to be overwritten for what
    stays.
    """
    kept: list[Message]
    excluded: list[Message] = []
    if cut < 0:
        kept = list(messages)
        reasons = dict.fromkeys(ids, FIT)  # nothing leaves
    else:
        # Every position up to ``end`` leaves, but for the protected ones; every later one stays, but for
        # the late members of scattered groups that left. In removal order a group's members follow its
        # root, which is prompt order for a group of consecutive positions: only the protected messages
        # and the members of scattered groups need a look of their own, the runs between them are sliced.
        end = multi[cut][-1] if cut in multi and cut not in scattered else cut
        reasons.update(dict.fromkeys(ids[end + 1 :], FIT))
        marked = set(protected_members)
        for root in scattered:
            if root <= cut:
                marked.update(multi[root])
        kept = []
        left_late: list[int] = []  # members after ``end`` of scattered groups that left
        start = 0
        for position in sorted(marked):
            if position > end:
                break
            excluded.extend(messages[start:position])
            start = position + 1
            root = root_of.get(position, position)
            if root in protected_roots:
                kept.append(messages[position])
            elif root == position:  # a scattered group leaves whole, now
                members = multi[root]
                excluded.extend([messages[p] for p in members])
                left_late.extend([p for p in members if p > end])
            # else: a later member of a scattered group that left with its root already
        excluded.extend(messages[start : end + 1])
        start = end + 1
        if left_late:
            left_late.sort()
            for position in left_late:
                kept.extend(messages[start:position])
                start = position + 1
                reasons[ids[position]] = CONTEXT_SHIFT
        kept.extend(messages[start:])
    for position in protected_members:
        reasons[ids[position]] = PROTECTED
    return ShiftResult(
        kept=kept,
        excluded=excluded,
        truncated=[],
        tokens=tokens if kept else 0,
        reasons=reasons,
        diagnostics=_excluded_note(len(excluded)),
        budget=budget,
    )
