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
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

from ..core.compaction import OVER_SYNC_REACH
from ..core.errors import ContextShiftError, TokenBudgetExceeded
from ..core.vocabulary import FAILED
from ..pipeline import PipelineResult
from ..providers import (
    ProviderError,
    TextDelta,
    make_client,
)
from ..providers.base import PROVIDER_TIMEOUT
from ..storage import Database, Repositories
from ..storage.tables import ChatRow
from .calls import Calls, ClientFactory, SharedClient
from .chat_audit import failed_payload, preview_payload
from .chat_call import ChatCall, Done, Failed, GenerationEvent, Token
from .compaction import Compactor
from .counting import ServerCounting, run_counted
from .errors import Refusal, ServiceError, not_found
from .replies import (
    Redo,
    TurnFailed,
    redo_target,
    retry_input,
)
from .rules import NO_RULES, Rules
from .streaming import DEFAULT_HEARTBEAT, EventPump, Heartbeat
from .titles import title_untitled
from .turn import Turn, TurnContext, load_turn, read_context, require_generation_ready
from .turn_records import Running, TurnRecords
from .turns import ChatTurns, TurnPolicy

log = logging.getLogger("contextshift.generation")


def _refusal_of(code: str) -> Refusal:
    return Refusal.UPSTREAM_TIMEOUT if code == PROVIDER_TIMEOUT else Refusal.UPSTREAM_FAILED


async def warm_counts(
    db: Database,
    counting: ServerCounting,
    context: TurnContext,
    content: str,
    max_tokens: int | None,
    rules: Rules = NO_RULES,
) -> None:
    """Fetch the server's counts of the coming prompt in a read-only pass, so that the turn's own
    transaction (which holds the write lock) makes no tokenize call. Reads nothing when the provider does not
    tokenize; otherwise only the history (the chat, bot and model come from ``context``)."""
    model, provider = context.model, context.provider
    if await counting.tokenizer_for(model, provider, context.counting.base) is None:
        return
    async with db.session(write=False) as session:
        repos = Repositories(session)
        turn = await load_turn(
            repos,
            bot=context.bot,
            chat=context.chat,
            draft=content,
            max_tokens=max_tokens,
            preview=True,
            server_counting=counting,
            rules=rules,
            context=context,
        )
        with contextlib.suppress(TokenBudgetExceeded):
            await run_counted(turn.request, turn.server, counting)
        await session.rollback()


async def preview_turn(
    db: Database,
    counting: ServerCounting,
    rules: Rules = NO_RULES,
    *,
    chat_id: str | None,
    bot_id: str | None,
    draft: str,
    max_tokens: int | None,
) -> dict[str, Any]:
    """The prompt a turn would send now, built in a read-only session that is rolled back (A5)."""
    async with db.session(write=False) as session:  # a preview only reads (A5)
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
        turn = await load_turn(
            repos,
            bot=bot,
            chat=chat,
            draft=draft,
            max_tokens=max_tokens,
            preview=True,
            server_counting=counting,
            rules=rules,
        )
        try:
            return preview_payload(turn, await run_counted(turn.request, turn.server, counting))
        finally:
            await session.rollback()  # a preview writes nothing (A5)


async def compact_before_send(
    compactor: Compactor | None, db: Database, rules: Rules, context: TurnContext
) -> tuple[TurnContext, str | None]:
    """C2: a synchronous pass at 75%; a failure is logged and the turn goes on (shifting still fits it).
    The turn's context (read again only when a pass ran or was waited for: it changed the chat's history
    and counts), and a diagnostic for the audit when the turn goes on without the pass (N5: another one
    ran too long)."""
    if compactor is None:
        return context, None
    chat_id = context.chat.id
    try:
        outcome = await compactor.before_send(chat_id, context)
    except Exception as error:
        log.warning("synchronous compaction of chat %s failed (%s)", chat_id, type(error).__name__)
        return await read_context(db, chat_id, rules), None  # a failed pass may have marked the chat
    if outcome is None:
        return context, None
    if outcome.reason != OVER_SYNC_REACH:
        context = await read_context(db, chat_id, rules)
    return context, outcome.diagnostic


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
        shared_client: SharedClient | None = None,
        rules: Rules = NO_RULES,
        **client_options: Any,
    ) -> None:
        self.db = db
        self.rules = rules  # what the settings decide for every turn: provider hosts, margin, embedder
        given = client_options.get("http_client")
        if shared_client is None and given is not None:  # the caller's pool, for the server probes too
            shared_client = SharedClient(given)
            shared_client.open()  # open from the start; a given pool is never closed here
        #: Every provider call (on the app's shared HTTP connection pool, while it is open).
        self.calls = Calls(client_factory, client_options, shared_client)
        self.compactor = compactor
        self.turns = ChatTurns(db, turn_policy)
        #: Seconds between SSE comment heartbeats while a stream has nothing to send.
        self.heartbeat_seconds = heartbeat_seconds
        self._background: set[asyncio.Task[Any]] = set()
        self._running: dict[str, Running] = {}
        #: What the turns leave in the database (the chat audit's recorder).
        self.records = TurnRecords(db, self._running, self._after_turn)
        #: Provider tokenizers (T5): probed once per provider and model, their counts cached by content.
        self.server_counting = ServerCounting(shared=shared_client)

    @property
    def client_factory(self) -> ClientFactory:
        return self.calls.factory

    @property
    def client_options(self) -> Mapping[str, Any]:
        """The options of a provider client made now (with the shared pool while it is open)."""
        return self.calls.current_options()

    @property
    def counting(self) -> ServerCounting:
        """The server tokenizers (on the service's shared HTTP client while it is open)."""
        return self.server_counting

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
        """A5: :func:`preview_turn` on this service's database and server tokenizers."""
        return await preview_turn(
            self.db, self.counting, self.rules, chat_id=chat_id, bot_id=bot_id, draft=draft, max_tokens=max_tokens
        )

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
        self._running[generation_id] = Running(hold, input_id, redo)
        return generation_id, turn, result

    async def end(self, generation_id: str) -> None:
        """Give the chat's turn back (idempotent)."""
        running = self._running.pop(generation_id, None)
        if running is not None:
            if running.checkpoints is not None:
                await running.checkpoints.close()
            await running.hold.release()

    async def _prepare(
        self, chat_id: str, content: str | None, max_tokens: int | None, retry_of: str | None, redo: Redo | None
    ) -> tuple[str, Turn, PipelineResult, str | None]:
        generation_id = uuid.uuid4().hex
        failure: tuple[dict[str, Any], TokenBudgetExceeded] | None = None
        counting = self.counting
        context = await read_context(self.db, chat_id, self.rules)  # the turn's one read of its chat, bot and model
        context, note = await compact_before_send(self.compactor, self.db, self.rules, context)
        await warm_counts(self.db, counting, context, content or "", max_tokens, self.rules)
        chat, bot = context.chat, context.bot
        async with self.db.session() as session:
            repos = Repositories(session)
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
                await self.records.mark_interrupted(repos, chat.id)
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
                rules=self.rules,
                context=context,
            )
            if note is not None:
                turn.notes.append(note)
            require_generation_ready(bot, turn.model, turn.provider, self.rules.provider_hosts)
            try:
                result = await run_counted(turn.request, turn.server, counting)
            except TokenBudgetExceeded as error:
                failure = (failed_payload(turn, error), error)  # read the rows before the rollback expires them
                await session.rollback()  # the input is not stored: the request is rejected
            else:
                payload = {**preview_payload(turn, result), "input_message_id": input_id}
                await repos.audits.prepare(chat.id, generation_id, payload)
        if failure is not None:
            payload, budget_error = failure
            async with self.db.session() as session:
                repos = Repositories(session)
                await repos.audits.prepare(chat_id, generation_id, payload)
                await repos.audits.finish(chat_id, generation_id, FAILED, error_code=budget_error.code)
            raise budget_error
        return generation_id, turn, result, input_id

    async def finish_failed(
        self,
        chat_id: str,
        generation_id: str,
        code: str,
        *,
        cancelled: bool = False,
        audit_updates: dict[str, Any] | None = None,
    ) -> None:
        """End a turn's audit as failed (or cancelled) and keep its input (:meth:`TurnRecords.finish_failed`)."""
        await self.records.finish_failed(chat_id, generation_id, code, cancelled=cancelled, audit_updates=audit_updates)

    def _turn_failed(self, generation_id: str, error: ProviderError) -> TurnFailed:
        return TurnFailed(
            _refusal_of(error.code), error.code, error.message, input_message_id=self.records.kept_input(generation_id)
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
        except ContextShiftError:
            raise
        except Exception as error:
            if await self._chat_gone(chat_id):  # deleted with its owner while the provider worked: nothing kept
                log.warning("chat %s was deleted during its turn (%s); the turn ends", chat_id, type(error).__name__)
                raise not_found("chat", chat_id) from None
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self.end(generation_id)

    async def _complete(self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult) -> Done:
        call = ChatCall(self.records, self.db, chat_id, generation_id, turn, result, stream=False)
        try:
            await self.calls.complete(call.target, call, call, need_content=True)
        except ProviderError as error:
            raise self._turn_failed(generation_id, error) from None
        assert call.done is not None
        return call.done

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

    async def _chat_gone(self, chat_id: str) -> bool:
        """Whether the chat was deleted (with its owner) under its turn; False when that cannot be read."""
        try:
            async with self.db.session(write=False) as session:
                return await Repositories(session).chats.get(chat_id) is None
        except Exception:
            return False

    async def _lost(self, chat_id: str, error: Exception) -> Failed:
        """The last event of a turn that could not end as it should (logged without a traceback: the reason is
        known, and a traceback could carry stored text)."""
        if await self._chat_gone(chat_id):
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
        call = ChatCall(self.records, self.db, chat_id, generation_id, turn, result, stream=True)
        events = self.calls.stream(call.target, call, call, need_content=True)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    if isinstance(event, TextDelta) and event.text:
                        call.streamed.append(event.text)
                        if call.checkpoints is None:  # the first text: no resend after it, the prompt is final
                            call.checkpoints = self.records.checkpoints(chat_id, generation_id, call.result)
                        if call.checkpoints is not None:
                            call.checkpoints.add(event.text)
                            if call.checkpoints.gone:
                                raise not_found("chat", chat_id)  # deleted with its owner
                        yield Token(event.text)
        except ProviderError as error:
            if call.partial is not None:  # N5: what came is kept, marked partial
                yield Failed(error.code, error.message, partial=call.partial)
            else:
                yield Failed(error.code, error.message, input_message_id=self.records.kept_input(generation_id))
            return
        except TokenBudgetExceeded as budget_error:  # the protected context is over the real limit (audit finished)
            yield Failed(budget_error.code, budget_error.message)
            return
        assert call.done is not None
        yield call.done


__all__ = ["ClientFactory", "Done", "Failed", "GenerationEvent", "Generations", "Token", "preview_turn", "warm_counts"]
