"""An endpoint call (V7) as the engine (:mod:`.calls`) sees it: its plan and its recorder.

The plan is the fitted request; after a context-length rejection (T5) the real size the provider stated teaches
the model's calibration (:mod:`.calls.refit`) and the request is fitted again at that ratio and sent once more
(streaming: only while nothing was sent to the caller). The audit's ``attempts`` say so:
``context-length-retry``, then the outcome. The recorder is the endpoint audit (:mod:`.proxy_audit`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

from ..core.errors import TokenBudgetExceeded
from ..core.vocabulary import CANCELLED, COMPLETED, FAILED
from ..providers import ChatRequest, ChatResult, ProviderClient, ProviderError
from ..providers.http import request_sent
from ..storage import Database, Repositories
from . import proxy_fit as fit
from .calls import CallTarget, Seen, refit_after
from .proxy_audit import EndpointAudits
from .proxy_errors import ContextTooLong
from .proxy_request import Prepared

log = logging.getLogger("contextshift.proxy")


class Forwarding:
    """One endpoint call: ``fit_to`` fits ``prepared`` to a shape again (``ProxyService._fit``); a whole reply
    (``finish_later``) goes back before its end is written, a stream's end is written before it ends."""

    def __init__(
        self,
        prepared: Prepared,
        db: Database,
        audits: EndpointAudits,
        fit_to: Callable[[Prepared, fit.Shape], None],
        *,
        finish_later: bool,
    ) -> None:
        self.prepared = prepared
        self.db = db
        self.audits = audits
        self.fit_to = fit_to
        self.finish_later = finish_later
        shape = prepared.shape
        self.target = CallTarget(prepared.model.name, prepared.provider, shape.window, shape.reserve)

    async def request(self, client: ProviderClient) -> ChatRequest:
        return self.prepared.request

    async def refit(self, error: ProviderError) -> bool:
        """T5: learn the real size, fit again at that ratio and say True (send again). Raises
        :class:`ContextTooLong` when even the protected messages are over. A smaller limit stated by the
        provider replaces the model's window."""
        prepared = self.prepared
        await self.audits.recorded(prepared)  # the audit (and the estimate) first
        counting, shape = prepared.counting, prepared.shape
        refit = await refit_after(
            self.db,
            error,
            model_id=prepared.model.id,
            base=counting.base,
            calibration=counting.calibration,
            seen=Seen(prepared.estimated, prepared.fitted.prompt_tokens, shape.window, shape.reserve),
        )
        if refit.profile is None:  # a profile that cannot be scaled: shrink the window instead
            retry_shape = fit.with_profile(shape, shape.profile, refit.shrunk_window)
        else:
            retry_shape = fit.with_profile(shape, refit.profile, refit.window)
        retry_shape.notes.append(
            f"the provider rejected the prompt as too long; fitted again at {refit.ratio:.3f}x our count and sent "
            "once more"
        )
        prepared.attempts.append(refit.attempt)
        try:
            self.fit_to(prepared, retry_shape)
        except TokenBudgetExceeded as budget_error:
            too_long = ContextTooLong(
                prepared.audit_id,
                refit.window,
                retry_shape.reserve,
                retry_shape.overhead,
                budget_error.protected_tokens,
                reported_tokens=error.reported_tokens,
            )
            await self.audits.finish(prepared, FAILED, code=too_long.code)
            raise too_long from None
        await self._replace_audit()
        return True

    async def _replace_audit(self) -> None:
        prepared = self.prepared
        payload = self.audits.payload(prepared)
        try:
            with anyio.CancelScope(shield=True):
                async with self.db.session() as session:
                    await Repositories(session).proxy_audits.replace(
                        prepared.audit_id, payload, excluded_count=prepared.excluded
                    )
        except Exception as failure:
            log.warning("could not update endpoint audit %s (%s)", prepared.audit_id, type(failure).__name__)

    @contextmanager
    def sending(self, client: ProviderClient) -> Iterator[None]:
        """``prepared.sent`` is set when the body is written (by a client that says so; else at once), and at
        the latest when the call ends, however it ends.

        The context variable is not reset: a stream's later events may be read in another context (the
        response's task), where a reset would fail; the task that set it ends with the call's response."""
        sent = self.prepared.sent
        if not getattr(client, "signals_sent", False):
            sent.set()
        request_sent.set(sent)
        try:
            yield
        finally:
            sent.set()

    async def completed(self, reply: ChatResult | None) -> None:
        if self.finish_later:
            await self.audits.recorded(self.prepared)  # the audit the reply names is written before it goes back
            self.audits.finish_later(self.prepared, COMPLETED, reply=reply)
        else:
            await self.audits.finish(self.prepared, COMPLETED, reply=reply)

    async def failed(self, error: ProviderError) -> None:
        await self.audits.finish(self.prepared, FAILED, code=error.code)

    async def cancelled(self) -> None:
        await self.audits.finish(self.prepared, CANCELLED, code="GENERATION_CANCELLED")


__all__ = ["Forwarding"]
