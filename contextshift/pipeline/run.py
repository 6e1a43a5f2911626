"""The prompt pipeline (P1, P2, G7): one code path for generation and the live preview.

persona/character → lorebook → memory → template (assembly) → tokenizer → shifting (with the bot's strategy,
under the host) → interceptors → final shifting → provider serialization, with the budget checked once more
on the exact serialized request. Pure: no I/O; the caller loads the data and sends the result.

Before shifting, two kinds of block get a share of the budget of their own, so that old history leaves first:

* the user's standing instructions (G4b): protected, newest first, within ``STANDING_SHARE`` (10%) of the
  budget; the audit says ``standing``;
* activated lorebook entries and retrieved memories (P3, P4; like SillyTavern's World Info budget): the most
  relevant first (then prompt order) are protected within :data:`LORE_SHARE` (25%) of the budget, and the
  rest leave before the shift with the reason ``lore-budget``. Constant entries are protected anyway.

Both shares are capped by what the protected context leaves, so they never make a fitting prompt fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.embedding import Embedder
from ..core.errors import TokenBudgetExceeded
from ..core.host import shift_with_strategy
from ..core.messages import Message
from ..core.shifting import Prompt, ShiftResult, shift_prompt
from ..core.standing import STANDING_KEY, active_standing, protect_standing, protect_within, protected_tokens
from ..core.strategies import ContextStrategyRegistry, manual_removals
from ..core.tokens import TokenizerProfile, message_costs
from ..core.vocabulary import FINAL_BUDGET, LORE_BUDGET
from ..core.wire import to_openai_messages
from .assemble import Assembly, Sources, assemble
from .audit import AuditEntry, build_entries
from .interceptors import Interceptor, InterceptorContext, run_interceptors
from .template import parse_template

Serializer = Callable[[list[Message]], dict[str, Any]]
MAX_SERIALIZATION_PASSES = 3
#: The share of the budget activated lorebook entries and retrieved memories may take (SillyTavern's World
#: Info budget defaults to 25% of the context too): within it they are kept before any history.
LORE_SHARE = 0.25


class PromptBudgetExceeded(TokenBudgetExceeded):
    """``TOKEN_BUDGET_EXCEEDED`` with the pipeline's figures: context limit, reply reserve, prompt tokens."""

    def __init__(self, context_limit: int, response_reserve: int, prompt_tokens: int, budget: int) -> None:
        super().__init__(
            prompt_tokens,
            budget,
            message=(
                f"The context is too long for this model: the protected prompt needs {prompt_tokens} tokens, "
                f"but {context_limit} minus a {response_reserve}-token reply reserve leaves {max(budget, 0)}."
            ),
        )
        self.params = {
            "context_limit": context_limit,
            "response_reserve": response_reserve,
            "prompt_tokens": prompt_tokens,
        }


class ReplyReserveTooLarge(PromptBudgetExceeded):
    """The reply reserve alone takes the whole context window: no prompt can fit, however short.

    Args:
        context_limit: the context window (or the bot's context limit), in tokens.
        response_reserve: the reply reserve, in tokens.
        setting: what the caller sets to lower the reserve, named in the message.
    """

    code = "RESPONSE_RESERVE_TOO_LARGE"

    def __init__(
        self, context_limit: int, response_reserve: int, *, setting: str = "response_reserve (or max_tokens)"
    ) -> None:
        super().__init__(context_limit, response_reserve, 0, context_limit - response_reserve)
        self.message = (
            f"The reply reserve ({response_reserve} tokens) is at least the whole context window "
            f"({context_limit} tokens), so no prompt can fit: set {setting} below {context_limit}."
        )
        self.args = (self.message,)


@dataclass(frozen=True, slots=True)
class PipelineRequest:
    sources: Sources
    profile: TokenizerProfile
    context_limit: int
    response_reserve: int
    max_tokens: int | None = None
    strategy: str = "truncate"
    template: Sequence[str | Mapping[str, Any]] | None = None
    interceptors: Sequence[Interceptor] = ()
    registry: ContextStrategyRegistry | None = None
    serializer: Serializer | None = None
    model: str = ""
    preview: bool = False
    chat_id: str | None = None
    bot_id: str | None = None
    notes: Sequence[str] = ()
    strategy_timeout: float = 15.0
    #: relevance by meaning for ``recall`` and ``vector-recall`` (the ``embeddings`` extra), or None
    embedder: Embedder | None = None
    #: Standing instructions (G4b): ``detect`` reads the history's user messages; ``flagged`` takes only those
    #: whose ``meta.standing`` is true (the service decided when it stored them); ``off`` (the default, as for
    #: ``shift_with_strategy``) keeps none.
    standing: Literal["off", "detect", "flagged"] = "off"


@dataclass(slots=True)
class PipelineResult:
    messages: list[Message]
    payload: dict[str, Any]
    entries: list[AuditEntry]
    tokenizer: dict[str, Any]
    budget: dict[str, int]
    context_strategy: str
    diagnostics: list[str]
    max_tokens: int
    excluded_count: int
    summarized: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokenizer": dict(self.tokenizer),
            "budget": dict(self.budget),
            "context_strategy": self.context_strategy,
            "entries": [e.to_dict() for e in self.entries],
            "provider_messages": _provider_messages(self.payload),
            "diagnostics": list(self.diagnostics),
            "excluded_count": self.excluded_count,
            "max_tokens": self.max_tokens,
        }


def _provider_messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    messages = list(payload.get("messages", []))
    system = payload.get("system")
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return messages


def default_serializer(messages: list[Message]) -> dict[str, Any]:
    """The OpenAI Chat Completions body of ``messages`` (``{"messages": [...]}``), exactly as a provider accepts
    it (:func:`~contextshift.core.wire.to_openai_messages`): no contextshift keys, Anthropic-style blocks
    translated, a tool result that no call claims sent as user text."""
    return {"messages": to_openai_messages(messages)}


def payload_tokens(payload: dict[str, Any], profile: TokenizerProfile) -> int:
    """The profile's whole-prompt count of a serialized request (a top-level ``system`` included)."""
    messages = [Message.from_dict(m) for m in payload.get("messages", [])]
    system = payload.get("system")
    if isinstance(system, list):
        system = "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    if system:
        messages.insert(0, Message(role="system", content=str(system)))
    return profile.count_messages(messages)


def _final_shift(messages: list[Message], added: set[str], profile: TokenizerProfile, budget: int) -> list[str]:
    """Ids the final shift removes: interceptor additions first, then the oldest unprotected groups."""
    prompt = Prompt(messages, profile)
    first = [n for n, g in enumerate(prompt.groups) if any(prompt.messages[p].id in added for p in g.members)]
    rest = [n for n in range(len(prompt.groups)) if n not in set(first)]
    outcome = shift_prompt(prompt, budget, order=[*first, *rest], reason=lambda _g: FINAL_BUDGET)
    return [prompt.messages[p].id for p in outcome.removed]


def _standing_ids(messages: list[Message], mode: str) -> list[str]:
    if mode == "off":
        return []
    history = [m for m in messages if m.source in (None, "history")]
    if mode == "flagged":
        history = [m for m in history if m.meta.get(STANDING_KEY) is True]
    return active_standing(history)


def _shares(
    messages: list[Message], request: PipelineRequest, budget: int
) -> tuple[list[Message], list[str], list[str]]:
    """The prompt with standing instructions and then lore and memory protected within their shares; the
    standing ids protected and the lore or memory ids left out over their share."""
    profile = request.profile
    protection = protect_standing(messages, _standing_ids(messages, request.standing), profile, budget)
    messages = protection.messages
    blocks = [(p, m) for p, m in enumerate(messages) if m.source in ("lorebook", "memory") and not m.protected]
    if not blocks:
        return messages, protection.chosen, []
    ranked = [m.id for _, m in sorted(blocks, key=lambda item: (-(item[1].relevance or 0.0), item[0]))]
    room = budget - protected_tokens(messages, profile)
    lore = protect_within(messages, ranked, profile, max(0, min(int(budget * LORE_SHARE), room)))
    gone = set(lore.left_out)
    return [m for m in lore.messages if m.id not in gone], protection.chosen, lore.left_out


def _shift(
    candidates: list[Message], request: PipelineRequest, budget: int, too_large: Callable[[int], PromptBudgetExceeded]
) -> ShiftResult:
    """The bot's strategy applied to ``candidates`` (under the host), or the pipeline's budget error."""
    try:
        return shift_with_strategy(
            candidates,
            request.profile,
            budget,
            strategy=request.strategy,
            registry=request.registry,
            timeout=request.strategy_timeout,
            embedder=request.embedder,
        )
    except TokenBudgetExceeded as error:
        raise too_large(error.protected_tokens) from None


@dataclass(slots=True)
class _Serialized:
    """The final prompt, the ids the final shift removed, its provider body and that body's exact count."""

    messages: list[Message]
    removed: list[str]
    payload: dict[str, Any]
    tokens: int


def _serialize_within(
    messages: list[Message],
    added: set[str],
    request: PipelineRequest,
    budget: int,
    too_large: Callable[[int], PromptBudgetExceeded],
) -> _Serialized:
    """The final shift and the provider body: while the serialized body counts over ``budget``, shift further by
    the difference (at most :data:`MAX_SERIALIZATION_PASSES` times)."""
    profile = request.profile
    serialize = request.serializer or default_serializer
    final_removed: list[str] = []
    working = messages
    limit = budget
    for _ in range(MAX_SERIALIZATION_PASSES):
        try:
            removed_now = _final_shift(working, added, profile, limit)
        except TokenBudgetExceeded as error:
            raise too_large(error.protected_tokens) from None
        final_removed.extend(removed_now)
        working = [m for m in working if m.id not in set(removed_now)]
        payload = serialize(working)
        exact = payload_tokens(payload, profile)
        if exact <= budget:
            break
        limit -= exact - budget  # the wire format costs more than the messages did: shift that much further
        if limit <= 0:
            raise too_large(exact)
    else:
        raise too_large(exact)
    return _Serialized(working, final_removed, payload, exact)


def _summarized(shifted: ShiftResult) -> list[dict[str, Any]]:
    """What the shift's truncations replaced, for the result."""
    return [
        {
            "id": t.replacement.id,
            "source_ids": list(t.source_ids),
            "tokens_before": t.tokens_before,
            "tokens_after": t.tokens_after,
        }
        for t in shifted.truncated
    ]


def run_pipeline(request: PipelineRequest) -> PipelineResult:
    """Build the prompt for one turn (or its preview). Raises :class:`PromptBudgetExceeded`."""
    reserve = max(request.response_reserve, request.max_tokens or 0)
    budget = request.context_limit - reserve
    if budget <= 0:
        raise ReplyReserveTooLarge(request.context_limit, reserve)
    template = parse_template(list(request.template) if request.template is not None else None)
    assembly: Assembly = assemble(request.sources, template)
    profile = request.profile
    diagnostics = list(request.notes) + assembly.diagnostics
    diagnostics.append(
        f'tokenizer "{profile.name}" is approximate' if profile.approximate else f'tokenizer "{profile.name}" selected'
    )

    def too_large(protected_tokens: int) -> PromptBudgetExceeded:
        return PromptBudgetExceeded(request.context_limit, reserve, protected_tokens, budget)

    # Manual exclusions apply whatever the strategy (the user asked for them), whole tool groups at a time.
    counted = Prompt(assembly.messages, profile)
    manual, manual_notes = manual_removals(counted)
    diagnostics.extend(manual_notes)
    candidates = [m for p, m in enumerate(counted.messages) if p not in manual]
    candidates, standing_ids, over_share = _shares(candidates, request, budget)
    if standing_ids:
        diagnostics.append(f"{len(standing_ids)} standing instruction(s) kept as protected context")
    for message_id in over_share:
        diagnostics.append(f'"{message_id}" left out: lorebook and memory blocks filled their share of the budget')
    shifted = _shift(candidates, request, budget, too_large)
    diagnostics.extend(shifted.diagnostics)
    if shifted.excluded:
        diagnostics.append(f"context shift excluded {len(shifted.excluded)} message(s) before interceptors")

    context = InterceptorContext(
        model=request.model,
        budget=budget,
        tokenizer=profile.name,
        preview=request.preview,
        chat_id=request.chat_id,
        bot_id=request.bot_id,
    )
    intercepted = run_interceptors(shifted.kept, request.interceptors, context)
    diagnostics.extend(intercepted.diagnostics)
    final = _serialize_within(intercepted.messages, intercepted.added, request, budget, too_large)
    if final.removed:
        diagnostics.append(f"final budget enforcement excluded {len(final.removed)} message(s)")
    costs, _ = message_costs(assembly.messages, profile, 4)
    entries = build_entries(
        assembly=assembly,
        costs=dict(zip((m.id for m in assembly.messages), costs, strict=True)),
        manual={counted.messages[p].id for p in manual},
        dropped=dict.fromkeys(over_share, LORE_BUDGET),
        standing=set(standing_ids),
        shifted=shifted,
        intercepted_removed=intercepted.removed,
        added=intercepted.added,
        final_removed=set(final.removed),
        intercepted=intercepted.messages,
        final=final.messages,
        profile=profile,
    )
    return PipelineResult(
        messages=final.messages,
        payload=final.payload,
        entries=entries,
        tokenizer={"profile": profile.name, "approximate": profile.approximate},
        budget={"context_limit": request.context_limit, "response_reserve": reserve, "prompt_tokens": final.tokens},
        context_strategy=shifted.strategy,
        diagnostics=diagnostics,
        max_tokens=reserve,
        excluded_count=len(manual) + len(over_share) + len(shifted.excluded) + len(final.removed),
        summarized=_summarized(shifted),
    )
