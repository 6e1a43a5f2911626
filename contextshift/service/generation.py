"""Generation (A1-A3, V3) and the live preview (A5), on the storage, pipeline and provider adapters.

A generation appends the user input, runs the pipeline and prepares the chat's audit in one transaction
(a prompt that does not fit rolls all of that back and records a ``failed`` audit instead), calls the
provider outside any transaction, then stores the reply and finishes the audit exactly once:
``completed``, ``failed`` (with a normalized provider code) or ``cancelled`` (the client went away).
A preview runs the same loading and pipeline in a transaction that is rolled back: nothing stored changes.

No lost work (N5): a turn holds its chat's turn lease from the input to the reply (:mod:`.turns`), so
turns in one chat run one at a time and the transcript alternates; what a turn leaves behind (the reply,
a partial reply, a failed input) follows :mod:`.replies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..core.errors import ContextShiftError, TokenBudgetExceeded
from ..core.tokens import TokenizerProfile
from ..core.vocabulary import SUMMARIZED
from ..pipeline import PipelineResult
from ..providers import (
    ChatRequest,
    ChatResult,
    Finished,
    ProviderClient,
    ProviderError,
    TextDelta,
    make_client,
)
from ..providers.base import PROVIDER_TIMEOUT
from ..storage import Database, Repositories
from ..storage.tables import ChatRow, MessageRow
from .calibration import DOUBTED, doubt_diagnostic, doubted, estimate_of, learn
from .calls import Deadline, open_client
from .checkpoints import Checkpoints
from .compaction import Compactor
from .counting import ServerCounting, run_counted
from .errors import Refusal, ServiceError, not_found
from .history import is_command, is_failed_input
from .recovery import ContextRetry
from .replies import (
    CUT,
    FAILED,
    INTERRUPTED,
    INTERRUPTED_CODE,
    REDO_ERROR,
    Redo,
    TurnFailed,
    partial_message,
    persist,
    redo_target,
    reply_message,
    reply_meta,
    retry_input,
)
from .streaming import DEFAULT_HEARTBEAT, EventPump, Heartbeat
from .titles import title_untitled
from .turn import Turn, chat_and_bot, load_turn, profile_for, require_generation_ready, resolve_model
from .turns import ChatTurns, TurnHold, TurnPolicy
from .usage import usage_of

log = logging.getLogger("contextshift.generation")

ClientFactory = Callable[..., ProviderClient]


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


@dataclass(slots=True)
class _Running:
    """A started turn: its hold on the chat, the user message it answers and the reply it redoes, if any."""

    hold: TurnHold
    input_id: str | None
    redo: Redo | None = None
    #: The streamed reply's stored copy while it streams (N5: a crash keeps it), replaced by the outcome.
    checkpoints: Checkpoints | None = None


def _refusal_of(code: str) -> Refusal:
    return Refusal.UPSTREAM_TIMEOUT if code == PROVIDER_TIMEOUT else Refusal.UPSTREAM_FAILED


def history_counts(turn: Turn, result: PipelineResult) -> dict[str, int] | None:
    """What the entries cannot list, for a chat: history older than the window, and every message a summary
    stands for (stored compaction summaries, counted in full, and what this prompt's ``summarize`` folded)."""
    if turn.history is None:
        return None
    stored = {m.id for m in turn.request.sources.summarized}  # already in the database count
    folded = sum(1 for e in result.entries if e.reason == SUMMARIZED and e.identifier not in stored)
    return {**turn.history, "summarized": turn.history["summarized"] + folded}


def preview_payload(turn: Turn, result: PipelineResult) -> dict[str, Any]:
    return {
        "provider_id": turn.provider.id if turn.provider else None,
        "provider_kind": turn.provider.kind if turn.provider else None,
        "model": turn.model.name if turn.model else None,
        **result.to_dict(),
        "calibration": turn.counting.report(turn.profile) if turn.counting else None,
        "history": history_counts(turn, result),
    }


def _failed_payload(turn: Turn, error: TokenBudgetExceeded) -> dict[str, Any]:
    params = error.params
    request = turn.request
    return {
        "provider_id": turn.provider.id if turn.provider else None,
        "provider_kind": turn.provider.kind if turn.provider else None,
        "model": turn.model.name if turn.model else None,
        "tokenizer": {"profile": turn.profile.name, "approximate": turn.profile.approximate},
        "budget": {
            "context_limit": int(str(params.get("context_limit", request.context_limit))),
            "response_reserve": int(str(params.get("response_reserve", request.response_reserve))),
            "prompt_tokens": int(str(params.get("prompt_tokens", error.protected_tokens))),
        },
        "context_strategy": request.strategy,
        "entries": [],
        "provider_messages": [],
        "diagnostics": [*turn.notes, error.message],
        "excluded_count": 0,
    }


def _require_content(reply: ChatResult | None) -> ChatResult:
    """A reply with neither text nor tool calls is a failure (EMPTY_RESPONSE), never a stored message."""
    if reply is None or (not reply.text and not reply.tool_calls):
        raise ProviderError("EMPTY_RESPONSE", "The provider returned an empty reply.")
    return reply


class Generations:
    """Runs generations and previews against one database."""

    def __init__(
        self,
        db: Database,
        *,
        client_factory: ClientFactory = make_client,
        compactor: Compactor | None = None,
        turn_policy: TurnPolicy | None = None,
        heartbeat_seconds: float = DEFAULT_HEARTBEAT,
        **client_options: Any,
    ) -> None:
        self.db = db
        self.client_factory = client_factory
        self.client_options = client_options
        self.compactor = compactor
        self.turns = ChatTurns(db, turn_policy)
        #: Seconds between SSE comment heartbeats while a stream has nothing to send.
        self.heartbeat_seconds = heartbeat_seconds
        self._background: set[asyncio.Task[Any]] = set()
        self._running: dict[str, _Running] = {}
        #: Provider tokenizers (T5): probed once per provider and model, their counts cached by content.
        self.server_counting = ServerCounting()

    @property
    def counting(self) -> ServerCounting:
        """The server tokenizers, on the service's shared HTTP client when there is one."""
        self.server_counting.client = self.client_options.get("http_client")
        return self.server_counting

    async def _warm_counts(self, chat_id: str, content: str, max_tokens: int | None) -> None:
        """Fetch the server's counts of the coming prompt in a read-only pass, so that the turn's own
        transaction (which holds the write lock) makes no tokenize call."""
        counting = self.counting
        async with self.db.session(write=False) as session:
            repos = Repositories(session)
            chat, bot = await chat_and_bot(repos, chat_id)
            model, provider = await resolve_model(repos, bot, chat)
            if await counting.tokenizer_for(model, provider, profile_for(model)) is None:
                return
            turn = await load_turn(
                repos, bot=bot, chat=chat, draft=content, max_tokens=max_tokens, preview=True, server_counting=counting
            )
            with contextlib.suppress(TokenBudgetExceeded):
                await run_counted(turn.request, turn.server, counting)
            await session.rollback()

    async def _compact_before_send(self, chat_id: str) -> str | None:
        """C2: a synchronous pass at 75%; a failure is logged and the turn goes on (shifting still fits it).
        A diagnostic for the audit when the turn goes on without the pass (N5: another one ran too long)."""
        if self.compactor is None:
            return None
        try:
            outcome = await self.compactor.before_send(chat_id)
        except Exception as error:
            log.warning("synchronous compaction of chat %s failed (%s)", chat_id, type(error).__name__)
            return None
        return outcome.diagnostic if outcome is not None else None

    def _after_turn(self, chat_id: str) -> None:
        """C2: schedule a background pass at 50% without delaying the reply."""
        if self.compactor is None:
            return
        task = asyncio.create_task(self._check_after_turn(chat_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _check_after_turn(self, chat_id: str) -> None:
        assert self.compactor is not None
        try:
            await self.compactor.after_turn(chat_id)
        except Exception as error:
            log.warning("scheduling compaction of chat %s failed (%s)", chat_id, type(error).__name__)

    async def settle(self) -> None:
        """Wait for the after-turn checks still running (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- preview ------------------------------------------------------------------------------------------

    async def preview(
        self, *, chat_id: str | None, bot_id: str | None, draft: str, max_tokens: int | None
    ) -> dict[str, Any]:
        async with self.db.session(write=False) as session:  # a preview only reads (A5)
            repos = Repositories(session)
            chat: ChatRow | None = None
            if chat_id is not None:
                chat = await repos.chats.get(chat_id)
                if chat is None:
                    raise not_found("chat", chat_id)
                bot_id = chat.bot_id
            if bot_id is None:
                raise ServiceError(
                    Refusal.UNPROCESSABLE, "VALIDATION", "Give chat_id or bot_id.", fields=["chat_id", "bot_id"]
                )
            bot = await repos.bots.get(bot_id)
            if bot is None:
                raise not_found("bot", bot_id)
            counting = self.counting
            turn = await load_turn(
                repos, bot=bot, chat=chat, draft=draft, max_tokens=max_tokens, preview=True, server_counting=counting
            )
            try:
                return preview_payload(turn, await run_counted(turn.request, turn.server, counting))
            finally:
                await session.rollback()  # a preview writes nothing (A5)

    # -- generation ---------------------------------------------------------------------------------------

    async def start(
        self,
        chat_id: str,
        content: str | None,
        max_tokens: int | None,
        *,
        retry_of: str | None = None,
        redo: Redo | None = None,
    ) -> tuple[str, Turn, PipelineResult]:
        """Wait for the chat's turn, append the input (or take back the failed input ``retry_of``, or take the
        newest reply to ``redo``), build the prompt and prepare the audit; raise before anything is sent. The
        turn is held until :meth:`stream` (or :meth:`complete`) ends; a caller that does neither must call
        :meth:`end`."""
        hold = await self.turns.acquire(chat_id)
        try:
            generation_id, turn, result, input_id = await self._prepare(chat_id, content, max_tokens, retry_of, redo)
        except BaseException:
            await hold.release()
            raise
        self._running[generation_id] = _Running(hold, input_id, redo)
        return generation_id, turn, result

    async def end(self, generation_id: str) -> None:
        """Give the chat's turn back (idempotent)."""
        running = self._running.pop(generation_id, None)
        if running is not None:
            if running.checkpoints is not None:
                await running.checkpoints.close()
            await running.hold.release()

    def _input_id(self, generation_id: str) -> str | None:
        running = self._running.get(generation_id)
        return running.input_id if running else None

    def _redo(self, generation_id: str) -> Redo | None:
        running = self._running.get(generation_id)
        return running.redo if running else None

    async def _keep_reply(
        self, repos: Repositories, chat_id: str, generation_id: str, message: dict[str, Any]
    ) -> MessageRow:
        """Store a turn's reply: a new message, or a new version of the reply it regenerates, or the rest of
        the reply it continues."""
        redo = self._redo(generation_id)
        row: MessageRow | None
        running = self._running.get(generation_id)
        if running is not None and running.checkpoints is not None and running.checkpoints.row_id is not None:
            await repos.messages.delete(chat_id, running.checkpoints.row_id)  # the outcome takes its place
        if redo is None:
            return await repos.messages.append(chat_id, message)
        if redo.action == "regenerate":
            row = await repos.messages.add_alternative(chat_id, redo.message_id, message)
        else:
            row = await repos.messages.extend_reply(chat_id, redo.message_id, message["content"], message["meta"])
        if row is None:  # deleted while the turn ran: kept as a new message rather than lost (N5)
            return await repos.messages.append(chat_id, message)
        return row

    async def _prepare(
        self, chat_id: str, content: str | None, max_tokens: int | None, retry_of: str | None, redo: Redo | None
    ) -> tuple[str, Turn, PipelineResult, str | None]:
        generation_id = uuid.uuid4().hex
        failure: tuple[dict[str, Any], TokenBudgetExceeded] | None = None
        note = await self._compact_before_send(chat_id)
        await self._warm_counts(chat_id, content or "", max_tokens)
        counting = self.counting
        async with self.db.session() as session:
            repos = Repositories(session)
            chat, bot = await chat_and_bot(repos, chat_id)
            before_seq: int | None = None
            input_id: str | None
            if redo is not None:
                target = await redo_target(repos, chat.id, redo)
                reply_to = (target.meta or {}).get("reply_to")
                input_id = reply_to if isinstance(reply_to, str) else None
                if redo.action == "regenerate":
                    before_seq = target.seq  # the prompt the reply answered, without the reply
            elif retry_of is not None:
                input_id = (await retry_input(repos, chat.id, retry_of)).id
            else:
                await self._mark_interrupted(repos, chat.id)
                input_id = (await repos.messages.append(chat.id, {"role": "user", "content": content or ""})).id
                await title_untitled(repos, chat, content or "")
            turn = await load_turn(
                repos,
                bot=bot,
                chat=chat,
                draft=None,
                max_tokens=max_tokens,
                preview=False,
                server_counting=counting,
                before_seq=before_seq,
            )
            if note is not None:
                turn.notes.append(note)
            require_generation_ready(bot, turn.model, turn.provider)
            try:
                result = await run_counted(turn.request, turn.server, counting)
            except TokenBudgetExceeded as error:
                failure = (_failed_payload(turn, error), error)  # read the rows before the rollback expires them
                await session.rollback()  # the input is not stored: the request is rejected
            else:
                payload = {**preview_payload(turn, result), "input_message_id": input_id}
                await repos.audits.prepare(chat.id, generation_id, payload)
        if failure is not None:
            payload, budget_error = failure
            async with self.db.session() as session:
                repos = Repositories(session)
                await repos.audits.prepare(chat_id, generation_id, payload)
                await repos.audits.finish(chat_id, generation_id, "failed", error_code=budget_error.code)
            raise budget_error
        return generation_id, turn, result, input_id

    def _client(self, turn: Turn, deadline: Deadline) -> ProviderClient:
        """N5: a client with the provider's timeouts and what is left of the turn's deadline."""
        assert turn.provider is not None
        return open_client(self.client_factory, self.client_options, turn.provider, deadline)

    @staticmethod
    def _deadline(turn: Turn) -> Deadline:
        assert turn.provider is not None
        return Deadline.for_provider(turn.provider.timeout_seconds)

    @staticmethod
    def _completed_updates(
        turn: Turn, result: PipelineResult, reply: ChatResult, retry: ContextRetry
    ) -> dict[str, Any] | None:
        """The audit's last words: the attempts, and (T5) whether the provider's prompt count was believed."""
        updates = retry.updates("completed")
        note = doubted(turn.model, estimate_of(turn.base_profile, result.payload), reply.usage)
        if note is None:
            return updates
        diagnostics = [*preview_payload(turn, result)["diagnostics"], doubt_diagnostic(note)]
        return {**(updates or {}), DOUBTED: note, "diagnostics": diagnostics}

    @staticmethod
    def _request(turn: Turn, result: PipelineResult, stream: bool) -> ChatRequest:
        assert turn.model is not None
        system = result.payload.get("system") or None
        return ChatRequest(
            model=turn.model.name,
            messages=list(result.payload["messages"]),
            system=system,
            max_tokens=result.max_tokens,
            stream=stream,
        )

    async def _store_reply(
        self,
        chat_id: str,
        generation_id: str,
        reply: ChatResult,
        result: PipelineResult,
        profile: TokenizerProfile | None = None,
        audit_updates: dict[str, Any] | None = None,
    ) -> tuple[MessageRow, dict[str, Any] | None]:
        """The reply and the audit's completion in one transaction, retried until it is stored (N5)."""
        await self._stop_checkpoints(generation_id)
        usage = usage_of(reply, result, profile)
        meta = reply_meta(generation_id, self._input_id(generation_id), reply.finish_reason, usage, result)
        if reply.cut is not None:  # stopped by contextshift at the reply's cap: what came is kept, with why
            meta[CUT] = reply.cut
        message = reply_message(meta, reply)

        async def write(repos: Repositories) -> MessageRow:
            row = await self._keep_reply(repos, chat_id, generation_id, message)
            updates = {**(audit_updates or {}), "reply_message_id": row.id}
            await repos.audits.finish(chat_id, generation_id, "completed", usage=usage, payload_updates=updates)
            await repos.compaction.add_usage(
                chat_id,
                input_tokens=usage["input_tokens"] if usage else 0,
                cached_tokens=usage["cached_input_tokens"] if usage else 0,
                tools=[c.name for c in reply.tool_calls],
            )
            return row

        row = await persist(self.db, write, what="a reply")
        self._after_turn(chat_id)
        return row, usage

    async def _store_partial(
        self,
        chat_id: str,
        generation_id: str,
        text: str,
        result: PipelineResult,
        error: ProviderError | None,
        audit_updates: dict[str, Any] | None = None,
    ) -> MessageRow:
        """What was streamed before the provider failed (``error``) or the user stopped (None), kept."""
        await self._stop_checkpoints(generation_id)
        reason = "provider_error" if error is not None else "cancelled"
        code = error.code if error is not None else None
        meta = reply_meta(generation_id, self._input_id(generation_id), "interrupted", None, result)
        message = partial_message(meta, text, reason, code)

        async def write(repos: Repositories) -> MessageRow:
            row = await self._keep_reply(repos, chat_id, generation_id, message)
            status = "failed" if error is not None else "cancelled"
            updates = {**(audit_updates or {}), "reply_message_id": row.id}
            await repos.audits.finish(
                chat_id, generation_id, status, error_code=code or "GENERATION_CANCELLED", payload_updates=updates
            )
            return row

        return await persist(self.db, write, what="a partial reply")

    def _checkpoints(self, chat_id: str, generation_id: str, result: PipelineResult) -> Checkpoints | None:
        """N5: the stored copy of a new reply while it streams (a redo changes a stored reply: not copied)."""
        running = self._running.get(generation_id)
        if running is None or running.redo is not None:
            return None
        input_id = running.input_id

        async def write(text: str, row_id: str | None) -> str | None:
            meta = reply_meta(generation_id, input_id, INTERRUPTED, None, result)
            async with self.db.session() as session:
                repos = Repositories(session)
                if row_id is not None:
                    row = await repos.messages.edit_content(chat_id, row_id, text)
                    return row.id if row is not None else None
                if await repos.chats.get(chat_id) is None:
                    return None
                return (await repos.messages.append(chat_id, partial_message(meta, text, INTERRUPTED, None))).id

        running.checkpoints = Checkpoints(write)
        return running.checkpoints

    async def _stop_checkpoints(self, generation_id: str) -> None:
        running = self._running.get(generation_id)
        if running is not None and running.checkpoints is not None:
            await running.checkpoints.close()

    async def _mark_interrupted(self, repos: Repositories, chat_id: str) -> None:
        """N5: an input whose turn died with its process (no reply, its audit left ``prepared`` or closed as
        interrupted) is marked ``meta.failed`` before the next input, so the next prompt does not carry two user
        messages in a row; ``retry_of`` can still answer it while it is the newest message."""
        newest = (await repos.messages.list_page(chat_id, limit=1)).rows
        if not newest or newest[0].role != "user" or is_failed_input(newest[0]) or is_command(newest[0]):
            return
        audit = await repos.audits.get(chat_id)
        if audit is None or (audit.payload or {}).get("input_message_id") != newest[0].id:
            return
        if audit.status == "prepared" or audit.error_code == INTERRUPTED_CODE:  # we hold the turn: it is dead
            await repos.messages.patch(chat_id, newest[0].id, {"meta": {FAILED: {"code": INTERRUPTED_CODE}}})

    async def finish_failed(
        self,
        chat_id: str,
        generation_id: str,
        code: str,
        *,
        cancelled: bool = False,
        audit_updates: dict[str, Any] | None = None,
    ) -> None:
        """End the audit as failed (or cancelled) and keep the input, marked ``meta.failed`` (N5); a redo
        leaves its reply as it was and records the error on it (``meta.error``)."""
        status = "cancelled" if cancelled else "failed"
        error_code = "GENERATION_CANCELLED" if cancelled else code
        input_id = self._input_id(generation_id)
        redo = self._redo(generation_id)

        async def write(repos: Repositories) -> None:
            if redo is not None:
                error = {REDO_ERROR: {"code": error_code, "action": redo.action}}
                await repos.messages.patch(chat_id, redo.message_id, {"meta": error})
            elif input_id is not None:
                await repos.messages.patch(chat_id, input_id, {"meta": {FAILED: {"code": error_code}}})
            await repos.audits.finish(
                chat_id, generation_id, status, error_code=error_code, payload_updates=audit_updates
            )

        await persist(self.db, write, what="a failed turn")

    def _kept_input(self, generation_id: str) -> str | None:
        """The input a failed turn kept with ``meta.failed`` (none for a redo: its input was answered before)."""
        return None if self._redo(generation_id) is not None else self._input_id(generation_id)

    def _turn_failed(self, generation_id: str, error: ProviderError) -> TurnFailed:
        return TurnFailed(
            _refusal_of(error.code), error.code, error.message, input_message_id=self._kept_input(generation_id)
        )

    async def complete(
        self,
        chat_id: str,
        content: str | None,
        max_tokens: int | None,
        *,
        retry_of: str | None = None,
        redo: Redo | None = None,
    ) -> Done:
        generation_id, turn, result = await self.start(chat_id, content, max_tokens, retry_of=retry_of, redo=redo)
        try:
            return await self._complete(chat_id, generation_id, turn, result)
        finally:
            with anyio.CancelScope(shield=True):
                await self.end(generation_id)

    async def _complete(self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult) -> Done:
        retry = ContextRetry(self.db, chat_id, generation_id, turn, preview_payload)
        deadline = self._deadline(turn)
        while True:
            client = self._client(turn, deadline)
            try:
                request = self._request(turn, result, stream=False)
                if (exact := await retry.exact(client, request, result)) is not None:  # T5: count_tokens
                    result, request = exact, self._request(turn, exact, stream=False)
                reply = await client.complete(request)
                _require_content(reply)
                break
            except ProviderError as error:
                again = await retry.after(error, result)  # T5: a context-length rejection is shifted and resent
                if again is not None:
                    result = again
                    continue
                await self.finish_failed(chat_id, generation_id, error.code, audit_updates=retry.updates("failed"))
                raise self._turn_failed(generation_id, error) from None
            except TokenBudgetExceeded:  # count_tokens showed the protected context alone is over (audit finished)
                raise
            except BaseException:
                await self.finish_failed(chat_id, generation_id, "GENERATION_CANCELLED", cancelled=True)
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        row, usage = await self._store_reply(
            chat_id, generation_id, reply, result, turn.profile, self._completed_updates(turn, result, reply, retry)
        )
        await learn(self.db, turn.model, turn.base_profile, result.payload, reply.usage)
        return Done(row, usage)

    def events(
        self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult
    ) -> AsyncIterator[GenerationEvent | Heartbeat]:
        """:meth:`stream` run in a task of its own, started now, with a :class:`Heartbeat` whenever nothing
        came for ``heartbeat_seconds``. Closing the iterator early (the client went away) cancels the turn,
        which keeps what was streamed; an iterator never read still runs the turn to its end and stores it."""
        pump = EventPump(self.stream(chat_id, generation_id, turn, result), self.heartbeat_seconds)
        self._background.add(pump.task)
        pump.task.add_done_callback(self._background.discard)
        return pump.events()

    async def stream(
        self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult
    ) -> AsyncIterator[GenerationEvent]:
        """Stream one prepared generation; cancelling the consumer cancels the provider call. The stream always
        ends with :class:`Done` or :class:`Failed`: a turn whose chat was deleted under it (with its owner) ends
        with ``CHAT_NOT_FOUND``, one whose outcome could not be stored with ``INTERNAL_ERROR`` (N5)."""
        try:
            async for event in self._stream(chat_id, generation_id, turn, result):
                yield event
        except Exception as error:
            yield await self._lost(chat_id, error)
        finally:
            with anyio.CancelScope(shield=True):
                await self.end(generation_id)

    async def _lost(self, chat_id: str, error: Exception) -> Failed:
        """The last event of a turn that could not end as it should (logged without a traceback: the reason is
        known, and a traceback could carry stored text)."""
        try:
            async with self.db.session(write=False) as session:
                gone = await Repositories(session).chats.get(chat_id) is None
        except Exception:
            gone = False
        if gone:
            log.warning("chat %s was deleted during its turn (%s); the turn ends", chat_id, type(error).__name__)
            code = not_found("chat", chat_id).code  # CHAT_NOT_FOUND, as any other call on the chat would say
            return Failed(code, "The chat was deleted while its turn was running; nothing more of it is kept.")
        if isinstance(error, ContextShiftError):  # a refusal with its own code and words
            log.info("the turn of chat %s ended with %s", chat_id, error.code)
            return Failed(error.code, error.message)
        log.error("the turn of chat %s could not be stored (%s)", chat_id, type(error).__name__)
        return Failed("INTERNAL_ERROR", "The reply could not be stored.")

    async def _stream(
        self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult
    ) -> AsyncIterator[GenerationEvent]:
        retry = ContextRetry(self.db, chat_id, generation_id, turn, preview_payload)
        streamed: list[str] = []
        checkpoints: Checkpoints | None = None
        deadline = self._deadline(turn)
        while True:
            client = self._client(turn, deadline)
            finished: ChatResult | None = None
            try:
                request = self._request(turn, result, stream=True)
                if (exact := await retry.exact(client, request, result)) is not None:  # T5: count_tokens
                    result, request = exact, self._request(turn, exact, stream=True)
                async with client.stream(request) as events:
                    async for event in events:
                        if isinstance(event, TextDelta):
                            if event.text:
                                streamed.append(event.text)
                                if checkpoints is None:  # the first text: no resend after it, the prompt is final
                                    checkpoints = self._checkpoints(chat_id, generation_id, result)
                                if checkpoints is not None:
                                    checkpoints.add(event.text)
                                    if checkpoints.gone:
                                        raise not_found("chat", chat_id)  # deleted with its owner
                                yield Token(event.text)
                        elif isinstance(event, Finished):
                            finished = event.result
                _require_content(finished)
                break
            except ProviderError as error:
                try:  # T5: before the first token, a context-length rejection is shifted and resent
                    again = None if streamed else await retry.after(error, result)
                except TokenBudgetExceeded as budget_error:
                    yield Failed(budget_error.code, budget_error.message)
                    return
                if again is not None:
                    result = again
                    continue
                updates = retry.updates("failed")
                if streamed:  # N5: what came is kept, marked partial
                    text = "".join(streamed)
                    partial = await self._store_partial(chat_id, generation_id, text, result, error, updates)
                    yield Failed(error.code, error.message, partial=partial)
                else:
                    await self.finish_failed(chat_id, generation_id, error.code, audit_updates=updates)
                    yield Failed(error.code, error.message, input_message_id=self._kept_input(generation_id))
                return
            except TokenBudgetExceeded as budget_error:  # from count_tokens (the audit is finished)
                yield Failed(budget_error.code, budget_error.message)
                return
            except BaseException:
                if checkpoints is not None and checkpoints.gone:
                    raise  # the chat is gone: nothing left to store it in; :meth:`stream` ends the turn
                if streamed:
                    await self._store_partial(chat_id, generation_id, "".join(streamed), result, None)
                else:
                    await self.finish_failed(chat_id, generation_id, "GENERATION_CANCELLED", cancelled=True)
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        reply = _require_content(finished)
        row, usage = await self._store_reply(
            chat_id, generation_id, reply, result, turn.profile, self._completed_updates(turn, result, reply, retry)
        )
        await learn(self.db, turn.model, turn.base_profile, result.payload, reply.usage)
        yield Done(row, usage)
