"""A compaction pass's summarizer call (C8, C9, T5) as the engine (:mod:`.calls`) sees it, and a pass's result.

The plan chooses the oldest whole exchanges that fit the summarizer and builds the summarizer's prompt of them;
after a context-length rejection it counts at the rate the summarizer stated (:mod:`.calls.refit`) and chooses
again, once. Its recorder's side keeps the pass's failure for the run's log entry (:mod:`.compaction`) and
teaches the summarizer model's calibration from the usage of a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from ..core.compaction import Selection, SummarizerPrompt, build_prompt, input_budget, max_output_tokens, select_fold
from ..core.compaction.rendering import SummarizerInputTooLarge
from ..core.messages import Message
from ..core.tokens import TokenizerProfile
from ..providers import ChatRequest, ChatResult, ProviderClient, ProviderError, chat_request
from ..storage import Database
from .calibration import Counting, learn
from .calls import Seen, refit_after
from .summarizer import Summarizer


@dataclass(frozen=True, slots=True)
class PassResult:
    """One pass: what it committed (``summary`` and the raw messages folded) or why it failed, and the
    summarizer usage it cost either way (a rejected reply still used tokens; C12)."""

    summary: str | None = None
    folded: int = 0
    error_code: str | None = None
    reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


class FoldCall:
    """A pass's plan and recorder for the engine: the oldest exchanges that fit the summarizer, and the
    summarizer's prompt of them (after a context-length rejection, chosen again at the rate the summarizer
    counted); its end is the pass's :attr:`outcome` when it failed, and the usage learned when it answered."""

    def __init__(
        self,
        db: Database,
        history: list[Message],
        summarizer: Summarizer,
        profile: TokenizerProfile,
        target: int | None,
        counting: Counting,
        *,
        beyond: int = 0,
    ) -> None:
        self.db = db
        self.history = history
        #: Compactable tokens after the history read (a long chat is not read whole): counted, never folded.
        self.beyond = beyond
        self.summarizer = summarizer
        self.profile = profile
        self.target = target
        self.counting = counting
        self.summarizer_profile = counting.profile
        self.selection: Selection | None = None
        self.prompt: SummarizerPrompt | None = None
        #: Set when the pass ended before a model call: ``outcome`` is its result (None: nothing to fold).
        self.ended = False
        self.outcome: PassResult | None = None

    def _end(self, outcome: PassResult | None) -> bool:
        self.ended, self.outcome = True, outcome
        return False

    async def select(self) -> bool:
        """Choose what to fold and build its prompt; False when the pass ends here (see :attr:`outcome`)."""
        count = self.summarizer_profile.count
        budget = input_budget(self.summarizer.window, count=count)
        if budget <= 0:
            return self._end(PassResult(error_code="COMPACTION_WINDOW_TOO_SMALL"))
        selection = await asyncio.to_thread(
            select_fold,
            self.history,
            target_tokens=self.target,
            input_budget=budget,
            counter=self.profile,
            input_counter=count,
            beyond=self.beyond,
        )
        if selection.empty:
            return self._end(None)
        try:
            prompt = await asyncio.to_thread(
                build_prompt, selection.fold, budget_tokens=budget, count=count, standing=selection.standing
            )
        except SummarizerInputTooLarge:
            return self._end(PassResult(error_code="COMPACTION_INPUT_TOO_LARGE"))  # C9: before any model call
        self.selection, self.prompt = selection, prompt
        return True

    async def request(self, client: ProviderClient) -> ChatRequest:
        assert self.prompt is not None
        summarizer = self.summarizer
        return chat_request(
            summarizer.provider.kind,
            self.prompt.messages(),
            model=summarizer.model.name,
            max_tokens=max_output_tokens(summarizer.window),
        )

    def sending(self, client: ProviderClient) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def completed(self, reply: ChatResult | None) -> None:
        """T5: the summarizer's usage teaches its model's calibration (the reply itself is judged by the run)."""
        assert self.prompt is not None and reply is not None
        await learn(self.db, self.summarizer.model, self.counting.base, self.prompt.messages(), reply.usage)

    async def failed(self, error: ProviderError) -> None:
        if not self.ended:  # a pass that ended while it was chosen again keeps that outcome
            self._end(PassResult(error_code=error.code))

    async def cancelled(self) -> None:
        return None

    async def refit(self, error: ProviderError) -> bool:
        """The pass rejected as too long: count at the summarizer's rate (:mod:`.calls.refit`), choose again."""
        assert self.prompt is not None
        sent = self.prompt.messages()
        counting = self.counting
        seen = Seen(counting.base.count_messages(sent), counting.profile.count_messages(sent), self.summarizer.window)
        refit = await refit_after(
            self.db,
            error,
            model_id=self.summarizer.model.id,
            base=counting.base,
            calibration=counting.calibration,
            seen=seen,
        )
        if refit.profile is None:
            return False
        self.summarizer_profile = refit.profile
        return await self.select()


__all__ = ["FoldCall", "PassResult"]
