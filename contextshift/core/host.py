"""The strategy host (G6): run any registered strategy without letting it bypass the budget.

The host resolves the strategy (an unknown one falls back to ``truncate``), runs it on a private copy of
the prompt under a timeout, and then checks what came back: protected context must all be there and
unedited, every message must be accounted for exactly once, no tool group may be split, and the budget
is recounted by the host itself, which shifts again where the strategy's own count was wrong.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from .embedding import Embedder
from .errors import TokenBudgetExceeded, UnknownStrategy
from .groups import Group
from .messages import Message, MessageLike, MessageView, ToolCall
from .request import Strategy, StrategyRequest
from .shifting import (
    Counter,
    Prompt,
    ShiftResult,
    Truncation,
    check_budget,
    shift_prompt,
)
from .standing import active_standing, protect_standing, restore_standing
from .strategies import BUILTIN_STRATEGIES, ContextStrategyRegistry, run_builtin, truncate
from .timeouts import PluginFailed as StrategyFailed
from .timeouts import call_with_timeout
from .vocabulary import (
    CONTEXT_SHIFT,
    FIT,
    PLUGIN_REJECTED,
    PROTECTED,
    PROTECTED_SYSTEM_SOURCES,
    REASONS,
    RECALLED,
    SUMMARIZED,
)

DEFAULT_TIMEOUT = 15.0
MAX_DIAGNOSTIC_CHARS = 4096

#: The registry used when none is given; plugins may register into it.
default_registry = ContextStrategyRegistry()


def _run(strategy: Strategy, request: StrategyRequest, timeout: float) -> ShiftResult:
    result = call_with_timeout(lambda: strategy(request), timeout, name="contextshift-strategy")
    if not isinstance(result, ShiftResult):
        raise StrategyFailed(f"returned {type(result).__name__}, not a ShiftResult")
    return result


def _well_formed(message: object) -> bool:
    """A real ``Message`` whose fields have the types the rest of the host relies on.

    Each field's exact type is tried first (what ``Message`` itself stores), the ``isinstance`` of an ABC
    (several microseconds) only when that fails: this runs once per message of a result.
    """
    if type(message) is not Message and not isinstance(message, Message):
        return False
    if type(message.id) is not str and not isinstance(message.id, str):
        return False
    meta = message.meta
    if type(meta) is not MappingProxyType and not isinstance(meta, Mapping):
        return False
    content = message.content
    if content is not None and type(content) is not str and not isinstance(content, str):
        if not isinstance(content, tuple):
            return False
        if not all(type(p) is MappingProxyType or isinstance(p, Mapping) for p in content):
            return False
    calls = message.tool_calls
    if type(calls) is not tuple and not isinstance(calls, tuple):
        return False
    return all(type(c) is ToolCall or isinstance(c, ToolCall) for c in calls)


def _messages(items: object, what: str) -> list[Message]:
    if not isinstance(items, list | tuple | MessageView):
        raise StrategyFailed(f"{what} is not a list")
    if not all(_well_formed(m) for m in items):
        raise StrategyFailed(f"{what} holds something that is not a well-formed Message")
    return list(items)


def _validate(prompt: Prompt, result: ShiftResult) -> list[Message]:
    """The kept messages of a strategy's result, if its shape is sound and every protected message is kept.

    Pure: it only reads. Raises :class:`StrategyFailed` (``_ProtectedRemoved`` for missing protected context).
    """
    kept = _messages(result.kept, "kept")
    _messages(result.excluded, "excluded")
    if not isinstance(result.truncated, list | tuple) or not all(
        isinstance(t, Truncation) and _well_formed(t.replacement) for t in result.truncated
    ):
        raise StrategyFailed("truncated is not a list of Truncation with well-formed replacements")
    by_id = prompt.position
    kept_inputs = {m.id for m in kept if m.id in by_id}
    missing_protected = [prompt.ids[p] for p in prompt.protected_members if prompt.ids[p] not in kept_inputs]
    if missing_protected:
        raise _ProtectedRemoved(missing_protected)
    return kept


@dataclass(frozen=True)
class _Reconciled:
    """A validated strategy result reconciled with the original prompt (:func:`_reconcile`)."""

    name: str
    #: the kept list rebuilt from the host's originals and the accepted replacements, in prompt order
    kept: list[Message]
    #: the declared replacements the host accepted, by replacement id
    truncations: dict[str, Truncation]
    #: ids the host rejected (``plugin-rejected``)
    rejected: dict[str, str]
    diagnostics: list[str]
    #: what the strategy itself said: its reasons, its excluded input ids, its diagnostics (bounded)
    strategy_reasons: Mapping[str, object]
    strategy_excluded: list[str]
    strategy_diagnostics: list[str]


def _accepted_truncations(
    prompt: Prompt, name: str, result: ShiftResult, kept_inputs: set[str]
) -> tuple[dict[str, Truncation], dict[str, str], list[str]]:
    """The replacements a strategy declared that the host accepts, checked one by one, with the rejected
    replacement ids and a diagnostic for each rejection."""
    by_id = prompt.position
    accepted: dict[str, Truncation] = {}
    rejected: dict[str, str] = {}
    diagnostics: list[str] = []
    claimed: set[str] = set()
    # A summary names thousands of sources: they are checked as sets, not one by one in Python.
    protected_ids = set(prompt.ids_at(prompt.protected_members))  # every member of a protected group
    for entry in result.truncated:
        replacement = entry.replacement
        sources = list(entry.source_ids) if isinstance(entry.source_ids, list | tuple) else []
        problem = None
        if not replacement.id or replacement.id in by_id or replacement.id in accepted:
            problem = "its replacement needs a new, unique id"
        elif not sources or not _known_ids(sources, by_id):
            problem = "it names messages that are not in the prompt"
        elif not kept_inputs.isdisjoint(sources) or not claimed.isdisjoint(sources):
            problem = "it summarizes messages that are also kept or summarized twice"
        elif not protected_ids.isdisjoint(sources):
            problem = "it replaces protected context"
        if problem:
            diagnostics.append(f'context strategy "{name}": a replacement was rejected: {problem}')
            if replacement.id and replacement.id not in by_id:
                rejected[replacement.id] = PLUGIN_REJECTED
            continue
        claimed.update(sources)
        accepted[replacement.id] = replace(entry, source_ids=sources)
    return accepted, rejected, diagnostics


def _known_ids(sources: Sequence[object], by_id: Mapping[str, int]) -> bool:
    """Whether every source is a string id of the prompt (plain strings are looked up without a Python loop)."""
    if set(map(type, sources)) <= {str}:
        return all(map(by_id.__contains__, sources))
    return all(isinstance(s, str) and s in by_id for s in sources)


def _reconcile(prompt: Prompt, name: str, result: ShiftResult, kept: list[Message]) -> _Reconciled:
    """Reconcile a validated strategy result (:func:`_validate`) with the original prompt: accept its
    declared replacements, rebuild the kept list from the host's own originals (a message is never rewritten
    in place; compression is declared as a Truncation), and reject anything undeclared. Pure."""
    by_id = prompt.position
    kept_inputs = {m.id for m in kept if m.id in by_id}
    truncations, rejected, diagnostics = _accepted_truncations(prompt, name, result, kept_inputs)
    ordered: list[tuple[int, int, int, Message]] = []
    seen: set[str] = set()
    pending: list[Message] = []  # accepted replacements, placed before the next original kept after them
    edited = 0
    for message in kept:
        if message.id in seen:
            continue
        seen.add(message.id)
        if message.id in by_id:
            position = by_id[message.id]
            original = prompt.messages[position]
            if message != original:
                edited += 1
            ordered.extend((position, 0, offset, extra) for offset, extra in enumerate(pending))
            pending = []
            ordered.append((position, 1, 0, original))
        elif message.id in truncations:
            pending.append(_unprotected(message))
        else:
            rejected[message.id or "(no id)"] = PLUGIN_REJECTED
            diagnostics.append(f'context strategy "{name}" added an undeclared message; it was rejected')
    ordered.extend((len(prompt.messages), 0, offset, extra) for offset, extra in enumerate(pending))
    if edited:
        diagnostics.append(f'context strategy "{name}" edited {edited} message(s); the host originals were restored')
    ordered.sort(key=lambda item: item[:3])
    placed = {m.id for *_, m in ordered}
    for replacement_id in [r for r in truncations if r not in placed]:
        del truncations[replacement_id]  # the strategy dropped its own replacement
    strategy_diagnostics = (
        [str(d)[:MAX_DIAGNOSTIC_CHARS] for d in result.diagnostics if isinstance(d, str)]
        if isinstance(result.diagnostics, list | tuple)
        else []
    )
    return _Reconciled(
        name=name,
        kept=[m for *_, m in ordered],
        truncations=truncations,
        rejected=rejected,
        diagnostics=diagnostics,
        strategy_reasons=result.reasons if isinstance(result.reasons, dict) else {},
        strategy_excluded=[m.id for m in result.excluded if m.id in by_id],
        strategy_diagnostics=strategy_diagnostics,
    )


class _ProtectedRemoved(StrategyFailed):
    def __init__(self, ids: list[str]) -> None:
        super().__init__(f"removed protected context ({', '.join(ids[:5])})")
        self.ids = ids


def _unprotected(message: Message) -> Message:
    """A strategy's replacement can never be protected."""
    source = message.source
    if (message.role == "system" and source in PROTECTED_SYSTEM_SOURCES) or source == "input":
        source = "summary"
    return replace(message, pinned=False, source=source)


def _heal_groups(prompt: Prompt, kept_ids: set[str]) -> list[str]:
    """Ids of kept members of groups the strategy split; they leave with the rest of their group.

    Only groups of more than one message can be split, so only those are looked at."""
    broken: list[str] = []
    ids = prompt.ids
    for members in prompt.multi.values():
        present = [ids[p] for p in members if ids[p] in kept_ids]
        if present and len(present) != len(members):
            broken.extend(present)
    return broken


def _original_groups(prompt: Prompt, candidates: Sequence[Message]) -> list[Group]:
    """The prompt's groups of the ``candidates`` (in the prompt's group order), then each new message alone:
    found from the candidates, never by listing every group of a long prompt."""
    at = {m.id: i for i, m in enumerate(candidates)}
    position = prompt.position
    by_root: dict[int, list[int]] = {}
    for message_id, i in at.items():
        p = position.get(message_id)
        if p is not None:
            by_root.setdefault(prompt.root(p), []).append(i)
    protected = prompt.protected_roots
    groups = [Group(members=tuple(sorted(by_root[r])), protected=r in protected) for r in sorted(by_root)]
    groups.extend(Group(members=(i,), protected=False) for m, i in at.items() if m not in position)
    return groups


def _finish(
    prompt: Prompt, review: _Reconciled, budget: int, counter: Counter, per_message_overhead: int
) -> ShiftResult:
    diagnostics = list(review.strategy_diagnostics) + review.diagnostics
    kept_ids = {m.id for m in review.kept}
    broken = set(_heal_groups(prompt, kept_ids))
    if broken:
        diagnostics.append(
            f'context strategy "{review.name}" split a tool group; {len(broken)} message(s) left with it'
        )
    candidates = [m for m in review.kept if m.id not in broken]
    # The host's own recount, and a second shift where the strategy's count was wrong, on the original
    # prompt's groups and protection (a replacement is a group of its own and never protected).
    final = Prompt(candidates, counter, per_message_overhead, groups=_original_groups(prompt, candidates))
    outcome = shift_prompt(final, budget)
    host_removed = {final.messages[p].id for p in outcome.removed}
    if host_removed:
        diagnostics.append(f"host recount excluded {len(host_removed)} more message(s)")
    kept = [m for m in final.messages if m.id not in host_removed]
    truncated = [t for rid, t in review.truncations.items() if rid not in host_removed]
    summarized = {s for t in truncated for s in t.source_ids}
    reasons: dict[str, str] = {}
    excluded_order: dict[str, None] = {}  # an ordered set: removal order, each id once
    for message_id in [*review.strategy_excluded, *sorted(broken, key=prompt.position.__getitem__)]:
        excluded_order.setdefault(message_id)
    for rid, entry in review.truncations.items():
        if rid in host_removed:
            for source in entry.source_ids:
                excluded_order.setdefault(source)
    for p in outcome.removed:
        if final.messages[p].id in prompt.position:
            excluded_order.setdefault(final.messages[p].id)
    final_kept = {m.id for m in kept}
    protected = set(prompt.protected_members)  # every member of a protected group
    for position, message in enumerate(prompt.messages):
        mid = message.id
        if mid in final_kept:
            if position in protected:
                reasons[mid] = PROTECTED
            else:  # kept history a strategy brought back says so (G4a); anything else kept just fit
                reasons[mid] = RECALLED if review.strategy_reasons.get(mid) == RECALLED else FIT
        elif mid in summarized:
            reasons[mid] = SUMMARIZED
        else:
            claimed = review.strategy_reasons.get(mid)
            trusted_claim = (
                isinstance(claimed, str)
                and claimed in REASONS
                and claimed not in (PROTECTED, FIT, SUMMARIZED, RECALLED)
                and mid not in broken
                and mid not in host_removed
            )
            reasons[mid] = claimed if trusted_claim and isinstance(claimed, str) else CONTEXT_SHIFT
            excluded_order.setdefault(mid)
    reasons.update(review.rejected)
    excluded = [
        prompt.messages[prompt.position[i]] for i in excluded_order if i not in final_kept and i not in summarized
    ]
    return ShiftResult(
        kept=kept,
        excluded=excluded,
        truncated=truncated,
        tokens=outcome.tokens,
        reasons=reasons,
        strategy=review.name,
        diagnostics=diagnostics,
        budget=budget,
    )


#: Built-in strategies whose result the host can take as it is. Each returns ``build_result`` of one
#: ``shift_prompt`` outcome on the host's own prompt (``run_builtin``), so the review's guarantees hold by
#: construction: the kept messages are the prompt's own objects, in prompt order; protected groups are
#: never candidates for removal (``shift_prompt`` raises when they alone do not fit); groups leave whole;
#: every message is kept or excluded exactly once; and the tokens are the prompt's own count with the
#: caller's counter, which the host's recount would repeat. ``summarize`` and ``recall`` add or edit
#: messages, and plugins may do anything: their results are reviewed.
PROVEN = frozenset({"truncate", "manual", "vector-recall"})


def _review(
    prompt: Prompt,
    name: str,
    result: ShiftResult,
    budget: int,
    counter: Counter,
    per_message_overhead: int,
    *,
    trusted: bool,
) -> ShiftResult:
    """A strategy's result once the host has checked it (see :data:`PROVEN` for the built-ins it need not)."""
    if trusted and name in PROVEN:
        return result
    review = _reconcile(prompt, name, result, _validate(prompt, result))
    return _finish(prompt, review, budget, counter, per_message_overhead)


def shift_with_strategy(
    messages: Sequence[MessageLike],
    count_tokens: Counter,
    budget: int,
    *,
    strategy: str = "truncate",
    registry: ContextStrategyRegistry | None = None,
    manual_excluded_ids: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    per_message_overhead: int = 4,
    embedder: Embedder | None = None,
    standing: bool = False,
) -> ShiftResult:
    """Shift ``messages`` with the named strategy under the host's guarantees (G1, G6).

    The host checks what the strategy returns: protected context kept and unedited, every message
    accounted for once, no tool group split, and the budget recounted by the host (which shifts again
    where the strategy's count was wrong). Every strategy failure falls back to ``truncate``, with a
    diagnostic saying why.

    Args:
        messages: the prompt, oldest first (``Message`` objects or their dicts), as for ``shift_context``.
        count_tokens: a callable ``str -> int`` or a tokenizer profile.
        budget: the tokens the prompt may use.
        strategy: a registered name: ``truncate``, ``summarize``, ``vector-recall``, ``manual``, ``recall``
            or a plugin's; an unknown name falls back to ``truncate``.
        registry: where to look the name up (default: :data:`default_registry`).
        manual_excluded_ids: ids the user excluded, for ``manual``.
        timeout: seconds a plugin strategy may run.
        per_message_overhead: framing tokens per message for a plain callable counter.
        embedder: a sentence-embedding model for ``recall`` and ``vector-recall`` (e.g.
            ``contextshift.embeddings.load_embedder("minilm")``, the ``embeddings`` extra); None: BM25 alone.
        standing: keep the user's standing instructions (G4b, :mod:`contextshift.core.standing`): they are
            protected for this shift, newest first within ``STANDING_SHARE`` of the budget, in their places,
            with the reason ``standing``; the result holds the messages as given.

    Returns:
        A frozen :class:`~contextshift.core.shifting.ShiftResult` whose ``strategy`` names what really ran.

    Raises:
        TokenBudgetExceeded: the protected context alone does not fit.
        ValueError: the budget or the timeout is not positive.
    """
    check_budget(budget)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError("timeout must be a positive number of seconds")
    prompt = Prompt(messages, count_tokens, per_message_overhead)
    given = prompt.messages
    protection = None
    if standing:
        protection = protect_standing(given, active_standing(given), count_tokens, budget, per_message_overhead)
        prompt = Prompt(protection.messages, count_tokens, per_message_overhead)
    manual_ids = frozenset(manual_excluded_ids or ())
    registry = default_registry if registry is None else registry
    request = StrategyRequest(
        messages=list(prompt.messages),
        count_tokens=count_tokens,
        budget=budget,
        manual_excluded_ids=manual_ids,
        per_message_overhead=per_message_overhead,
        embedder=embedder,
    )
    try:
        found = registry.get(strategy)
    except UnknownStrategy:
        return restore_standing(
            _fallback(request, f'context strategy "{strategy}" is not registered; safe truncation used instead'),
            protection,
            given,
        )
    outcome = _run_checked(found, strategy, request, prompt, float(timeout))
    return restore_standing(outcome, protection, given)


def _run_checked(
    found: Strategy, strategy: str, request: StrategyRequest, prompt: Prompt, timeout: float
) -> ShiftResult:
    """Run the strategy ``found`` under ``strategy``'s name and check its result; any failure but an
    over-budget protected context falls back to ``truncate`` with a diagnostic saying why."""
    trusted = BUILTIN_STRATEGIES.get(strategy) is found
    try:
        if trusted:
            result = run_builtin(found, request, prompt)
        else:
            private = replace(request, messages=copy.deepcopy(request.messages))
            result = _run(found, private, timeout)
        outcome = _review(
            prompt,
            strategy,
            result,
            request.budget,
            request.count_tokens,
            request.per_message_overhead,
            trusted=trusted,
        )
    except TokenBudgetExceeded:
        raise
    except _ProtectedRemoved as error:
        outcome = _fallback(request, f'context strategy "{strategy}" rejected: {error}; safe truncation used instead')
    except StrategyFailed as error:
        outcome = _fallback(request, f'context strategy "{strategy}" failed ({error}); safe truncation used instead')
    except Exception as error:  # anything else the plugin's result breaks in the review is its failure too
        outcome = _fallback(
            request,
            f'context strategy "{strategy}" returned an unusable result ({type(error).__name__}); '
            "safe truncation used instead",
        )
    else:
        outcome = replace(outcome, diagnostics=[f'context strategy "{strategy}" applied', *outcome.diagnostics])
    return outcome


def _fallback(request: StrategyRequest, note: str) -> ShiftResult:
    result = truncate(request)
    return replace(result, diagnostics=[note, *result.diagnostics])
