"""Recovery from a context-length rejection inside the turn (T5): learn the real size, shift, send once more.

When the provider rejects a prompt as too long, the rejection usually states the real count ("your
messages resulted in 3077 tokens"). That ratio to our own count of the exact request is stored as a
calibration observation, and the turn is shifted again at that ratio (never below the stored factor) and
sent once more, within the same turn. Without a stated count the prompt is assumed :data:`RETRY_GROWTH`
larger than the count that was sent (the step is :mod:`.calls.refit`'s, shared with the endpoint and
compaction). Only if the protected context alone does not fit the corrected
budget does the turn fail, with ``TOKEN_BUDGET_EXCEEDED`` and both counts. The audit keeps the attempts:
``context-length-retry``, then the final status.

A provider with ``count_tokens`` (Anthropic) is asked for the exact count before sending when an
approximate prompt is near the budget; an exact count over the budget shifts the same way (``exact-count``)
without a wasted call.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from ..core.calibration import CalibratedProfile
from ..core.errors import TokenBudgetExceeded
from ..core.tokens import TokenizerProfile
from ..core.vocabulary import FAILED
from ..pipeline import PipelineResult, PromptBudgetExceeded, payload_tokens, run_pipeline
from ..providers import PROVIDER_CONTEXT_LENGTH, ChatRequest, ProviderClient, ProviderError
from ..storage import Database, Repositories
from .calls import CONTEXT_LENGTH_RETRY, RETRY_GROWTH, Seen, learn_refit
from .turn import Turn

#: The attempt that asked count_tokens and shifted before anything was sent.
EXACT_COUNT = "exact-count"
#: Within this share of the budget (or the margin, if larger) an estimate is "near" it.
NEAR_SHARE = 0.05
#: Exact counts by request content, so the same prompt is never counted twice.
EXACT_CACHE_SIZE = 2048
_exact_cache: OrderedDict[str, int] = OrderedDict()


def near_budget(result: PipelineResult, profile: TokenizerProfile) -> bool:
    """Whether an approximate prompt is close enough to the budget that its estimate could be wrong."""
    if not profile.approximate:
        return False
    budget = result.budget["context_limit"] - result.budget["response_reserve"]
    margin = profile.margin if isinstance(profile, CalibratedProfile) else 0.0
    return result.budget["prompt_tokens"] >= budget * (1.0 - max(margin, NEAR_SHARE))


async def exact_count(
    count: Callable[[ChatRequest], Awaitable[int]], request: ChatRequest, scope: str = ""
) -> int | None:
    """The provider's exact count of ``request``, cached by content (per ``scope``: the provider); None when
    it cannot say."""
    content = [scope, request.model, request.system, request.messages]
    key = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
    if key in _exact_cache:
        _exact_cache.move_to_end(key)
        return _exact_cache[key]
    try:
        tokens = await count(request)
    except ProviderError:
        return None
    _exact_cache[key] = tokens
    if len(_exact_cache) > EXACT_CACHE_SIZE:
        _exact_cache.popitem(last=False)
    return tokens


class ProtectedOverRealLimit(TokenBudgetExceeded):
    """``TOKEN_BUDGET_EXCEEDED`` after a rejection: even the protected context is over the real limit."""

    def __init__(self, error: PromptBudgetExceeded, *, sent_tokens: int, reported_tokens: int | None) -> None:
        real = f"the provider counted {reported_tokens}" if reported_tokens else "the provider rejected it as too long"
        super().__init__(
            error.protected_tokens,
            error.budget,
            message=(
                f"The protected context alone is over the model's real limit: contextshift counted the prompt "
                f"{sent_tokens} tokens and {real}; at that rate the protected part needs "
                f"{error.protected_tokens} tokens, but only {max(error.budget, 0)} are left after the reply reserve."
            ),
        )
        self.params = {**error.params, "sent_tokens": sent_tokens, "reported_tokens": reported_tokens}


class ContextRetry:
    """One turn's recovery: at most one retry, and the attempts for the audit."""

    def __init__(
        self,
        db: Database,
        chat_id: str,
        generation_id: str,
        turn: Turn,
        payload_of: Callable[[Turn, PipelineResult], dict[str, Any]],
    ) -> None:
        self.db = db
        self.chat_id = chat_id
        self.generation_id = generation_id
        self.turn = turn
        self.payload_of = payload_of
        self.attempts: list[dict[str, Any]] = []
        self.retried = False
        #: Our count of the prompt sent on the retry.
        self.sent: int | None = None

    async def after(self, error: ProviderError, result: PipelineResult) -> PipelineResult | None:
        """The result to send instead of ``result`` after ``error``, or None when there is no retry.

        Raises:
            ProtectedOverRealLimit: the protected context does not fit the corrected budget (the audit is
                finished as ``failed`` with ``TOKEN_BUDGET_EXCEEDED``).
        """
        if error.code != PROVIDER_CONTEXT_LENGTH or self.retried:
            return None
        self.retried = True
        return await self._shift(result, error.reported_tokens, error.reported_limit, CONTEXT_LENGTH_RETRY, error.code)

    async def exact(
        self, client: ProviderClient, request: ChatRequest, result: PipelineResult
    ) -> PipelineResult | None:
        """Before sending: near the budget on an approximate profile, ask the provider for the exact count.

        Only for providers with ``count_tokens`` on whose client can count (Anthropic). Returns the result to
        send instead when the exact count is over the budget, else None (send ``result``; also when the count
        is unavailable: the estimate stands, and a rejection is still recovered).
        """
        turn = self.turn
        if turn.provider is None or not turn.provider.count_tokens or not near_budget(result, turn.profile):
            return None
        count = getattr(client, "count_tokens", None)
        if count is None:
            return None
        exact = await exact_count(count, request, turn.provider.id)
        if exact is None or exact <= result.budget["context_limit"] - result.budget["response_reserve"]:
            return None
        return await self._shift(result, exact, None, EXACT_COUNT, None)

    async def _shift(
        self, result: PipelineResult, reported: int | None, reported_limit: int | None, outcome: str, code: str | None
    ) -> PipelineResult:
        turn = self.turn
        request = turn.request
        sent = result.budget["prompt_tokens"]
        seen = Seen(
            payload_tokens(result.payload, turn.base_profile),
            sent,
            request.context_limit,
            max(request.response_reserve, request.max_tokens or 0),
        )
        refit = await learn_refit(
            self.db,
            model_id=turn.model.id if turn.model is not None else None,
            base=turn.base_profile,
            calibration=turn.calibration,
            seen=seen,
            reported=reported,
            reported_limit=reported_limit,
            outcome=outcome,
            code=code,
        )
        request = replace(request, context_limit=refit.window)
        if refit.profile is None:  # a profile that cannot be scaled: shrink the window instead
            request = replace(request, context_limit=refit.shrunk_window)
        else:
            request = replace(request, profile=refit.profile)
        self.attempts.append(refit.attempt)
        try:
            retried = run_pipeline(request)
        except PromptBudgetExceeded as budget_error:
            failure = ProtectedOverRealLimit(budget_error, sent_tokens=sent, reported_tokens=reported)
            async with self.db.session() as session:
                await Repositories(session).audits.finish(
                    self.chat_id,
                    self.generation_id,
                    FAILED,
                    error_code=failure.code,
                    payload_updates=self.updates(FAILED),
                )
            raise failure from None
        turn.request = request
        turn.profile = request.profile
        async with self.db.session() as session:
            repos = Repositories(session)
            current = await repos.audits.get(self.chat_id)
            if current is not None and current.generation_id == self.generation_id:  # not a newer turn's audit
                payload = {**self.payload_of(turn, retried), "attempts": list(self.attempts)}
                await repos.audits.prepare(self.chat_id, self.generation_id, payload)
        self.sent = retried.budget["prompt_tokens"]
        return retried

    def updates(self, outcome: str) -> dict[str, Any] | None:
        """Audit payload updates naming every attempt, the last with the turn's ``outcome``."""
        if not self.attempts:
            return None
        last = {"outcome": outcome, "prompt_tokens": self.sent}
        return {"attempts": [*self.attempts, last]}


__all__ = [
    "CONTEXT_LENGTH_RETRY",
    "EXACT_COUNT",
    "RETRY_GROWTH",
    "ContextRetry",
    "ProtectedOverRealLimit",
    "exact_count",
    "near_budget",
]
