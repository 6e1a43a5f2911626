"""Context strategies (G1–G5): the built-ins and the registry plugins extend.

A strategy is a callable taking a :class:`StrategyRequest` and returning a
:class:`~contextshift.core.shifting.ShiftResult`. Plugins register their own under a name; the host
(``contextshift.core.host``) runs any strategy under the rules that keep it from bypassing the budget.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Container, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace

from .embedding import similarities
from .errors import UnknownStrategy
from .messages import Message
from .request import Strategy, StrategyRequest
from .shifting import (
    Counter,
    Prompt,
    Removal,
    ShiftResult,
    Truncation,
    build_result,
    excluded_note,
    shift_prompt,
)
from .summary import extractive_summary
from .tokens import TokenizerProfile, message_costs, prompt_tokens
from .vocabulary import CONTEXT_SHIFT, LOW_RELEVANCE, MANUAL, SUMMARIZED, SUMMARY_HEADER

STRATEGY_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
RETRIEVED_SOURCES = frozenset({"lorebook", "memory"})
SUMMARIZABLE_SOURCES = frozenset({None, "history", "summary"})
SUMMARY_ID = "context-summary"
#: The summary's share of the budget, and its bounds in tokens.
SUMMARY_SHARE = 0.35
SUMMARY_MIN_TOKENS = 8
SUMMARY_MAX_TOKENS = 1024


#: The host's own :class:`Prompt` of the request a built-in strategy is running on (see :func:`run_builtin`).
_HOST_PROMPT: ContextVar[tuple[StrategyRequest, Prompt] | None] = ContextVar("contextshift_host_prompt", default=None)


def run_builtin(strategy: Strategy, request: StrategyRequest, prompt: Prompt) -> ShiftResult:
    """Run a built-in ``strategy`` on ``request``, reusing ``prompt``, the host's own prompt of the request's
    messages, instead of building the same one again.

    The host builds ``prompt`` from the caller's messages and gives the strategy ``list(prompt.messages)``
    with the same counter and overhead, so the prompt the strategy would build is this one (its groups,
    protection and counts): on a 10k-message chat building it twice was half the host path's cost.

    Args:
        strategy: one of :data:`BUILTIN_STRATEGIES`.
        request: what the strategy is given.
        prompt: the host's prompt of ``request.messages``.

    Returns:
        The strategy's result.
    """
    token = _HOST_PROMPT.set((request, prompt))
    try:
        return strategy(request)
    finally:
        _HOST_PROMPT.reset(token)


def _prompt(request: StrategyRequest) -> Prompt:
    held = _HOST_PROMPT.get()
    if held is not None and held[0] is request:
        return held[1]
    return Prompt(request.messages, request.count_tokens, request.per_message_overhead)


# -- truncate (G2) ----------------------------------------------------------------------------------------


def truncate(request: StrategyRequest) -> ShiftResult:
    """Drop the oldest unprotected tool groups until the prompt fits."""
    prompt = _prompt(request)
    outcome = shift_prompt(prompt, request.budget)
    return build_result(prompt, outcome, request.budget, diagnostics=excluded_note(len(outcome.removed)))


# -- summarize (G3) ---------------------------------------------------------------------------------------


def _text_counter(counter: Counter) -> Callable[[str], int]:
    if isinstance(counter, TokenizerProfile):
        return counter.count
    return counter


def _current_input_position(messages: Sequence[Message]) -> int:
    """Where the summary goes: just before the current input (or the last user message, or the end)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].source == "input":
            return index
    if messages and messages[-1].role == "user":
        return len(messages) - 1
    return len(messages)


def _unique_id(base: str, taken: Container[str]) -> str:
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def summarize(request: StrategyRequest) -> ShiftResult:
    """Replace the dropped history with one extractive summary placed before the current input.

    The summary's room displaces the newest turns a plain shift would keep; when the history with the
    summary would hold fewer of the current input's search words than with those turns, the turns stay and
    no summary is made, so ``summarize`` is never below ``truncate`` on what the input asks about.
    """
    prompt = _prompt(request)
    budget = request.budget
    costs = prompt.costs
    if prompt.fixed + sum(costs) <= budget:
        return build_result(prompt, shift_prompt(prompt, budget), budget, strategy="summarize")
    probe = Message(role="system", content="", source="summary")
    overhead = message_costs([probe], request.count_tokens, request.per_message_overhead)[0][0]
    protected = prompt.fixed + sum(costs[p] for p in prompt.protected_members)  # every protected group's members
    target = min(SUMMARY_MAX_TOKENS, max(SUMMARY_MIN_TOKENS, int(budget * SUMMARY_SHARE)))
    target = min(target, budget - protected - overhead)
    if target >= SUMMARY_MIN_TOKENS:
        from .recall import current_input  # loads bm25s: on first use, not on import (N4)

        outcome = shift_prompt(prompt, max(1, budget - target - overhead))
        messages = prompt.messages
        sources = sorted(p for p in outcome.removed if messages[p].source in SUMMARIZABLE_SOURCES)
        query = current_input(messages)  # once: it reads the whole prompt when no message is the input
        summary_text = extractive_summary(
            list(map(messages.__getitem__, sources)),
            _text_counter(request.count_tokens),
            target,
            query=_summary_query(messages, outcome, query),
        )
        if summary_text is not None:
            result = _with_summary(prompt, request, outcome, sources, summary_text)
            if result is not None:
                plain = shift_prompt(prompt, budget)
                held, displaced, wanted = _input_matches(prompt, summary_text, outcome, plain, query)
                if held >= displaced:
                    return result
                notes = [
                    *excluded_note(len(plain.removed)),
                    f"with a context summary the history would hold {held} of the current input's {wanted} search "
                    f"words, with the newest turns it displaces {displaced}: the turns were kept instead",
                ]
                return build_result(prompt, plain, budget, strategy="summarize", diagnostics=notes)
    outcome = shift_prompt(prompt, budget)
    notes = [*excluded_note(len(outcome.removed)), "no room for a context summary; oldest history was dropped instead"]
    return build_result(prompt, outcome, budget, strategy="summarize", diagnostics=notes)


def _input_matches(prompt: Prompt, summary: str, outcome: Removal, plain: Removal, query: str) -> tuple[int, int, int]:
    """How many of the current input's search words the prompt's history holds with the summary, how many
    it holds with the newest turns the summary displaces instead, and how many there are.

    The displaced turns are those a plain shift (``plain``, what ``truncate`` keeps) keeps but the summary's
    room (``outcome``) leaves out; the rest of the history (unprotected messages) is the same on both sides.
    Protected messages, the current input among them, are left out of both counts: they are in both.
    ``summarize`` keeps the summary only when the first count is at least the second, so its prompt never
    holds fewer of what the input asks about than ``truncate``'s, by construction (issue 23).
    """
    from .recall import query_words  # loads bm25s: on first use, not on import (N4)
    from .relevance import terms

    wanted = set(query_words(query))
    kept = set(outcome.kept)
    displaced = [prompt.messages[p].text for p in plain.kept if p not in kept]
    if not wanted or not displaced:
        return 0, 0, len(wanted)
    messages = prompt.messages
    history = [messages[p].text for p in outcome.kept if not messages[p].protected]
    both = wanted.intersection(*terms(["\n".join(history)]))
    with_summary = both | wanted.intersection(*terms([summary.removeprefix(SUMMARY_HEADER)]))
    with_turns = both | wanted.intersection(*terms(["\n".join(displaced)]))
    return len(with_summary), len(with_turns), len(wanted)


#: An input with fewer search words than this is read together with the newest turns kept.
SHORT_QUERY = 3


def _summary_query(messages: Sequence[Message], outcome: Removal, query: str) -> str:
    """What the summary's sentences are scored against: the current input (``query``), and with a short
    input (such as "and the other one?") the two newest turns that stay in the prompt as well."""
    from .recall import query_words  # loads bm25s: on first use, not on import (N4)

    if len(query_words(query)) >= SHORT_QUERY:
        return query
    gone = set(outcome.removed)
    newest = [m.text for p, m in enumerate(messages) if p not in gone and not m.protected and m.source != "input"]
    return "\n".join([query, *newest[-2:]])


def _with_summary(
    prompt: Prompt, request: StrategyRequest, outcome: Removal, sources: list[int], text: str
) -> ShiftResult | None:
    ids = list(prompt.ids_at(sources))
    summary = Message(
        role="system",
        content=text,
        id=_unique_id(SUMMARY_ID, prompt.position),  # every message id of the prompt
        source="summary",
        meta={"summary_of": list(ids)},
    )
    prompt.count(sources)
    tokens_before = sum(map(prompt.counted.__getitem__, sources))
    tokens_after = message_costs([summary], request.count_tokens, request.per_message_overhead)[0][0]
    if tokens_after >= tokens_before:
        return None  # a summary no smaller than what it replaces is no summary
    kept = [prompt.messages[p] for p in outcome.kept]
    insert_at = _current_input_position(kept)
    kept.insert(insert_at, summary)
    tokens = prompt_tokens(kept, request.count_tokens, request.per_message_overhead)
    if tokens > request.budget:
        return None
    summarized = set(ids)
    result = build_result(prompt, outcome, request.budget, strategy="summarize")
    return replace(
        result,
        kept=kept,
        excluded=[m for m in result.excluded if m.id not in summarized],
        truncated=[Truncation(summary, ids, tokens_before, tokens_after)],
        tokens=tokens,
        reasons={**result.reasons, **dict.fromkeys(summarized, SUMMARIZED)},
        diagnostics=[
            *excluded_note(len(outcome.removed) - len(sources)),
            f"context summary created for {len(sources)} message(s)",
        ],
    )


# -- vector-recall (G4) -----------------------------------------------------------------------------------


def vector_recall(request: StrategyRequest) -> ShiftResult:
    """Drop lorebook and memory blocks of low relevance first, then old history oldest first.

    A block without a relevance from retrieval gets BM25's against the current input; with an embedder, the
    greater of that and its cosine similarity in meaning (below 0 counts as 0).
    """
    from .recall import current_input  # loads bm25s: on first use, not on import (N4)
    from .relevance import bm25_relevance

    prompt = _prompt(request)
    messages = prompt.messages
    relevance: dict[int, float] = {}
    missing = [p for p, m in enumerate(messages) if m.source in RETRIEVED_SOURCES and m.relevance is None]
    diagnostics = []
    if missing:
        query, texts = current_input(messages), [messages[p].text for p in missing]
        scores = bm25_relevance(query, texts)
        if request.embedder is None:
            diagnostics.append(f"relevance computed with BM25 for {len(missing)} block(s)")
        else:  # a block that says what the input asks in other words is relevant too
            meaning = similarities(request.embedder, query, texts)
            scores = [max(words, similar, 0.0) for words, similar in zip(scores, meaning, strict=True)]
            diagnostics.append(
                f"relevance computed with BM25 and {request.embedder.name} embeddings for {len(missing)} block(s)"
            )
        relevance.update(zip(missing, scores, strict=True))
    for position, message in enumerate(messages):
        if message.source in RETRIEVED_SOURCES and message.relevance is not None:
            value = float(message.relevance)
            relevance[position] = min(1.0, max(0.0, value)) if value == value else 0.0

    best: dict[int, float] = {}  # each group with a retrieved block (by its first position): its best score
    for position, score in relevance.items():
        root = prompt.root(position)
        best[root] = max(score, best.get(root, score))
    if not best:  # nothing retrieved: every group is history, and history leaves oldest first
        outcome = shift_prompt(prompt, request.budget)
    else:  # retrieved groups first, the least relevant first; then the rest, oldest first
        groups = prompt.groups
        ranked = [n for n, g in enumerate(groups) if g.first in best]
        ranked.sort(key=lambda n: (best[groups[n].first], groups[n].first))
        order = ranked + [n for n, g in enumerate(groups) if g.first not in best]
        outcome = shift_prompt(
            prompt,
            request.budget,
            order=order,
            reason=lambda g: LOW_RELEVANCE if g.first in best else CONTEXT_SHIFT,
        )
    diagnostics.extend(excluded_note(len(outcome.removed)))
    return build_result(prompt, outcome, request.budget, strategy="vector-recall", diagnostics=diagnostics)


# -- manual (G5) ------------------------------------------------------------------------------------------


def manual_selection(messages: Sequence[Message], explicit: frozenset[str]) -> list[str]:
    """The ids the user excluded: ``meta.manualExcluded`` flags plus explicitly given ids, in prompt order."""
    known = {m.id for m in messages}
    flagged = [m.id for m in messages if m.meta.get("manualExcluded") is True or m.id in explicit]
    return flagged + sorted(explicit - known)


def manual_removals(prompt: Prompt, explicit: frozenset[str] = frozenset()) -> tuple[dict[int, str], list[str]]:
    """Positions the user's selection takes out (with whole tool groups), and notes on what was refused."""
    diagnostics: list[str] = []
    removed: dict[int, str] = {}
    for message_id in manual_selection(prompt.messages, explicit):
        if message_id not in prompt.position:
            diagnostics.append(f"manual exclusion of unknown message {message_id!r} ignored")
            continue
        group = prompt.group_of(message_id)
        if group.protected:
            diagnostics.append(f"manual exclusion of {message_id!r} ignored: its tool group is protected")
            continue
        for position in group.members:
            removed.setdefault(position, MANUAL)
    return removed, diagnostics


def manual(request: StrategyRequest) -> ShiftResult:
    """Exclude the user's selection with its tool partners, then shift normally if still over budget."""
    prompt = _prompt(request)
    removed, diagnostics = manual_removals(prompt, request.manual_excluded_ids)
    outcome = shift_prompt(prompt, request.budget, removed=removed)
    if len(outcome.removed) > len(removed):
        diagnostics.append("manual exclusions were insufficient; safe truncation continued")
    if removed:
        diagnostics.append(f"manual selection excluded {len(removed)} message(s)")
    return build_result(prompt, outcome, request.budget, strategy="manual", diagnostics=diagnostics)


# -- recall (G4a) -----------------------------------------------------------------------------------------


def recall(request: StrategyRequest) -> ShiftResult:
    """Bring back the excluded history the current input needs (``contextshift.core.recall``)."""
    # Imported here, not at the top: recall loads bm25s and numpy, which ``import contextshift`` must not
    # pay for when the strategy is never used (N4).
    from .recall import recall as run

    return run(request)


# -- registry (G1) ----------------------------------------------------------------------------------------

BUILTIN_STRATEGIES: dict[str, Strategy] = {
    "truncate": truncate,
    "summarize": summarize,
    "vector-recall": vector_recall,
    "manual": manual,
    "recall": recall,
}


@dataclass(frozen=True, slots=True)
class _Registration:
    name: str
    strategy: Strategy
    priority: int
    serial: int


class ContextStrategyRegistry:
    """Strategies by name. A higher-priority registration of a name overrides a lower one until cleaned up.

    Thread-safe. Pass one to ``shift_with_strategy(registry=...)``; :data:`default_registry` is the shared one.

    Args:
        builtins: start with the built-in strategies (``truncate``, ``summarize``, ``vector-recall``,
            ``manual``, ``recall``).
    """

    def __init__(self, *, builtins: bool = True) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, list[_Registration]] = {}
        self._serial = 0
        if builtins:
            for name, strategy in BUILTIN_STRATEGIES.items():
                self.register(name, strategy)

    def register(self, name: str, strategy: Strategy, *, priority: int = 0) -> Callable[[], None]:
        """Add ``strategy`` under ``name``; the returned cleanup removes exactly this registration.

        Args:
            name: 1-128 characters of ``a-z``, ``0-9``, ``.``, ``_``, ``-``.
            strategy: a callable ``StrategyRequest -> ShiftResult``.
            priority: a higher priority overrides a lower one under the same name until cleaned up.

        Returns:
            A function that removes this registration (and only it).

        Raises:
            ValueError: a bad name.
            TypeError: ``strategy`` is not callable or ``priority`` not an integer.
        """
        if not isinstance(name, str) or not STRATEGY_NAME.match(name):
            raise ValueError(
                f"strategy name {name!r} must be 1-128 characters of a-z, 0-9, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        if not callable(strategy):
            raise TypeError(f"strategy {name!r} must be callable")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError("priority must be an integer")
        with self._lock:
            self._serial += 1
            entry = _Registration(name, strategy, priority, self._serial)
            stack = self._entries.setdefault(name, [])
            stack.append(entry)
            # Highest priority first; on equal priority the earlier registration stays first.
            stack.sort(key=lambda e: (-e.priority, e.serial))

        def cleanup() -> None:
            with self._lock:
                current = self._entries.get(name, [])
                if entry in current:
                    current.remove(entry)
                if not current:
                    self._entries.pop(name, None)

        return cleanup

    def get(self, name: str) -> Strategy:
        """The strategy registered under ``name`` (the highest priority one).

        Args:
            name: the strategy's name.

        Returns:
            The strategy callable.

        Raises:
            UnknownStrategy: nothing is registered under ``name``.
        """
        with self._lock:
            stack = self._entries.get(name)
            if not stack:
                raise UnknownStrategy(name)
            return stack[0].strategy

    def names(self) -> list[str]:
        """Every registered name.

        Returns:
            The names, sorted.
        """
        with self._lock:
            return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._entries
