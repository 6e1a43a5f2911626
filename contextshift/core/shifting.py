"""Context shifting (S1–S8): fit an assembled prompt into a token budget.

Protected messages (M4) always stay; unprotected tool groups (M3) leave whole, oldest first, until the
prompt fits. Each message is counted once; removal subtracts its group's cost, so the work is linear in
the number of messages (S8), and the reported ``tokens`` is a fresh count of what was kept (S6).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, filterfalse, islice, repeat
from operator import attrgetter, countOf, eq
from typing import Any, cast, overload

from .errors import TokenBudgetExceeded
from .groups import Group, MessageKinds, find_links, group_index
from .messages import Message, MessageLike, MessageView, normalized, scanned
from .tokens import (
    ChatFormatProfile,
    TokenCounter,
    TokenizerProfile,
    callable_cost,
    callable_costs,
    check_counter,
    check_overhead,
    checked_count,
    is_profile,
    profile_costs,
    prompt_tokens,
)
from .vocabulary import CONTEXT_SHIFT, FIT, PROTECTED
from .wire import to_anthropic_messages, to_openai_messages

Counter = TokenCounter | TokenizerProfile


@dataclass(frozen=True, slots=True)
class Truncation:
    """A block compressed instead of dropped: the replacement and the messages it stands for.

    Args:
        replacement: the message that stands in the prompt instead (never protected).
        source_ids: the ids of the messages it replaces.
        tokens_before: what those messages cost.
        tokens_after: what the replacement costs.
    """

    replacement: Message
    source_ids: list[str]
    tokens_before: int
    tokens_after: int

    def to_dict(self) -> dict[str, Any]:
        """This entry as a JSON-ready dict.

        Returns:
            ``{"replacement", "source_ids", "tokens_before", "tokens_after"}``, the replacement as
            ``Message.to_dict`` gives it.
        """
        return {
            "replacement": self.replacement.to_dict(),
            "source_ids": list(self.source_ids),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(frozen=True, slots=True)
class ShiftResult:
    """What fits (``kept``, in prompt order), what was dropped (``excluded``, in removal order) and why.

    Frozen: a result is made once, by a shift or a strategy (use ``dataclasses.replace`` for a changed copy).

    Args:
        kept: the messages to send, in prompt order.
        excluded: the messages left out, in removal order (a shift makes it a read-only sequence that reads
            them from the prompt by position, building a dict's message only when read; it equals the list
            and pickles and copies as one).
        truncated: replacements (summaries) kept instead of the messages they stand for.
        tokens: a fresh count of ``kept``.
        reasons: every input message id's reason (``protected``, ``fit``, ``context-shift``...).
        strategy: the strategy that made it.
        diagnostics: what happened, in plain words.
        budget: the budget it was made for.
    """

    kept: list[Message]
    excluded: Sequence[Message]
    truncated: list[Truncation]
    tokens: int
    reasons: dict[str, str]
    strategy: str = "truncate"
    diagnostics: list[str] = field(default_factory=list)
    budget: int = 0

    def to_openai(self) -> list[dict[str, Any]]:
        """The kept messages as OpenAI Chat Completions ``messages``: exactly what the API accepts (no ``id``,
        ``source`` or other contextshift keys).

        Returns:
            The ``messages`` list to send.
        """
        return to_openai_messages(self.kept)

    def to_anthropic(self) -> tuple[str | None, list[dict[str, Any]]]:
        """The kept messages as Anthropic Messages: the ``system`` text and the ``messages`` list.

        Returns:
            ``(system, messages)``: system messages joined into ``system`` (None when there are none), the rest
            as alternating user/assistant turns with ``tool_use``/``tool_result`` blocks.
        """
        return to_anthropic_messages(self.kept)

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON-ready dicts (messages with contextshift's own keys, see ``to_openai``).

        Returns:
            A new dict: strategy, budget, tokens, kept, excluded, truncated, reasons and diagnostics.
        """
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
    """``budget`` if it is a positive integer.

    Raises:
        TypeError: it is not an integer.
        ValueError: it is not positive.
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"budget must be a positive integer, got {budget!r}")
    if budget <= 0:
        raise ValueError(f"budget must be a positive integer, got {budget}")
    return budget


def _own_ids(messages: Sequence[Message]) -> tuple[list[str], dict[str, str]] | None:
    """The ids of ``messages`` (all ``Message`` objects) in prompt order, and a dict of them each mapped to
    :data:`CONTEXT_SHIFT`, when each has an id of its own and no two share one (the prompt is then used as it
    is), else None. The dict is the template of a result's ``reasons`` (see :meth:`Prompt.context_shift_reasons`).
    """
    ids = [message.id for message in messages]  # a Message's id is always a str
    keys = dict.fromkeys(ids, CONTEXT_SHIFT)
    return (ids, keys) if len(keys) == len(ids) and "" not in keys else None


#: How many positions a batch-counting profile counts in its first batch; every later batch is twice as big.
_FIRST_BATCH = 64


class Prompt:
    """A normalized prompt, its tool groups and its message costs, counted on demand and once each.

    Args:
        messages: the prompt (``Message`` objects or their dicts).
        counter: a callable ``str -> int`` or a tokenizer profile.
        per_message_overhead: tokens added to every message by a plain callable counter.
        groups: groups to use instead of those found in ``messages`` (the host keeps the original prompt's
            groups and protection when it recounts a strategy's result).
        lazy: build the ``Message`` of a plain dict (and the copy of an id-less message with its id) only when
            it is counted or kept (``shift_context``); the excluded ones of a result are built when read.
    """

    def __init__(
        self,
        messages: Sequence[MessageLike],
        counter: Counter,
        per_message_overhead: int = 4,
        *,
        groups: Sequence[Group] | None = None,
        lazy: bool = False,
    ) -> None:
        check_overhead(per_message_overhead)
        # What kind of counter this is, decided once.
        self._chat_format = isinstance(counter, ChatFormatProfile)
        self._profile = self._chat_format or is_profile(counter)
        if not self._profile:
            check_counter(counter)
        self.messages: Sequence[Message]
        self._ids: list[str] | None
        kinds: list[int] | None = None
        read_links: list[tuple[str, ...] | None] | None = None
        if lazy and not isinstance(messages, list | tuple | str | bytes | Mapping):
            messages = list(messages)  # read once: a generator is not read twice
        # Every item's type is Message (see "Speed notes" in docs/design.md for the ``countOf`` test).
        only_messages = isinstance(messages, list | tuple) and countOf(map(type, messages), Message) == len(messages)
        self._id_keys: dict[str, str] | None = None
        #: Set by a caller that builds one result of this prompt and drops it (see context_shift_reasons).
        self.single_result = False
        own = _own_ids(cast(Sequence[Message], messages)) if only_messages else None
        if own is not None:  # Message objects with ids of their own: nothing to convert
            self.messages = list(cast(Sequence[Message], messages))
            self._ids, self._id_keys = own
        elif lazy and groups is None and len(messages):
            self.messages, self._ids, kinds, read_links = scanned(messages)
        else:
            self.messages, self._ids = normalized(messages)
        self.counter = counter
        self.per_message_overhead = per_message_overhead
        self.additive = not self._profile or self._chat_format
        self._groups: list[Group] | None = None
        if groups is None:
            specials: list[int] | None = None
            special_kinds: list[int] | None = None
            found: list[int] | MessageKinds | None = kinds
            if found is None:  # Message objects: the positions and kinds of the few whose kind is not 0
                built = self.messages
                specials = [position for position, message in enumerate(built) if message._kind]
                special_kinds = [built[position]._kind for position in specials]
                found = MessageKinds(built)  # any other position's kind, read from its message if asked for
            links = find_links(self.messages, found, specials, links=read_links, special_kinds=special_kinds)
            assert links is not None  # strict: a malformed message raised
            self.multi: dict[int, list[int]] = links.multi
            self.root_of: dict[int, int] = links.root_of
            #: Whether some group's members are not consecutive positions.
            self.scattered = bool(links.scattered)
            roots: set[int] = set()
            for position in links.protected:
                roots.add(self.root_of.get(position, position))
        else:
            self._groups = sorted(groups, key=lambda g: g.first)
            self.multi, self.root_of, roots = {}, {}, set()
            self.scattered = False
            for group in self._groups:
                members = list(group.members)
                if len(members) > 1:
                    self.multi[members[0]] = members
                    for position in members:
                        self.root_of[position] = members[0]
                    if members[-1] - members[0] != len(members) - 1:
                        self.scattered = True
                if group.protected:
                    roots.add(members[0])
        #: The roots (earliest members) of the protected groups, and every member of those groups, ascending.
        self.protected_roots: set[int] = roots
        self.protected_members: list[int] = sorted(p for root in roots for p in self.members(root))
        self._costs: dict[int, int] = {}
        self._fixed: int | None = None
        self._position: dict[str, int] | None = None
        self._owner: list[int] | None = None

    # -- groups ---------------------------------------------------------------------------------------------

    def members(self, root: int) -> list[int]:
        """The positions of the group whose earliest member is ``root``."""
        members = self.multi.get(root)
        return [root] if members is None else members

    def root(self, position: int) -> int:
        return self.root_of.get(position, position)

    @property
    def groups(self) -> list[Group]:
        """Every group, ordered by its earliest member (built when first asked for)."""
        if self._groups is None:
            protected, multi = self.protected_roots, self.multi
            self._groups = [
                Group(tuple(multi.get(p, (p,))), p in protected)
                for p in range(len(self.messages))
                if self.root_of.get(p, p) == p
            ]
        return self._groups

    @property
    def owner(self) -> list[int]:
        """For each position, the index of its group in :attr:`groups` (built once, when first asked for)."""
        if self._owner is None:
            self._owner = group_index(self.groups, len(self.messages))
        return self._owner

    @property
    def position(self) -> dict[str, int]:
        """Each message id's position."""
        if self._position is None:
            self._position = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._position

    @property
    def ids(self) -> list[str]:
        """Every message's id, in prompt order."""
        if self._ids is None:
            self._ids = list(map(_message_id, self.messages))
        return self._ids

    def ids_at(self, positions: Iterable[int]) -> Iterator[str]:
        """The ids of the messages at ``positions`` (read from the messages when the ids were not listed, so
        a shift that reads a few ids never lists them all)."""
        if self._ids is not None:
            return map(self._ids.__getitem__, positions)
        return map(_message_id, map(self.messages.__getitem__, positions))

    def context_shift_reasons(self) -> dict[str, str]:
        """A new dict of every message id, in prompt order, mapped to :data:`CONTEXT_SHIFT`: a copy of the
        one the ids were checked with (a memory copy, no hashing), or that dict itself when the prompt is
        made for one result only (``single_result``, so that the two never take memory side by side)."""
        keys = self._id_keys
        if keys is None:
            return dict.fromkeys(self.ids, CONTEXT_SHIFT)
        if self.single_result:
            self._id_keys = None
            return keys
        return keys.copy()

    def group_of(self, message_id: str) -> Group:
        root = self.root(self.position[message_id])
        return Group(tuple(self.members(root)), root in self.protected_roots)

    # -- costs ----------------------------------------------------------------------------------------------

    @property
    def fixed(self) -> int:
        """The cost of the prompt as a whole beside its messages (a profile's reply priming), 0 if empty."""
        if self._fixed is None:
            counter = self.counter
            if not self.messages:
                self._fixed = 0
            elif self._chat_format:
                self._fixed = cast(ChatFormatProfile, counter).reply_priming
            elif self._profile:
                self._fixed = checked_count(cast(TokenizerProfile, counter).count_messages([]), "(empty prompt)")
            else:
                self._fixed = 0
        return self._fixed

    def count(self, positions: Iterable[int]) -> None:
        """Count every message of ``positions`` not counted yet (a profile counts them in one batch)."""
        costs = self._costs
        todo = list(filterfalse(costs.__contains__, positions))
        if not todo:
            return
        messages, counter = self.messages, self.counter
        chunk = list(map(messages.__getitem__, todo))
        counted: list[int]
        if self._chat_format:
            counted = profile_costs(cast(ChatFormatProfile, counter), chunk)
        elif self._profile:
            empty, count_messages = self.fixed, cast(TokenizerProfile, counter).count_messages
            counted = [max(0, checked_count(count_messages([m]), m.id) - empty) for m in chunk]
        else:
            counted = callable_costs(chunk, cast(TokenCounter, counter), self.per_message_overhead)
        costs.update(zip(todo, counted, strict=True))

    @property
    def counted(self) -> dict[int, int]:
        """The costs counted so far, by position: the prompt's own table, which a caller counting as it goes
        (the walk of :func:`shift_prompt`) may fill in place with what :meth:`count` would put there."""
        return self._costs

    @property
    def batch_counting(self) -> bool:
        """Whether the counter is a tokenizer profile, which counts messages a batch at a time (else it is a
        plain callable ``str -> int``, counted message by message)."""
        return self._profile

    def cost(self, position: int) -> int:
        cost = self._costs.get(position)
        if cost is None:
            self.count((position,))
            cost = self._costs[position]
        return cost

    @property
    def costs(self) -> list[int]:
        """Every message's cost, in prompt order (counts whatever is not counted yet)."""
        size = len(self.messages)
        self.count(range(size))
        return list(map(self._costs.__getitem__, range(size)))

    @property
    def group_costs(self) -> list[int]:
        """Every group's cost, in the order of :attr:`groups`."""
        costs = self.costs
        return [sum(costs[p] for p in group.members) for group in self.groups]

    def fresh_count(self, positions: Iterable[int]) -> int:
        """A count of the messages at ``positions`` as a prompt of their own (S6)."""
        return prompt_tokens([self.messages[p] for p in positions], self.counter, self.per_message_overhead)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a shift may remove, and in which order: the one shifting algorithm's parameters.

    Args:
        order: group numbers (indices into :attr:`Prompt.groups`), the first to leave first; None for the
            oldest first. Protected groups and groups already in ``removed`` are skipped.
        removed: positions taken out before the shift (manual exclusions), with their reasons.
        reason: the reason of a group removed to fit; :data:`CONTEXT_SHIFT` when None.
    """

    order: Sequence[int] | None = None
    removed: Mapping[int, str] = field(default_factory=dict)
    reason: Callable[[Group], str] | None = None


class Span(Sequence[int]):
    """The positions of a range less a few, ascending, without a list of them: what leaves a shift that drops
    everything before the first group it keeps (the excluded messages are read through it by position).

    Compares equal to the list of the same positions; it pickles and copies as that list.
    """

    __slots__ = ("_gaps", "_span")

    def __init__(self, span: range, gaps: Iterable[int] = ()) -> None:
        self._span = span
        self._gaps = sorted(p for p in gaps if p in span)

    def __len__(self) -> int:
        return len(self._span) - len(self._gaps)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return list(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("Span index out of range")
        position = self._span.start + index
        for gap in self._gaps:  # each gap at or before the position moves it one further
            if gap > position:
                break
            position += 1
        return position

    def __iter__(self) -> Iterator[int]:
        gaps = self._gaps
        if not gaps:
            return iter(self._span)
        return filterfalse(set(gaps).__contains__, self._span)

    def __contains__(self, position: object) -> bool:
        return position in self._span and position not in self._gaps

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(map(eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


@dataclass(frozen=True, slots=True)
class Removal:
    """What one shift removed (positions in removal order) and kept (in prompt order), and the kept count.

    ``codes`` holds the reason of every removed position whose reason is not ``context-shift``.
    """

    removed: Sequence[int]  # a list, or a Span
    kept: list[int]
    tokens: int
    codes: dict[int, str] = field(default_factory=dict)

    @property
    def reasons(self) -> dict[int, str]:
        """Every removed position's reason."""
        codes = self.codes
        return {p: codes.get(p, CONTEXT_SHIFT) for p in self.removed}


def shift_prompt(
    prompt: Prompt,
    budget: int,
    plan: Plan | None = None,
    *,
    order: Sequence[int] | None = None,
    removed: Mapping[int, str] | None = None,
    reason: Callable[[Group], str] | None = None,
) -> Removal:
    """Remove unprotected groups in the plan's order until the prompt fits ``budget`` (S1-S8).

    Removing groups first-to-last until the rest fits keeps the longest run of the *last* groups of the
    order that fits beside what stays anyway (a cost is never negative). So the walk goes the other way:
    from the last group of the order back, adding each group's cost while the total fits. Only the
    protected groups and the groups walked are counted; every group before the first one that no longer
    fits leaves without being counted. ``order``, ``removed`` and ``reason`` are a shorthand for ``plan``.

    Raises:
        TokenBudgetExceeded: the protected groups alone do not fit.
    """
    check_budget(budget)
    if plan is None:
        plan = Plan(order=order, removed=removed or {}, reason=reason)
    multi = prompt.multi
    size = len(prompt.messages)
    stays, between, candidates, skip = _candidates(prompt, plan)
    _check_protected_fit(prompt, budget)
    if candidates is None:  # the roots newest first, read only as far as the walk goes
        newest_first: Iterator[int] = filterfalse(skip.__contains__, range(size - 1, -1, -1))
    else:
        newest_first = reversed(candidates)
    walked, overflowed, tokens = _walk(prompt, budget, newest_first, stays)
    # Every candidate before the ones walked leaves, in the plan's order; the rest stays.
    ascending = plan.order is None
    staying = walked[::-1]
    codes: dict[int, str] = dict(plan.removed)
    removal: list[int] = list(codes)
    leaves: Sequence[int] = removal
    label = plan.reason
    if candidates is None and label is None and between is not None:
        # Oldest first, consecutive groups: the positions up to the first that stays, less the other groups
        # (a Span of them when nothing was taken out before: no list, and no int object, per position).
        if overflowed:
            span = range(staying[0] if staying else size)
            if removal:
                removal += _span_without(span, between)
            else:
                leaves = Span(span, between)
        leaving = []
    else:
        if candidates is None:
            candidates = list(filterfalse(skip.__contains__, range(size)))
        leaving = candidates[: len(candidates) - len(walked)]
    if label is None:
        removal += _with_members(leaving, multi, ascending, between) if multi else leaving
    else:
        for root in leaving:
            members = prompt.members(root)
            codes.update(dict.fromkeys(members, label(Group(tuple(members), False))))
            removal += members
    staying = _with_members(staying, multi, ascending, between) if multi else staying
    kept = sorted([*stays, *staying]) if stays or not ascending or multi else staying
    if not kept:
        tokens = 0
    elif not prompt.additive:
        tokens = prompt.fresh_count(kept)
    return Removal(removed=leaves, kept=kept, tokens=tokens, codes=codes)


def _candidates(prompt: Prompt, plan: Plan) -> tuple[list[int], set[int] | None, list[int] | None, set[int]]:
    """The candidates of a shift and what stays anyway: ``(stays, between, candidates, skip)``.

    ``stays``: the positions that stay whatever the walk does (protected, and the members left of groups
    taken out before). ``candidates``: the roots of the unprotected groups, the first to leave first, or None
    for every root not in ``skip``, ascending (read as walked). ``between``: when the candidates are the roots
    in ascending order of groups whose members are consecutive, the positions of the groups that are not
    candidates: the members of any run of candidates are then the positions from its first root to its last
    member less these (see _with_members); else None.
    """
    gone = plan.removed
    root_of, protected_roots, multi = prompt.root_of, prompt.protected_roots, prompt.multi
    pre_gone = {root_of.get(p, p) for p in gone}
    stays: list[int]
    between: set[int] | None = None
    candidates: list[int] | None = None
    skip: set[int] = set()
    if plan.order is None:
        skip = root_of.keys() - multi.keys()  # the groups' later members (the roots are multi's keys)
        skip |= protected_roots
        skip |= pre_gone
        if pre_gone:
            left = (p for r in pre_gone for p in prompt.members(r) if p not in gone)
            stays = sorted({*prompt.protected_members, *left})
        else:
            stays = prompt.protected_members
        if not prompt.scattered:
            between = {*prompt.protected_members, *(p for r in pre_gone for p in prompt.members(r))}
    else:
        groups = prompt.groups
        seen: set[int] = set()
        candidates = []
        for number in plan.order:
            root = groups[number].first
            if root not in protected_roots and root not in pre_gone and root not in seen:
                seen.add(root)
                candidates.append(root)
        stays = [p for p in range(len(prompt.messages)) if p not in gone and root_of.get(p, p) not in seen]
    return stays, between, candidates, skip


def _check_protected_fit(prompt: Prompt, budget: int) -> None:
    """Raise :class:`TokenBudgetExceeded` where the protected groups alone do not fit ``budget``."""
    protected = prompt.protected_members
    if prompt.additive:
        prompt.count(protected)
        protected_total = (prompt.fixed if protected else 0) + sum(map(prompt.cost, protected))
    else:
        protected_total = prompt.fresh_count(protected)
    if protected_total > budget:
        raise TokenBudgetExceeded(protected_total, budget)


def _span_without(span: range, between: set[int]) -> list[int]:
    """The positions of ``span`` not in ``between``: a list of the range with the few in it deleted (a
    filter only when there are many)."""
    inside = [p for p in between if p in span] if len(between) <= _FEW else None
    if inside is None or len(inside) > _FEW:
        return list(filterfalse(between.__contains__, span))
    out = list(span)
    start = span.start
    for position in sorted(inside, reverse=True):
        del out[position - start]
    return out


#: How many positions _span_without deletes one by one.
_FEW = 16


def _with_members(
    roots: list[int], multi: Mapping[int, list[int]], ascending: bool, between: set[int] | None = None
) -> list[int]:
    """Every member of the groups of ``roots``, group by group: the runs of singletons are sliced whole.

    ``between``: when ``roots`` are consecutive candidates in ascending order and every group's members are
    consecutive positions, the positions of the groups that are not candidates. Group by group is then
    prompt order, and the members are every position from the first root to the last root's last member
    that is not in ``between`` (found at C speed, without looking at each group).
    """
    if not roots:
        return roots
    if between is not None:
        last = roots[-1]
        members = multi.get(last)
        return _span_without(range(roots[0], (last if members is None else members[-1]) + 1), between)
    if ascending:
        splits = []
        for root in multi:
            index = bisect_left(roots, root)
            if index < len(roots) and roots[index] == root:
                splits.append(index)
        splits.sort()
    else:
        where = dict(zip(roots, range(len(roots)), strict=True))
        splits = sorted(where[root] for root in multi if root in where)
    if not splits:
        return roots
    out: list[int] = []
    start = 0
    for index in splits:
        out += roots[start:index]
        out += multi[roots[index]]
        start = index + 1
    out += roots[start:]
    return out


def _walk(
    prompt: Prompt, budget: int, newest_first: Iterator[int], stays: Sequence[int]
) -> tuple[list[int], bool, int]:
    """Walk the candidate roots from the last of the plan's order back, keeping each group while the prompt
    fits: the roots kept (in walk order), whether the walk stopped at a group that did not fit, and (for an
    additive counter) the cost of everything that stays. The candidates are read only as far as the walk
    goes: a plain callable counts each group as it is walked (so only the groups kept and the one that no
    longer fits are counted), a profile a batch at a time (a batch is tokenized on all cores)."""
    if prompt.additive:
        prompt.count(stays)
        costs = prompt.counted
        total = sum(map(costs.__getitem__, stays))
        fixed = prompt.fixed
        if stays:
            total += fixed
            fixed = 0  # charged once, with the first message that stays
        multi = prompt.multi
        get_members, cost_of = multi.get, costs.__getitem__
        walked: list[int] = []
        batch = _FIRST_BATCH
        # What the groups walked may spend: the budget less what stays and the fixed cost (charged with the
        # first group walked when nothing else stays). So the loop does one test and one subtraction a group.
        allowed = room = budget - total - fixed
        if not prompt.batch_counting:  # a plain callable: each group counted as it is walked, in one loop
            # (Prompt.cost inlined: see "Speed notes" in docs/design.md)
            messages, counter = prompt.messages, cast(TokenCounter, prompt.counter)
            overhead, get_cost = prompt.per_message_overhead, costs.get
            for root in newest_first:
                members = get_members(root)
                if members is None:
                    group_cost = get_cost(root)
                    if group_cost is None:
                        costs[root] = group_cost = callable_cost(messages[root], counter, overhead)
                else:
                    group_cost = 0
                    for position in members:
                        cost = get_cost(position)
                        if cost is None:
                            costs[position] = cost = callable_cost(messages[position], counter, overhead)
                        group_cost += cost
                if group_cost > room:
                    return walked, True, total + (allowed - room) + (fixed if walked else 0)
                room -= group_cost
                walked.append(root)
            return walked, False, total + (allowed - room) + (fixed if walked else 0)
        while chunk := list(islice(newest_first, batch)):
            # Each root's group, or the root alone (``zip`` makes its 1-tuple): no Python code per root.
            prompt.count(list(chain.from_iterable(map(get_members, chunk, zip(chunk)))) if multi else chunk)
            for number, root in enumerate(chunk):
                members = get_members(root)
                group_cost = cost_of(root) if members is None else sum(map(cost_of, members))
                if group_cost > room:
                    walked += chunk[:number]
                    return walked, True, total + (allowed - room) + (fixed if walked else 0)
                room -= group_cost
            walked += chunk
            batch *= 2
        return walked, False, total + (allowed - room) + (fixed if walked else 0)
    # A profile whose whole-prompt count is not the sum of its messages: only its own count decides.
    candidates = list(newest_first)
    kept = list(stays)
    if prompt.fresh_count(sorted(kept + [p for r in candidates for p in prompt.members(r)])) <= budget:
        return candidates, False, 0
    for index, root in enumerate(candidates):
        trial = kept + prompt.members(root)
        if prompt.fresh_count(sorted(trial)) > budget:
            return candidates[:index], True, 0
        kept = trial
    return candidates, False, 0


def build_result(
    prompt: Prompt,
    outcome: Removal,
    budget: int,
    *,
    strategy: str = "truncate",
    diagnostics: Sequence[str] = (),
    **changes: Any,
) -> ShiftResult:
    """The :class:`ShiftResult` of ``outcome`` on ``prompt``; ``changes`` replace any of its fields."""
    messages, ids_at = prompt.messages, prompt.ids_at
    removed, kept_positions = outcome.removed, outcome.kept
    # Every position is kept or removed: all are context-shift, then the kept ones fit.
    kept = list(map(messages.__getitem__, kept_positions))
    reasons = prompt.context_shift_reasons()
    for message in kept:  # a plain loop (see "Speed notes" in docs/design.md)
        reasons[message.id] = FIT
    codes = outcome.codes
    reasons.update(zip(ids_at(codes), codes.values(), strict=True))
    reasons.update(zip(ids_at(prompt.protected_members), repeat(PROTECTED)))
    fields: dict[str, Any] = {
        "kept": kept,
        "excluded": MessageView(messages, removed),
        "truncated": [],
        "tokens": outcome.tokens,
        "reasons": reasons,
        "strategy": strategy,
        "diagnostics": list(diagnostics),
        "budget": budget,
    }
    fields.update(changes)
    return ShiftResult(**fields)


def excluded_note(count: int) -> list[str]:
    """The diagnostic of a shift that excluded ``count`` messages (none for 0)."""
    return [f"context shift excluded {count} message(s)"] if count else []


def shift_context(
    messages: Sequence[MessageLike],
    count_tokens: Counter,
    budget: int,
    *,
    per_message_overhead: int = 4,
) -> ShiftResult:
    """Fit ``messages`` into ``budget`` tokens by dropping the oldest unprotected tool groups (S1-S8).

    Protected messages (pinned, the system prompt, persona and character, and the current input) always
    stay; every other message leaves with its whole tool group (an assistant's tool calls and their
    results), oldest first, until the rest fits. Only the protected messages and the newest groups down to
    the first one that no longer fits are counted, each once.

    Args:
        messages: the prompt, oldest first: ``Message`` objects or OpenAI-style dicts (Anthropic content
            blocks allowed). An id-less message gets the id ``msg-<index>``. Every dict is checked, but a
            ``Message`` is built only for what is counted or kept.
        count_tokens: a callable ``str -> int`` (charged ``count(text) + per_message_overhead`` per message,
            plus fixed costs for images and files) or a tokenizer profile such as
            ``contextshift.get_tokenizer("gpt-4o")``, whose own chat-format count decides.
        budget: the tokens the prompt may use (the context window less the reply's reserve).
        per_message_overhead: framing tokens per message for a plain callable counter.

    Returns:
        A frozen :class:`ShiftResult`: ``kept`` (in prompt order), ``excluded`` (in removal order),
        ``reasons`` (every message id's reason), ``tokens`` (a fresh count of what was kept) and
        ``diagnostics``. ``result.to_openai()`` gives the kept messages as a provider accepts them.

    Raises:
        TokenBudgetExceeded: the protected messages alone do not fit; nothing may be sent.
        TypeError: a message, the counter or a count has the wrong type (the error names the message).
        ValueError: a duplicate message id, an unknown role, or a budget that is not positive.
    """
    check_budget(budget)
    prompt = Prompt(messages, count_tokens, per_message_overhead, lazy=True)
    prompt.single_result = True
    outcome = shift_prompt(prompt, budget)
    return build_result(prompt, outcome, budget, diagnostics=excluded_note(len(outcome.removed)))


_message_id = attrgetter("id")
