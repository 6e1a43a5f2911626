"""The endpoint audit (V7): written while the provider works, ended once, its usage folded into calibration.

The audit (every message's entry, a few hundred KB at 1,000 messages) is built and written in a task that runs
while the provider works, and is in the database before the reply goes back. The call's end (status, usage,
calibration) is one transaction written after the reply has gone back: a tracked task that whatever reads its
result waits for first (the audit's GET, the model's calibration, the next call to the same model; see
:meth:`EndpointAudits.settled`), and that the service waits for before it stops (:meth:`EndpointAudits.settle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any

import anyio

from ..core.vocabulary import FAILED, PREPARED
from ..pipeline import payload_tokens
from ..providers import ChatResult
from ..storage import Database, Repositories
from . import proxy_fit as fit
from .calibration import DOUBTED, doubt_diagnostic, doubted
from .proxy_errors import ContextTooLong
from .proxy_request import Prepared, request_overhead

log = logging.getLogger("contextshift.proxy")

#: How long an endpoint audit is kept unless ``CONTEXTSHIFT_PROXY_AUDIT_HOURS`` (through ``Settings``) says otherwise.
DEFAULT_AUDIT_TTL = timedelta(hours=24)
#: Seconds the audit waits for its request to be sent before it is written anyway (see ``record``).
RECORD_WAIT = 2.0


def _clean_usage(reply: ChatResult | None) -> dict[str, int] | None:
    if reply is None or reply.usage is None:
        return None
    return {
        "input_tokens": reply.usage.input_tokens,
        "output_tokens": reply.usage.output_tokens,
        "cached_input_tokens": reply.usage.cached_input_tokens,
    }


class EndpointAudits:
    """The endpoint calls' audits in one database, and the calls whose end is still being written."""

    def __init__(self, db: Database, audit_ttl: timedelta | None = None) -> None:
        self.db = db
        self.audit_ttl = audit_ttl if audit_ttl is not None else DEFAULT_AUDIT_TTL
        #: The calls whose end is still being written, by audit id: (the model's id, the writing task).
        self._finishing: dict[str, tuple[str, asyncio.Task[None]]] = {}

    def finish_later(self, prepared: Prepared, status: str, *, reply: ChatResult | None = None) -> None:
        """End the call's audit (and fold its usage into the calibration) in a task of its own, tracked
        until written: the reply need not wait for it."""
        audit_id = prepared.audit_id
        task = asyncio.get_running_loop().create_task(self.finish(prepared, status, reply=reply))
        self._finishing[audit_id] = (prepared.model.id, task)
        task.add_done_callback(lambda _task: self._finishing.pop(audit_id, None))

    def finishing(self, *, audit_id: str | None = None, model_id: str | None = None) -> bool:
        """Whether a call's end is still being written (that call's, the model's calls', or any)."""
        return bool(self._pending(audit_id=audit_id, model_id=model_id))

    def _pending(self, *, audit_id: str | None = None, model_id: str | None = None) -> list[asyncio.Task[None]]:
        if audit_id is not None:
            found = self._finishing.get(audit_id)
            return [found[1]] if found is not None else []
        return [task for model, task in self._finishing.values() if model_id is None or model == model_id]

    async def settled(self, *, audit_id: str | None = None, model_id: str | None = None) -> None:
        """Wait until the ends still being written are in the database: the call ``audit_id``'s, the calls
        to ``model_id``, or (neither given) every call's. Never raises (:meth:`_finish` logs its failures)."""
        tasks = self._pending(audit_id=audit_id, model_id=model_id)
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def settle(self) -> None:
        """Wait for every call's end still being written (the service does before it stops)."""
        while self._finishing:
            await self.settled()

    async def copy_chat_audit(self, chat_id: str, generation_id: str, user_id: str) -> None:
        """Sessions: the chat's audit of ``generation_id``, kept as the caller's proxy audit under the same id."""
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                repos = Repositories(session)
                row = await repos.audits.get(chat_id)
                if row is None or row.generation_id != generation_id:
                    return
                payload = {**row.payload, "chat_id": chat_id}
                excluded = int(payload.get("excluded_count") or 0)
                await repos.proxy_audits.prepare(
                    generation_id,
                    user_id=user_id,
                    model=str(payload.get("model") or ""),
                    payload=payload,
                    excluded_count=excluded,
                    ttl=self.audit_ttl,
                )
                if row.status != PREPARED:
                    await repos.proxy_audits.finish(
                        generation_id, row.status, error_code=row.error_code, usage=row.usage
                    )

    def payload(self, prepared: Prepared) -> dict[str, Any]:
        """The audit payload of the current fit (building the lean path's entries now), with the estimate."""
        fitted, shape, counting = prepared.fitted, prepared.shape, prepared.counting
        if fitted.audit is None:
            fitted.audit = fit.lean_audit(prepared.source, fitted, shape)
        # T5: the uncalibrated count of what is sent, which the provider's usage calibrates.
        if fitted.kept is not None and shape.profile is counting.base:  # an exact profile: the fit's own count
            estimated = fitted.prompt_tokens - shape.overhead
        elif fitted.kept is not None:
            estimated = counting.base.count_messages(fitted.kept)
        else:
            estimated = payload_tokens({"messages": fitted.messages, "system": fitted.system}, counting.base)
        prepared.estimated = estimated + request_overhead(prepared.call, counting.base)
        base = {
            "provider_id": prepared.provider.id,
            "provider_kind": prepared.provider.kind,
            "model": prepared.model.name,
        }
        payload = {**base, **fitted.audit, "calibration": counting.report(shape.profile)}
        if prepared.attempts:
            payload["attempts"] = list(prepared.attempts)
        return payload

    async def record(self, prepared: Prepared) -> None:
        """Write the prepared audit (runs while the provider works; see :meth:`_recorded`). It starts once the
        request's body is written (:meth:`_send`): its few ms of work would otherwise hold up the sending
        (a call that never reaches the provider is recorded after :data:`RECORD_WAIT` seconds all the same)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RECORD_WAIT):
                await prepared.sent.wait()
        payload = self.payload(prepared)
        async with self.db.session() as session:
            repos = Repositories(session)
            await repos.proxy_audits.prepare(
                prepared.audit_id,
                user_id=prepared.call.user_id,
                model=prepared.model.name,
                payload=payload,
                excluded_count=prepared.excluded,
                ttl=self.audit_ttl,
                clean=prepared.call.clean,
            )

    async def recorded(self, prepared: Prepared) -> bool:
        """Wait for the audit to be written; False (logged) when it could not be: the call goes on without."""
        task = prepared.recording
        if task is None:
            return True
        try:
            with anyio.CancelScope(shield=True):
                await asyncio.shield(task)
        except Exception as error:
            log.warning("could not record endpoint audit %s (%s)", prepared.audit_id, type(error).__name__)
            return False
        return True

    async def record_refusal(
        self, prepared: Prepared, shape: fit.Shape, failure: ContextTooLong, protected: int
    ) -> None:
        payload = {
            "provider_id": prepared.provider.id,
            "provider_kind": prepared.provider.kind,
            "model": prepared.model.name,
            "tokenizer": {"profile": shape.profile.name, "approximate": shape.profile.approximate},
            "budget": {
                "context_limit": shape.window,
                "response_reserve": shape.reserve,
                "prompt_tokens": protected + shape.overhead,
            },
            "context_strategy": shape.strategy,
            "entries": [],
            "provider_messages": [],
            "diagnostics": [*shape.notes, failure.message],
            "excluded_count": 0,
        }
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                repos = Repositories(session)
                await repos.proxy_audits.prepare(
                    prepared.audit_id,
                    user_id=prepared.call.user_id,
                    model=prepared.model.name,
                    payload=payload,
                    excluded_count=0,
                    ttl=self.audit_ttl,
                )
                await repos.proxy_audits.finish(prepared.audit_id, FAILED, error_code=failure.code)

    async def finish(
        self, prepared: Prepared, status: str, *, code: str | None = None, reply: ChatResult | None = None
    ) -> None:
        """End the audit once, and (T5) fold the provider's prompt count into the model's calibration, in
        one transaction. Never fails the call: the caller's answer is already there."""
        recorded = await self.recorded(prepared)
        updates: dict[str, Any] | None = None
        if prepared.attempts:
            sent = prepared.fitted.prompt_tokens
            updates = {"attempts": [*prepared.attempts, {"outcome": status, "prompt_tokens": sent}]}
        usage = reply.usage if reply is not None else None
        note = doubted(prepared.model, prepared.estimated, usage)  # T5: a suspected truncation is not learned
        if note is not None:
            said = list((prepared.fitted.audit or {}).get("diagnostics") or [])
            updates = {**(updates or {}), DOUBTED: note, "diagnostics": [*said, doubt_diagnostic(note)]}
        try:
            with anyio.CancelScope(shield=True):
                async with self.db.session() as session:
                    repos = Repositories(session)
                    if recorded:
                        await repos.proxy_audits.finish(
                            prepared.audit_id,
                            status,
                            error_code=code,
                            usage=_clean_usage(reply),
                            payload_updates=updates,
                        )
                    calibration = None
                    if usage is not None and usage.input_tokens > 0 and prepared.estimated > 0 and note is None:
                        calibration = await repos.calibrations.observe(
                            prepared.model.id,
                            prepared.counting.base.name,
                            prepared.estimated,
                            usage.input_tokens,
                            window=prepared.model.context_window,
                        )
            if calibration is not None:  # the next call's counting, as committed (no read needed)
                reads = self.db.reads
                key = ("calibration", prepared.model.id, prepared.counting.base.name)
                reads.put(key, calibration, reads.stamp("token_calibrations"))
        except Exception as error:
            log.warning("could not finish endpoint audit %s (%s)", prepared.audit_id, type(error).__name__)


__all__ = ["DEFAULT_AUDIT_TTL", "RECORD_WAIT", "EndpointAudits"]
