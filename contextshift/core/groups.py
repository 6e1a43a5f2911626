"""Tool groups (M3): the messages that must be kept or removed together.

A group is the connected set of messages joined by shared tool-link ids, wherever they stand in the
prompt. A tool message with no id joins the nearest preceding assistant message, together with every
other id-less tool message of the same run. Every other message is a group of its own.

Only a message that can link (it carries a link id, or it is an id-less tool result) takes part in the
union-find; every other message is a singleton without being looked at twice. ``Message._kind`` (derived
once per message) says which is which.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import attrgetter
from typing import NamedTuple

from .messages import KIND_LINKED, KIND_MALFORMED, KIND_PROTECTED, KIND_TOOL, Message, link_ids

_kind = attrgetter("_kind")
_LINKING = KIND_LINKED | KIND_TOOL | KIND_MALFORMED


class Group(NamedTuple):
    """One tool group (M3): the messages that are kept or removed together.

    Args:
        members: the positions (indices into the prompt) of its messages, in prompt order.
        protected: whether any member is protected (M4), so the whole group stays.
    """

    members: tuple[int, ...]
    protected: bool

    @property
    def first(self) -> int:
        """The position of the group's earliest member (S4: groups leave in this order)."""
        return self.members[0]


def kinds_of(messages: Sequence[Message]) -> list[int]:
    """Each message's ``_kind`` bits (see :mod:`contextshift.core.messages`)."""
    return list(map(_kind, messages))


class SparseKinds(dict[int, int]):
    """Each position's ``_kind`` bits, held only for the positions whose kind is not 0 (any other reads 0)."""

    def __missing__(self, position: int) -> int:
        return 0


class Links(NamedTuple):
    """The groups of two or more members of a prompt; every other position is a singleton."""

    #: root (a group's earliest member) -> its members in prompt order, roots ascending.
    multi: dict[int, list[int]]
    #: position -> root, for every member of a group in ``multi``.
    root_of: dict[int, int]
    #: The roots of the groups in ``multi`` whose members are not consecutive positions.
    scattered: set[int]
    #: The positions of the protected messages, ascending.
    protected: list[int]


def find_links(
    messages: Sequence[Message],
    kinds: Sequence[int] | SparseKinds,
    specials: Sequence[int] | None = None,
    *,
    strict: bool = True,
    links: Sequence[tuple[str, ...] | None] | None = None,
) -> Links | None:
    """The multi-member groups of ``messages``. ``kinds``: each message's kind bits (a list, or a
    :class:`SparseKinds`). ``specials``: the positions whose kind is not 0 (ascending).
    ``links``: each message's ``_links``, where they were read without building the messages.

    A malformed message (see ``KIND_MALFORMED``) raises what deriving its link ids raises, or, when not
    ``strict``, makes the answer None. Linear in the number of messages that can link (plus, once there is
    an id-less tool result, the messages scanned back for its assistant).
    """
    if specials is None:
        specials = sorted(kinds) if isinstance(kinds, SparseKinds) else list(compress(range(len(kinds)), kinds))
    # Union-find over the positions that joined a group. Positions are visited in ascending order and the
    # smaller root always wins, so a group's root is its earliest member.
    parent: dict[int, int] = {}

    def find(item: int) -> int:
        root = item
        while (up := parent[root]) != root:
            root = up
        while (up := parent[item]) != root:
            parent[item] = root
            item = up
        return root

    def merge(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra

    protected: list[int] = []
    owner_of_id: dict[str, int] = {}
    setdefault = owner_of_id.setdefault
    get_parent = parent.get
    scanned = 0  # positions below this were scanned for an assistant already
    anchor: int | None = None  # the last assistant before ``scanned``
    for index in specials:
        kind = kinds[index]
        if kind & KIND_PROTECTED:
            protected.append(index)
            if kind == KIND_PROTECTED:
                continue
        if kind & KIND_MALFORMED:
            if not strict:
                return None
            ids = link_ids(messages[index])  # derived again: fails as it always did
        else:
            ids = (messages[index]._links if links is None else links[index]) or ()
        if ids:
            for link in ids:
                owner = setdefault(link, index)
                if owner == index:
                    continue
                # Join ``owner``'s group; ``index`` is the largest position seen so far.
                root = get_parent(owner)
                if root is None:
                    parent[owner] = root = owner
                elif parent[root] != root:
                    root = find(root)
                mine = get_parent(index)
                if mine is None:
                    parent[index] = root
                elif mine != root:
                    merge(mine, root)
        elif kind & KIND_TOOL:
            # An id-less tool result joins the nearest assistant before its run of id-less tool results.
            if not index or (kinds[index - 1] & (KIND_TOOL | KIND_LINKED)) != KIND_TOOL:
                for back in range(index - 1, scanned - 1, -1):
                    if messages[back].role == "assistant":
                        anchor = back
                        break
                scanned = index
            if anchor is not None:
                parent.setdefault(anchor, anchor)
                parent.setdefault(index, index)
                merge(anchor, index)
    multi: dict[int, list[int]] = {}
    scattered: set[int] = set()
    if parent:
        # In ascending order a position's parent (never larger) already points straight at its root, and
        # ``parent`` becomes the map from position to root.
        for position in sorted(parent):
            parent[position] = root = parent[parent[position]]
            members = multi.get(root)
            if members is None:
                multi[root] = [position]
            else:
                if members[-1] != position - 1:
                    scattered.add(root)
                members.append(position)
        # A union always joins two positions, so every group in ``multi`` has two or more members.
    return Links(multi, parent, scattered, protected)


def build_groups(messages: Sequence[Message]) -> list[Group]:
    """All groups of a prompt, ordered by their earliest member. Linear in the number of messages.

    Args:
        messages: the prompt (normalized ``Message`` objects, see :func:`normalize_messages`).

    Returns:
        Every message in exactly one group: an assistant's tool calls with their results, every other
        message a group of its own.

    Raises:
        TypeError: a message's fields have the wrong type, so its link ids cannot be read.
    """
    kinds = kinds_of(messages)
    links = find_links(messages, kinds)
    assert links is not None  # strict: a malformed message raised
    multi, root_of = links.multi, links.root_of
    if not root_of:
        return [Group((p,), bool(k & KIND_PROTECTED)) for p, k in enumerate(kinds)]
    groups: list[Group] = []
    append = groups.append
    for position, kind in enumerate(kinds):
        root = root_of.get(position)
        if root is None:
            append(Group((position,), bool(kind & KIND_PROTECTED)))
        elif root == position:
            members = multi[root]
            append(Group(tuple(members), any(kinds[p] & KIND_PROTECTED for p in members)))
    return groups


def group_index(groups: Sequence[Group], size: int) -> list[int]:
    """For each message position, the index of its group in ``groups``."""
    owner = [0] * size
    for number, group in enumerate(groups):
        for position in group.members:
            owner[position] = number
    return owner
