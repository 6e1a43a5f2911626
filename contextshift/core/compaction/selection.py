"""Which records to fold (C7, C9): oldest first, whole tool exchanges, the current turn raw, within budget.

A pass folds a **prefix** of the foldable history: every foldable message before a cut position ``k``;
barriers before ``k`` (see :mod:`.layout`) stay raw where they are. A cut is valid when it splits no tool
group and the kept side does not start with a tool result (``history[k]`` is not one). Among valid cuts:

* the **target** cut is the smallest one that leaves at most ``target_tokens`` of compactable raw history
  (``target_tokens=None``: fold as much as possible, i.e. everything before the current turn — C6);
* the **budget** cut is the largest one whose rendered records fit the summarizer input budget (C9), so an
  over-full session is compacted oldest chunk first, over several passes, instead of failing;
* the pass takes the smaller of the two, but always at least the first exchange with content (progress:
  an exchange too big for the budget on its own is still folded, and the renderer shrinks it to fit).

Existing summaries before the cut are folded too: the new summary replaces them (summaries roll up, they
never stack without bound), and its ``covers`` lists their covered ids followed by the new raw ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from ..messages import Message
from .layout import Counter, TextCounter, analyze, is_standing, is_summary, is_tool_result, text_counter
from .records import Record, SummaryRecord, record_is_empty, record_of, summary_covers, summary_workspaces
from .rendering import prompt_overhead_tokens, record_tokens, spans_workspaces

#: Reason codes of a selection.
SELECTED = "selected"  # the fold reaches the target
BUDGET_LIMITED = "budget-limited"  # the fold is the oldest chunk that fits; later passes continue
BELOW_TARGET = "below-target"  # compactable history is already at or below the target
NOTHING_TO_FOLD = "nothing-to-fold"  # nothing with content may be folded (all raw history is current or kept)


@dataclass(frozen=True, slots=True)
class Selection:
    """One pass's split of the history into what is folded into the summary and what stays."""

    fold: tuple[Message, ...]  # chronological; whole tool exchanges; earlier summaries included
    keep: tuple[Message, ...]  # chronological; barriers, newer history and the current turn
    fold_tokens: int  # chat-prompt cost of the folded messages: what the new summary replaces (C8)
    keep_tokens: int  # chat-prompt cost of the kept messages
    input_tokens: int  # estimated summarizer user-message tokens for the fold
    pressure_before: int  # C2: compactable raw tokens before the pass
    pressure_after: int  # compactable raw tokens the pass leaves
    complete: bool  # the target is reached by this pass (True: no further pass is needed)
    reason: str
    oversized: bool = False  # the first exchange alone exceeds the budget; the renderer must shrink it
    covers: tuple[str, ...] = ()  # raw message ids the new summary stands for, in order
    supersedes: tuple[str, ...] = ()  # ids of the earlier summaries it replaces
    workspaces: tuple[str, ...] = ()  # workspaces the fold spans, in order of appearance

    @property
    def standing(self) -> tuple[str, ...]:
        """The texts of the standing instructions that stay raw beside the summary (G4b), for its instructions."""
        return tuple(m.text for m in self.keep if is_standing(m))

    @property
    def empty(self) -> bool:
        """Nothing to fold: the pass is a no-op (``reason`` says why)."""
        return not self.fold


def _noop(messages: Sequence[Message], costs: Sequence[int], pressure: int, reason: str, complete: bool) -> Selection:
    return Selection((), tuple(messages), 0, sum(costs), 0, pressure, pressure, complete, reason)


def select_fold(
    history: Sequence[Message],
    *,
    target_tokens: int | None,
    input_budget: int,
    counter: Counter | None = None,
    input_counter: TextCounter | None = None,
    beyond: int = 0,
) -> Selection:
    """Choose what one compaction pass folds (C7, C9).

    ``history`` is the session as the prompt sees it, chronological: summary records in place of what they
    cover, raw messages, and the current turn. ``target_tokens`` is the compactable raw history to leave
    (from :func:`.policy.decide`), or ``None`` for "as much as possible" (manual ``/compact``).
    ``input_budget`` is the summarizer user-message budget (:func:`.rendering.input_budget`). ``counter``
    prices messages in the chat prompt (default ~4 chars/token); ``input_counter`` prices the summarizer's
    input (default: the text counter of ``counter``; pass the summarizer model's own when it differs).

    ``beyond`` > 0 says ``history`` is only the oldest part of the session, and gives the compactable raw
    tokens of the rest, which the caller did not load (at least that many: a lower bound only makes the pass
    fold less). They count towards the pressure and the target, never into the fold, and the part's last user
    message stays raw like a current turn (so no fold ends inside an exchange that goes on beyond the part).
    A long session is then never read in full.
    """
    _check_arguments(target_tokens, input_budget, beyond)
    layout = analyze(history, counter)
    messages, costs, foldable, t = layout.messages, layout.costs, layout.foldable, layout.turn_start
    n = len(messages)
    pressure = layout.pressure + beyond
    count = input_counter or text_counter(counter)

    groups = [g for g in layout.members if foldable[g[0]]]
    records = [record_of([messages[p] for p in g]) for g in groups]
    contentful = [
        g[-1]
        for g, r in zip(groups, records, strict=True)
        if not isinstance(r, SummaryRecord) and not record_is_empty(r)
    ]
    if not contentful:
        return _noop(messages, costs, pressure, NOTHING_TO_FOLD, pressure <= (target_tokens or 0))
    if target_tokens is not None and pressure <= target_tokens:
        return _noop(messages, costs, pressure, BELOW_TARGET, True)

    cost_of = _lazy_group_costs(records, count)
    valid = _valid_cuts(messages, groups, t)
    remaining = _remaining(messages, costs, foldable, t, beyond)

    # The fold with cut k renders the groups that end before k; walk them in that order only until the
    # budget is spent (every later cut is over budget too), so a huge session is not rendered in full.
    budget = input_budget - prompt_overhead_tokens(count)
    by_end = sorted(range(len(groups)), key=lambda number: groups[number][-1])
    over_from = _first_over_budget(by_end, groups, cost_of, budget, n)

    cuts = [k for k in range(t + 1) if valid[k]]  # t is always valid: it is a user message or the end
    k_target = t if target_tokens is None else next((k for k in cuts if remaining[k] <= target_tokens), t)
    k_budget = max((k for k in cuts if k < over_from), default=0)
    k_progress = next(k for k in cuts if k > min(contentful))
    k = max(min(k_target, k_budget), k_progress)
    input_tokens = sum(cost_of(number) for number in by_end if groups[number][-1] < k)

    fold = tuple(messages[p] for p in range(k) if foldable[p])
    keep = tuple(messages[p] for p in range(n) if p >= k or not foldable[p])
    covers, supersedes, workspaces = _provenance(fold)
    complete = k >= k_target and (remaining[k] <= target_tokens if target_tokens is not None else not beyond)
    return Selection(
        fold=fold,
        keep=keep,
        fold_tokens=sum(costs[p] for p in range(k) if foldable[p]),
        keep_tokens=sum(costs[p] for p in range(n) if p >= k or not foldable[p]),
        input_tokens=input_tokens + prompt_overhead_tokens(count),
        pressure_before=pressure,
        pressure_after=remaining[k],
        complete=complete,
        reason=SELECTED if complete else BUDGET_LIMITED,
        oversized=input_tokens > budget,
        covers=covers,
        supersedes=supersedes,
        workspaces=workspaces,
    )


def _lazy_group_costs(records: Sequence[Record], count: TextCounter) -> Callable[[int], int]:
    """The rendered cost of a group by number, counted only when first asked for."""
    multi = spans_workspaces(records)
    group_cost: dict[int, int] = {}

    def cost_of(number: int) -> int:
        if number not in group_cost:
            group_cost[number] = record_tokens(records[number], count, with_header=multi)
        return group_cost[number]

    return cost_of


def _check_arguments(target_tokens: int | None, input_budget: int, beyond: int) -> None:
    if target_tokens is not None and (isinstance(target_tokens, bool) or target_tokens < 0):
        raise ValueError("target_tokens must be a non-negative integer or None")
    if isinstance(input_budget, bool) or not isinstance(input_budget, int) or input_budget < 1:
        raise ValueError("input_budget must be a positive integer")
    if isinstance(beyond, bool) or not isinstance(beyond, int) or beyond < 0:
        raise ValueError("beyond must be a non-negative integer")


def _remaining(
    messages: Sequence[Message], costs: Sequence[int], foldable: Sequence[bool], turn_start: int, beyond: int
) -> list[int]:
    """``remaining[k]``: the compactable raw tokens at positions k .. ``turn_start`` - 1, and ``beyond``."""
    raw = [costs[p] if foldable[p] and not is_summary(messages[p]) else 0 for p in range(len(messages))]
    remaining = [beyond] * (turn_start + 1)
    for k in range(turn_start - 1, -1, -1):
        remaining[k] = remaining[k + 1] + raw[k]
    return remaining


def _first_over_budget(
    by_end: Sequence[int], groups: Sequence[Sequence[int]], cost_of: Callable[[int], int], budget: int, n: int
) -> int:
    """The smallest cut whose fold exceeds ``budget`` (``n`` + 1 if none), pricing groups in end order only
    until the budget is spent."""
    spent = 0
    for number in by_end:
        spent += cost_of(number)
        if spent > budget:
            return groups[number][-1] + 1
    return n + 1


def _valid_cuts(messages: Sequence[Message], groups: Sequence[Sequence[int]], turn_start: int) -> list[bool]:
    """Where a fold may end, for each cut 0 .. ``turn_start``: never inside a foldable group's span (it would
    split the group) and never just before a tool result (it would split it from its call)."""
    n = len(messages)
    inside = [0] * (n + 2)
    for g in groups:
        inside[g[0] + 1] += 1
        inside[g[-1] + 1] -= 1
    splits = list(accumulate(inside))
    return [k == 0 or (splits[k] == 0 and (k == n or not is_tool_result(messages[k]))) for k in range(turn_start + 1)]


def _provenance(fold: Sequence[Message]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What a fold covers (message ids, through earlier summaries), the summaries it supersedes, and the
    workspaces it spans, each in order and without repeats."""
    covers: list[str] = []
    supersedes: list[str] = []
    workspaces: list[str] = []
    for message in fold:
        if is_summary(message):
            covers.extend(summary_covers(message))
            supersedes.append(message.id)
            workspaces.extend(summary_workspaces(message))
        else:
            covers.append(message.id)
            if message.workspace:
                workspaces.append(message.workspace)
    return tuple(dict.fromkeys(covers)), tuple(supersedes), tuple(dict.fromkeys(workspaces))
