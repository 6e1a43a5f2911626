"""What every framework adapter shares: entries, counting with the framework's own counter, the fit itself.

An adapter turns each of its framework's objects into one *entry* (rarely more: a Pydantic AI request that
carries the system prompt beside a user prompt is two), a message dict in contextshift's shape (M2) whose id
maps back to the object and whose tool-link ids say which objects belong together. Plain dicts, because
shifting builds the ``Message`` of a plain dict only when it counts or keeps it: a long history's old
messages are never built. :func:`fit` shifts the
entries with :func:`~contextshift.shift_with_strategy` and gives back the kept objects themselves, in order.

Counting. ``model`` names a contextshift tokenizer profile, which counts the entries. A framework counter
(a callable on a list of the framework's objects) is wrapped in :class:`NativeCounter`, a chat-format profile
whose cost of an entry is the counter's count of that entry's object: shifting then adds costs up, as it does
for every chat format. A framework counter need not be additive, so the fitted list is counted once more as
a whole; when that count is over, the fit runs again with the budget lowered by the difference, until the
whole list fits by the framework's own count.

Summaries. A strategy's replacement (``summarize``'s summary of the history it dropped) becomes a framework
object of its own (the adapter decides which) placed where that history began: right after the leading
system messages, so it never stands between a tool call and its result, nor after the current input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ..core.embedding import Embedder
from ..core.errors import TokenBudgetExceeded
from ..core.messages import Message
from ..core.shifting import ShiftResult, shift_context
from ..core.tokens import ChatFormatProfile, TokenizerProfile
from ..core.vocabulary import ROLES
from ..tokenizers import get_tokenizer

T = TypeVar("T")

#: A framework counter: tokens of a list of the framework's objects (what ``trim_messages`` calls a list counter).
ListCounter = Callable[[list[Any]], int]

#: How many times a fit is redone with a lower budget before giving up (a counter far from additive).
MAX_REFITS = 8

#: The options of ``shift_with_strategy`` that ``truncate`` through ``shift_context`` takes as well.
_PLAIN_OPTIONS = frozenset({"per_message_overhead"})


def additive(counter: ListCounter) -> ListCounter:
    """Mark a list counter as the sum of its per-message counts (a per-message callable summed): the fit
    then takes its own sum as the list's count instead of counting the fitted list again.

    Args:
        counter: the list counter.

    Returns:
        The same counter, marked.
    """
    counter.contextshift_additive = True  # type: ignore[attr-defined]
    return counter


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A tool call in the OpenAI dict shape shifting reads without building anything."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass(frozen=True, slots=True)
class Entry:
    """One unit of removal: a contextshift message standing for (part of) one framework object.

    Args:
        message: the contextshift message dict (M2), with a unique ``id`` and the object's tool-link ids.
        owner: the index of the framework object it stands for.
        parts: which of the owner's parts it stands for (None: all of the object).
        native: the framework object a framework counter charges for this entry (the owner, or the owner
            rebuilt with ``parts`` only).
    """

    message: dict[str, Any]
    owner: int
    parts: tuple[int, ...] | None = None
    native: Any = None


@dataclass(frozen=True)
class FitOptions:
    """The library's strategy options, as every adapter accepts them.

    Args:
        max_tokens: the budget of the fitted history, by the counter in use.
        strategy: a registered contextshift strategy: ``truncate`` (default), ``summarize``, ``recall``,
            ``vector-recall``, ``manual`` or a plugin's.
        pinned_ids: ids of framework objects that always stay (the framework's own ids).
        protected_roles: contextshift roles (``system``, ``user``, ``assistant``, ``tool``) whose messages
            always stay; ``system`` by default (leave it out to let old system messages go too).
        protect_input: keep the current input (the newest user message) whatever happens.
        embedder: a sentence-embedding model for ``recall`` and ``vector-recall``.
        extra: anything else for :func:`~contextshift.shift_with_strategy` (``registry``, ``timeout``,
            ``manual_excluded_ids``, ``per_message_overhead``, and any option it gains, such as ``standing``).
    """

    max_tokens: int
    strategy: str = "truncate"
    pinned_ids: frozenset[str] = frozenset()
    protected_roles: frozenset[str] = frozenset({"system"})
    protect_input: bool = True
    embedder: Embedder | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        max_tokens: int,
        *,
        strategy: str = "truncate",
        pinned_ids: Iterable[str] = (),
        protected_roles: Iterable[str] = ("system",),
        protect_input: bool = True,
        embedder: Embedder | None = None,
        **extra: Any,
    ) -> FitOptions:
        """Checked options.

        Raises:
            TypeError: ``max_tokens`` is not an integer or ``pinned_ids`` is a single string.
            ValueError: ``max_tokens`` is not positive or a protected role is unknown.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens}")
        if isinstance(pinned_ids, str) or isinstance(protected_roles, str):
            raise TypeError("pinned_ids and protected_roles take a list of strings, not one string")
        roles = frozenset(protected_roles)
        unknown = sorted(roles - set(ROLES))
        if unknown:
            raise ValueError(f"unknown protected role(s) {unknown}: use {sorted(ROLES)}")
        return cls(
            max_tokens=max_tokens,
            strategy=strategy,
            pinned_ids=frozenset(pinned_ids),
            protected_roles=roles,
            protect_input=protect_input,
            embedder=embedder,
            extra=dict(extra),
        )


def protect(message: dict[str, Any], options: FitOptions, *, native_id: str | None, is_input: bool) -> dict[str, Any]:
    """Give a message dict the protection the options give it (in place, and returned): pinned by id or role,
    the current input marked ``source="input"``, a system message left unprotected (``source="history"``)
    when ``system`` is not a protected role."""
    role = message["role"]
    if (native_id is not None and native_id in options.pinned_ids) or role in options.protected_roles:
        message["pinned"] = True
    if is_input and options.protect_input:
        message["source"] = "input"
    elif role == "system" and "system" not in options.protected_roles:
        message["source"] = "history"
    return message


class NativeCounter(ChatFormatProfile):
    """A framework counter as a chat-format profile: an entry costs the counter's count of its object alone,
    less the count of an empty list (which is the prompt's fixed cost, as a chat format's reply priming).

    Args:
        counter: the framework's list counter.
        natives: each entry id's framework object.
        replacement: makes a framework object of a contextshift message the strategy made (a summary).
    """

    tokens_per_message = 0
    tokens_per_name = 0

    def __init__(self, counter: ListCounter, natives: Mapping[str, Any], replacement: Callable[[Message], Any]) -> None:
        super().__init__("framework counter", approximate=False)
        self._counter = counter
        self._natives = natives
        self._replacement = replacement
        self._made: dict[str, Any] = {}
        self._costs: dict[str, int] = {}
        self.reply_priming = self._checked(counter([]))

    @staticmethod
    def _checked(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"the token counter returned {value!r}, not a count (a non-negative integer)")
        return value

    def native(self, message: Message) -> Any:
        """The framework object of an entry, or of a strategy's replacement (made once per id)."""
        found = self._natives.get(message.id)
        if found is not None:
            return found
        made = self._made.get(message.id)
        if made is None:
            made = self._made[message.id] = self._replacement(message)
        return made

    def count_text(self, text: str) -> int:
        """A text's tokens: the cost of a replacement message holding it, less that of an empty one."""
        full = self._counter([self._replacement(Message(role="system", content=text))])
        empty = self._counter([self._replacement(Message(role="system", content=""))])
        return max(0, self._checked(full) - self._checked(empty))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Zeros: the profile asks for its messages' text counts only to hand them to :meth:`message_tokens`,
        which charges the framework object instead (counting the texts too would double the counter's work)."""
        return [0] * len(texts)

    def message_tokens(self, message: Message, text_tokens: int | None = None) -> int:
        """The framework counter's count of the entry's object, less the empty list's count (once per id: a
        fit that runs again counts nothing again)."""
        cost = self._costs.get(message.id)
        if cost is None:
            cost = max(0, self._checked(self._counter([self.native(message)])) - self.reply_priming)
            self._costs[message.id] = cost
        return cost

    def total(self, messages: Sequence[Message]) -> int:
        """The sum of the messages' costs and the fixed cost: what shifting charges for all of them."""
        return self.reply_priming + sum(self.message_tokens(m) for m in messages) if messages else 0

    def count_messages(self, messages: Sequence[Message]) -> int:
        """The framework counter's count of the objects of ``messages``, as one list."""
        if not messages:
            return 0
        return self._checked(self._counter([self.native(m) for m in messages]))


@dataclass
class Bridge(Generic[T]):
    """How one framework's objects go in and out of a fit (given by each adapter).

    Args:
        rebuild: the object made of some of an object's parts (for entries with ``parts``).
        replacement: the framework object standing for a strategy's replacement message (a summary).
        leading: whether an object belongs to the leading system block a summary goes after.
    """

    rebuild: Callable[[T, tuple[int, ...]], T]
    replacement: Callable[[Message], T]
    leading: Callable[[T], bool]


def assemble(items: Sequence[T], entries: Sequence[Entry], result: ShiftResult, bridge: Bridge[T]) -> list[T]:
    """The framework objects of a result: each kept object itself (rebuilt when only some of its entries were
    kept), in order, with the strategy's replacements after the leading system objects."""
    by_id = {entry.message["id"]: entry for entry in entries}
    per_owner: dict[int, int] = {}
    for entry in entries:
        per_owner[entry.owner] = per_owner.get(entry.owner, 0) + 1
    kept: dict[int, list[Entry]] = {}
    replacements: list[T] = []
    for message in result.kept:
        found = by_id.get(message.id)
        if found is None:
            replacements.append(bridge.replacement(message))
        else:
            kept.setdefault(found.owner, []).append(found)
    out: list[T] = []
    for owner in sorted(kept):
        chosen = kept[owner]
        if len(chosen) == per_owner[owner]:
            out.append(items[owner])
        else:
            parts = tuple(sorted(p for entry in chosen for p in (entry.parts or ())))
            out.append(bridge.rebuild(items[owner], parts))
    if replacements:
        at = 0
        while at < len(out) and bridge.leading(out[at]):
            at += 1
        out[at:at] = replacements
    return out


def fit(
    items: Sequence[T],
    entries: Sequence[Entry],
    options: FitOptions,
    bridge: Bridge[T],
    *,
    counter: ListCounter | None = None,
    model: str | TokenizerProfile | None = None,
) -> tuple[list[T], ShiftResult]:
    """Fit framework objects into ``options.max_tokens`` with contextshift.

    Args:
        items: the framework's objects, oldest first.
        entries: their entries (see :class:`Entry`), in object order.
        options: the budget and strategy options.
        bridge: how objects are rebuilt, replaced and recognised as leading system objects.
        counter: the framework's list counter (it decides the budget); None: ``model``'s profile.
        model: a contextshift tokenizer profile or the model name to find one for (None: ``approximate``).

    Returns:
        The kept objects in order (the objects themselves) and the contextshift result, whose ``tokens``
        is the fitted list's count by the counter in use and ``budget`` is ``max_tokens``.

    Raises:
        TokenBudgetExceeded: what must stay (system prompt, pinned messages, current input) does not fit.
        TypeError: the counter returned something that is not a count.
    """
    shift = _shifter(entries, options)
    if counter is None:
        profile = model if isinstance(model, TokenizerProfile) else get_tokenizer(model)
        result = shift(profile, options.max_tokens)
        return assemble(items, entries, result, bridge), result
    return _fit_counted(items, entries, options, bridge, shift, counter)


#: One shift of a fit's entries: by a counting profile, into a budget.
_Shift = Callable[[Any, int], ShiftResult]


def _shifter(entries: Sequence[Entry], options: FitOptions) -> _Shift:
    """How a fit shifts its entries: ``shift_context`` for a plain ``truncate``, else ``shift_with_strategy``."""
    from ..core.host import shift_with_strategy

    messages = [entry.message for entry in entries]
    plain = options.strategy == "truncate" and options.embedder is None and options.extra.keys() <= _PLAIN_OPTIONS
    kwargs: dict[str, Any] = dict(options.extra)
    if not plain:
        kwargs["strategy"] = options.strategy
        if options.embedder is not None:
            kwargs["embedder"] = options.embedder

    def shift(count: Any, budget: int) -> ShiftResult:
        # truncate is shift_context itself: called directly it reads old messages lazily (never building them)
        if plain:
            return shift_context(messages, count, budget, **kwargs)
        return shift_with_strategy(messages, count, budget, **kwargs)

    return shift


def _fit_counted(
    items: Sequence[T],
    entries: Sequence[Entry],
    options: FitOptions,
    bridge: Bridge[T],
    shift: _Shift,
    counter: ListCounter,
) -> tuple[list[T], ShiftResult]:
    """:func:`fit` by a framework ``counter``: fitted again with a lower budget while the counter's count of the
    whole fitted list is over ``options.max_tokens`` (at most :data:`MAX_REFITS` times)."""
    messages = [entry.message for entry in entries]
    budget = options.max_tokens
    natives = {e.message["id"]: e.native if e.native is not None else items[e.owner] for e in entries}
    native = NativeCounter(counter, natives, bridge.replacement)
    lowered: list[int] = []
    summed = getattr(counter, "contextshift_additive", False) is True and all(e.parts is None for e in entries)
    if any(entry.parts is not None for entry in entries) and native._checked(counter(list(items))) <= budget:
        # An object split in two entries is charged its framing twice, so their costs may add up to more than
        # the counter's count of the object: when everything fits by that count, nothing leaves (S4).
        budget = max(budget, native.total([Message.from_dict(m) for m in messages]))
    for attempt in range(MAX_REFITS + 1):
        try:
            result = shift(native, budget)
        except TokenBudgetExceeded as error:
            if not lowered:
                raise
            # Lowered under what must stay: what must stay, alone (shifted to exactly its own cost).
            budget = error.protected_tokens
            lowered.append(budget)
            result = shift(native, budget)
            attempt = MAX_REFITS
        out = assemble(items, entries, result, bridge)
        # A summed per-message counter's count of the list is the shift's own sum: no second count.
        recount = not summed or bool(result.truncated)
        real = (native._checked(counter(list(out))) if out else 0) if recount else result.tokens
        if real <= options.max_tokens:
            notes = list(result.diagnostics)
            if lowered:
                notes.append(
                    f"the counter's count of the whole list was over its per-message sum: fitted again to "
                    f"{', '.join(map(str, lowered))} tokens"
                )
            return out, replace(result, tokens=real, budget=options.max_tokens, diagnostics=notes)
        if attempt >= MAX_REFITS or budget <= 1:
            break
        # Down by the overshoot, twice as far each time: a few fits reach a budget that holds.
        budget = max(1, budget - max(1, real - options.max_tokens) * 2**attempt)
        lowered.append(budget)
    raise TokenBudgetExceeded(
        real,
        options.max_tokens,
        f"The history still needs {real} tokens by the given counter after {len(lowered) + 1} fit(s) "
        f"against a budget of {options.max_tokens}: what must stay costs more than the budget as a list.",
    )
