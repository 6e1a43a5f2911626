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
from functools import reduce
from itertools import compress, repeat
from operator import and_, attrgetter, or_
from typing import NamedTuple, cast

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


class MessageKinds:
    """Each position's ``_kind`` bits, read from the message when asked for: what :func:`find_links` needs of
    the few positions it looks at beside the ones whose kinds it was given."""

    __slots__ = ("_messages",)

    def __init__(self, messages: Sequence[Message]) -> None:
        self._messages = messages

    def __getitem__(self, position: int) -> int:
        return self._messages[position]._kind


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
    kinds: Sequence[int] | MessageKinds,
    specials: Sequence[int] | None = None,
    *,
    strict: bool = True,
    links: Sequence[tuple[str, ...] | None] | None = None,
    special_kinds: Sequence[int] | None = None,
) -> Links | None:
    """The multi-member groups of ``messages``. ``kinds``: each message's kind bits (a list, or a
    :class:`MessageKinds` that reads a position's bits from its message). ``specials``: the positions whose kind
    is not 0 (ascending), and ``special_kinds`` their kinds where the caller read them already. ``links``:
    each message's ``_links``, where they were read without building the messages.

    A malformed message (see ``KIND_MALFORMED``) raises what deriving its link ids raises, or, when not
    ``strict``, makes the answer None. Linear in the number of messages that can link (plus, once there is
    an id-less tool result, the messages scanned back for its assistant).
    """
    if specials is None:
        assert not isinstance(kinds, MessageKinds)  # it reads positions only: ``specials`` come with it
        specials = list(compress(range(len(kinds)), kinds))
    if special_kinds is None:
        special_kinds = list(map(kinds.__getitem__, specials))
    # Each special's link ids (a comprehension: see "Speed notes" in docs/design.md). A protected message with
    # no other bit has none (it is not linked, nor malformed), so it needs no test of its own below.
    ids_of: list[tuple[str, ...] | None]
    if links is None:
        ids_of = [messages[position]._links for position in specials]
    else:
        ids_of = list(map(links.__getitem__, specials))
    every_kind = reduce(or_, set(special_kinds), 0)  # the bits any special has
    protected = (
        list(compress(specials, map(and_, special_kinds, repeat(KIND_PROTECTED))))
        if every_kind & KIND_PROTECTED
        else []
    )
    if every_kind & KIND_MALFORMED:
        if not strict:
            return None
        for number, kind in enumerate(special_kinds):  # in prompt order: the first that fails raises
            if kind & KIND_MALFORMED:
                ids_of[number] = link_ids(messages[specials[number]])  # derived again: fails as it always did
    root_of: dict[int, int] = {}
    multi: dict[int, list[int]] = {}
    scattered: set[int] = set()
    merged: set[int] = set()  # the labels of the groups made by merging (sorted and checked at the end)
    unlinked = _join_linked(specials, cast(list[tuple[str, ...]], ids_of), root_of, multi, scattered, merged)
    _join_idless(messages, kinds, unlinked, root_of, multi, scattered, merged)
    multi = _settle(root_of, multi, scattered, merged)
    # A union always joins two positions, so every group in ``multi`` has two or more members.
    return Links(multi, root_of, scattered, protected)


def _join_linked(
    specials: Sequence[int],
    ids_of: Sequence[tuple[str, ...]],
    root_of: dict[int, int],
    multi: dict[int, list[int]],
    scattered: set[int],
    merged: set[int],
) -> list[int]:
    """Group the specials that carry link ids; return the ones without any.

    A group is a list of its positions; ``root_of`` maps each member to the group's label, which is its root
    (earliest member) unless two groups merged (see _merge). A link id's owner is the first message that
    carries it; a later one carrying it joins the owner's group. The positions come in ascending order, so a
    position joining its first group is that group's largest and is appended.
    """
    owner_of_id: dict[str, int] = {}
    setdefault = owner_of_id.setdefault
    get_root = root_of.get
    unlinked: list[int] = []
    for index, ids in zip(specials, ids_of, strict=True):
        if not ids:
            unlinked.append(index)
            continue
        mine: int | None = None  # the label of the group this message joined (none yet: no earlier link)
        for link in ids:
            owner = setdefault(link, index)
            if owner == index:
                continue
            label = get_root(owner)
            if mine is None:
                if label is None:
                    root_of[owner] = label = owner
                    multi[owner] = [owner, index]
                    if index != owner + 1:
                        scattered.add(owner)
                else:
                    members = multi[label]
                    if members[-1] != index - 1:
                        scattered.add(label)
                    members.append(index)
                root_of[index] = mine = label
            elif mine != label:
                if label is None:
                    root_of[owner] = label = owner
                    multi[owner] = [owner]
                _merge(root_of, multi, merged, scattered, label, mine)
                mine = root_of[index]
    return unlinked


def _join_idless(
    messages: Sequence[Message],
    kinds: Sequence[int] | MessageKinds,
    unlinked: Sequence[int],
    root_of: dict[int, int],
    multi: dict[int, list[int]],
    scattered: set[int],
    merged: set[int],
) -> None:
    """An id-less tool result joins the nearest assistant before its run of id-less tool results. Which
    groups form does not depend on the order of the joins, so these come after the linked ones."""
    scanned = 0  # positions below this were scanned for an assistant already
    anchor: int | None = None  # the last assistant before ``scanned``
    for index in unlinked:
        if not kinds[index] & KIND_TOOL:
            continue
        if not index or (kinds[index - 1] & (KIND_TOOL | KIND_LINKED)) != KIND_TOOL:
            for back in range(index - 1, scanned - 1, -1):
                if messages[back].role == "assistant":
                    anchor = back
                    break
            scanned = index
        if anchor is not None:
            for position in (anchor, index):
                if position not in root_of:
                    root_of[position] = position
                    multi[position] = [position]
                    merged.add(position)
            if root_of[anchor] != root_of[index]:
                _merge(root_of, multi, merged, scattered, root_of[anchor], root_of[index])


def _settle(
    root_of: dict[int, int], multi: dict[int, list[int]], scattered: set[int], merged: set[int]
) -> dict[int, list[int]]:
    """The groups made by merging sorted, relabelled with their root and checked for gaps; roots ascending."""
    for label in merged & multi.keys():
        members = multi.pop(label)
        members.sort()
        root = members[0]
        multi[root] = members
        if root != label:
            root_of.update(zip(members, repeat(root)))
        scattered.discard(label)
        if members[-1] - root >= len(members):
            scattered.add(root)
    if merged or list(multi) != sorted(multi):
        return dict(sorted(multi.items()))
    return multi


def _merge(
    root_of: dict[int, int], multi: dict[int, list[int]], merged: set[int], scattered: set[int], one: int, other: int
) -> None:
    """Merge the groups labelled ``one`` and ``other``: the smaller one's members move to the larger one's
    list and label (so a position moves O(log n) times at most); the list is sorted, and labelled with its
    root, once at the end (``merged``)."""
    if len(multi[one]) < len(multi[other]):
        one, other = other, one
    moved = multi.pop(other)
    multi[one] += moved
    root_of.update(zip(moved, repeat(one)))
    merged.discard(other)
    merged.add(one)
    scattered.discard(one)  # checked again at the end
    scattered.discard(other)


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
