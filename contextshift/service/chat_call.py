"""A chat turn's provider call (A1-A3, T5, N5) as the engine (:mod:`.calls`) sees it, and the events of a turn.

:class:`ChatCall` is both the call's plan (the shifted prompt; near the budget it is counted by the provider
first, and after a context-length rejection shifted again once: :mod:`.recovery`) and its recorder (the chat
audit, the reply or the partial reply, the kept input: :mod:`.turn_records`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from ..core.vocabulary import COMPLETED, FAILED
from ..pipeline import PipelineResult
from ..providers import ChatRequest, ChatResult, ProviderClient, ProviderError
from ..storage import Database
from ..storage.tables import MessageRow
from .calibration import DOUBTED, doubt_diagnostic, doubted, estimate_of, learn
from .calls import CallTarget, require_content
from .chat_audit import preview_payload
from .checkpoints import Checkpoints
from .recovery import ContextRetry
from .turn import Turn
from .turn_records import TurnRecords


@dataclass(frozen=True, slots=True)
class Token:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    message: MessageRow
    usage: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Failed:
    code: str
    message: str
    #: The partial reply stored with what was streamed before the failure, if any text came.
    partial: MessageRow | None = None
    #: The kept (``meta.failed``) input when no text came.
    input_message_id: str | None = None


GenerationEvent = Token | Done | Failed


class ChatCall:
    """One chat turn's provider call as the engine sees it: its plan (the shifted prompt, asked to be counted
    near the budget and shifted again after a context-length rejection: :mod:`.recovery`) and its recorder
    (the chat audit, the reply or partial reply, or the kept input)."""

    def __init__(
        self,
        records: TurnRecords,
        db: Database,
        chat_id: str,
        generation_id: str,
        turn: Turn,
        result: PipelineResult,
        *,
        stream: bool,
    ) -> None:
        assert turn.provider is not None and turn.model is not None
        self.records = records
        self.db = db
        self.chat_id = chat_id
        self.generation_id = generation_id
        self.turn = turn
        self.result = result
        #: The pipeline's result as built with ``turn.profile`` (its prompt count is that profile's).
        self.counted = result
        self.stream = stream
        self.retry = ContextRetry(db, chat_id, generation_id, turn, preview_payload)
        request = turn.request
        self.target = CallTarget(turn.model.name, turn.provider, request.context_limit, request.response_reserve)
        #: The text streamed so far, and its stored copy while it streams (N5).
        self.streamed: list[str] = []
        self.checkpoints: Checkpoints | None = None
        #: How it ended: the stored reply, or the partial reply kept after a failure.
        self.done: Done | None = None
        self.partial: MessageRow | None = None

    async def request(self, client: ProviderClient) -> ChatRequest:
        request = chat_request(self.turn, self.result, self.stream)
        if (exact := await self.retry.exact(client, request, self.result)) is not None:  # T5: count_tokens
            self.result, request = exact, chat_request(self.turn, exact, self.stream)
        return request

    async def refit(self, error: ProviderError) -> bool:
        again = await self.retry.after(error, self.result)  # T5: a context-length rejection is shifted and resent
        if again is None:
            return False
        self.result = again
        return True

    def sending(self, client: ProviderClient) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def completed(self, reply: ChatResult | None) -> None:
        reply = require_content(reply)
        turn, result, records = self.turn, self.result, self.records
        estimated = sent_tokens(turn, result, self.counted)
        updates = completed_updates(turn, result, reply, self.retry, estimated)
        row, usage = await records.store_reply(self.chat_id, self.generation_id, reply, result, turn.profile, updates)
        await learn(self.db, turn.model, turn.base_profile, estimated, reply.usage)
        self.done = Done(row, usage)

    async def failed(self, error: ProviderError) -> None:
        updates = self.retry.updates(FAILED)
        if self.streamed:  # N5: what came is kept, marked partial
            text = "".join(self.streamed)
            self.partial = await self.records.store_partial(
                self.chat_id, self.generation_id, text, self.result, error, updates
            )
        else:
            await self.records.finish_failed(self.chat_id, self.generation_id, error.code, audit_updates=updates)

    async def cancelled(self) -> None:
        if self.checkpoints is not None and self.checkpoints.gone:
            return  # the chat is gone: nothing left to store it in; :meth:`.generation.Generations.stream` ends it
        if self.streamed:
            await self.records.store_partial(
                self.chat_id, self.generation_id, "".join(self.streamed), self.result, None
            )
        else:
            await self.records.finish_failed(self.chat_id, self.generation_id, "GENERATION_CANCELLED", cancelled=True)


def sent_tokens(turn: Turn, result: PipelineResult, counted: PipelineResult) -> int:
    """The model's own (uncalibrated) count of ``result``'s request: the pipeline's count when it built that
    request with the model's own profile (``counted``), so the prompt is not counted twice; else counted now."""
    if result is counted and turn.profile is turn.base_profile:
        return int(result.budget["prompt_tokens"])
    return estimate_of(turn.base_profile, result.payload)


def completed_updates(
    turn: Turn, result: PipelineResult, reply: ChatResult, retry: ContextRetry, estimated: int
) -> dict[str, Any] | None:
    """The audit's last words: the attempts, and (T5) whether the provider's prompt count (against
    ``estimated``, :func:`sent_tokens`) was believed."""
    updates = retry.updates(COMPLETED)
    note = doubted(turn.model, estimated, reply.usage)
    if note is None:
        return updates
    diagnostics = [*preview_payload(turn, result)["diagnostics"], doubt_diagnostic(note)]
    return {**(updates or {}), DOUBTED: note, "diagnostics": diagnostics}


def chat_request(turn: Turn, result: PipelineResult, stream: bool) -> ChatRequest:
    assert turn.model is not None
    system = result.payload.get("system") or None
    return ChatRequest(
        model=turn.model.name,
        messages=list(result.payload["messages"]),
        system=system,
        max_tokens=result.max_tokens,
        stream=stream,
    )


__all__ = ["ChatCall", "Done", "Failed", "GenerationEvent", "Token", "chat_request", "sent_tokens"]
