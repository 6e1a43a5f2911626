"""The shape of a session's history for compaction (C2, C7): current turn, tool results, foldable messages.

Every other compaction module reads history through :func:`analyze`, so the pressure estimate (C2) and the
selection (C7) agree on what is *compactable*:

* the **current turn** is the last user message and everything after it; it always stays raw (C7);
* **barriers** stay raw in place: protected groups (M4: pinned, protected system messages, the current
  input), the user's standing instructions (G4b: ``meta.standing``, so no summary can drop them), groups
  that reach into the current turn, and every group with a member inside the span of a
  barrier group (so a summary never lands between a kept tool call and its kept result);
* existing summaries (``source == "summary"``) are foldable, so they roll up into the next summary, but
  they never count as pressure (C2: counting them would make the trigger fire forever).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from ..groups import build_groups, group_index
from ..messages import Message
from ..standing import STANDING_KEY
from ..tokens import TokenCounter, TokenizerProfile, approximate_count, message_costs

Counter: TypeAlias = TokenCounter | TokenizerProfile
TextCounter: TypeAlias = Callable[[str], int]

SUMMARY_SOURCE = "summary"


def is_summary(message: Message) -> bool:
    """A stored compaction summary (or any other summary record) standing in the history."""
    return message.source == SUMMARY_SOURCE


def is_standing(message: Message) -> bool:
    """A standing instruction of the user's (G4b), as the service marks it: never folded into a summary."""
    return message.meta.get(STANDING_KEY) is True


def is_tool_result(message: Message) -> bool:
    """A tool result: role ``tool``, or a user message carrying Anthropic ``tool_result`` blocks (M2)."""
    if message.role == "tool":
        return True
    if message.role == "user" and isinstance(message.content, tuple):
        return any(part.get("type") == "tool_result" for part in message.content)
    return False


def is_user_turn(message: Message) -> bool:
    """A message the user typed: role ``user``, not a summary, not a tool-result carrier."""
    return message.role == "user" and not is_summary(message) and not is_tool_result(message)


def current_turn_start(history: Sequence[Message]) -> int:
    """Position of the last user message (C7: it and everything after it stay raw); ``len`` if none."""
    for position in range(len(history) - 1, -1, -1):
        if is_user_turn(history[position]):
            return position
    return len(history)


def text_counter(counter: Counter | None) -> TextCounter:
    """A ``str -> int`` counter: the profile's ``count``, the callable itself, or the ~4 chars/token estimate."""
    if counter is None:
        return approximate_count
    if isinstance(counter, TokenizerProfile):
        return counter.count
    return counter


def message_tokens(messages: Sequence[Message], counter: Counter | None = None) -> list[int]:
    """Each message's cost in the chat prompt (T3 media costs included; no per-message framing by default)."""
    return message_costs(messages, counter if counter is not None else approximate_count, 0)[0]


def check_ids(history: Sequence[Message]) -> None:
    """Compaction records coverage by id: every message needs a non-empty, unique id."""
    seen: set[str] = set()
    for position, message in enumerate(history):
        if not message.id:
            raise ValueError(f"message at position {position} has no id; compaction needs stable ids")
        if message.id in seen:
            raise ValueError(f"message {message.id}: duplicate message id")
        seen.add(message.id)


@dataclass(frozen=True, slots=True)
class Layout:
    """One analysed history: per position, its group, whether it may be folded, and its prompt cost."""

    messages: tuple[Message, ...]
    turn_start: int
    members: tuple[tuple[int, ...], ...]  # positions of each group, ordered by first member
    group_of: tuple[int, ...]  # group number of each position
    foldable: tuple[bool, ...]
    costs: tuple[int, ...]

    @property
    def pressure(self) -> int:
        """C2: tokens of compactable raw history (summaries, barriers and the current turn excluded)."""
        return sum(
            cost
            for message, cost, ok in zip(self.messages, self.costs, self.foldable, strict=True)
            if ok and not is_summary(message)
        )


def _barrier_groups(history: Sequence[Message], members: Sequence[Sequence[int]], turn_start: int) -> list[bool]:
    barrier = [
        any(history[p].protected or is_standing(history[p]) for p in group) or group[-1] >= turn_start
        for group in members
    ]
    owner = [0] * len(history)
    for number, group in enumerate(members):
        for position in group:
            owner[position] = number
    changed = True
    while changed:  # a group reaching into a barrier's span becomes a barrier too, until nothing changes
        changed = False
        inside = [0] * (len(history) + 1)
        for number, group in enumerate(members):
            if barrier[number] and len(group) > 1:
                inside[group[0] + 1] += 1
                inside[group[-1]] -= 1
        depth = 0
        for position in range(len(history)):
            depth += inside[position]
            number = owner[position]
            if depth > 0 and not barrier[number]:
                barrier[number] = True
                changed = True
    return barrier


def analyze(history: Sequence[Message], counter: Counter | None = None) -> Layout:
    """Classify every message of ``history`` (chronological) for compaction."""
    messages = tuple(history)
    check_ids(messages)
    groups = build_groups(messages)
    members = tuple(g.members for g in groups)
    turn_start = current_turn_start(messages)
    barrier = _barrier_groups(messages, members, turn_start)
    group_of = tuple(group_index(groups, len(messages)))
    foldable = tuple(position < turn_start and not barrier[group_of[position]] for position in range(len(messages)))
    costs = tuple(message_tokens(messages, counter))
    return Layout(messages, turn_start, members, group_of, foldable, costs)


def compactable_tokens(history: Sequence[Message], counter: Counter | None = None) -> int:
    """C2 pressure: tokens of the raw history compaction could fold, ~4 chars/token unless ``counter`` is exact."""
    return analyze(history, counter).pressure
