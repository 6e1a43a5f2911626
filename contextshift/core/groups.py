"""Tool groups (M3): the messages that must be kept or removed together.

A group is the connected set of messages joined by shared tool-link ids, wherever they stand in the
prompt. A tool message with no id joins the nearest preceding assistant message, together with every
other id-less tool message of the same run. Every other message is a group of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .messages import Message, link_ids


@dataclass(frozen=True, slots=True)
class Group:
    """Positions (indices into the prompt) of the members of one group, in prompt order."""

    members: tuple[int, ...]
    protected: bool

    @property
    def first(self) -> int:
        return self.members[0]


class _UnionFind:
    __slots__ = ("parent",)

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, item: int) -> int:
        parent = self.parent
        root = item
        while parent[root] != root:
            root = parent[root]
        while parent[item] != root:
            parent[item], item = root, parent[item]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller index becomes the root, so a group's root is its earliest member.
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


def build_groups(messages: Sequence[Message]) -> list[Group]:
    """All groups of a prompt, ordered by their earliest member. Linear in the number of messages."""
    uf = _UnionFind(len(messages))
    owner_of_id: dict[str, int] = {}
    last_assistant: int | None = None
    run_anchor: int | None = None  # the assistant an id-less tool run attaches to
    previous_was_idless_tool = False
    for index, message in enumerate(messages):
        ids = link_ids(message)
        for link in ids:
            owner = owner_of_id.setdefault(link, index)
            if owner != index:
                uf.union(owner, index)
        if message.role == "tool" and not ids:
            if not previous_was_idless_tool:
                run_anchor = last_assistant
            if run_anchor is not None:
                uf.union(run_anchor, index)
            previous_was_idless_tool = True
        else:
            previous_was_idless_tool = False
        if message.role == "assistant":
            last_assistant = index
    members: dict[int, list[int]] = {}
    for index in range(len(messages)):
        members.setdefault(uf.find(index), []).append(index)
    groups = [
        Group(members=tuple(positions), protected=any(messages[p].protected for p in positions))
        for positions in members.values()
    ]
    groups.sort(key=lambda g: g.first)
    return groups


def group_index(groups: Sequence[Group], size: int) -> list[int]:
    """For each message position, the index of its group in ``groups``."""
    owner = [0] * size
    for number, group in enumerate(groups):
        for position in group.members:
            owner[position] = number
    return owner
