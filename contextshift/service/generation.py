"""Generation (A1-A3, V3) and the live preview (A5), on the storage, pipeline and provider adapters.

A generation appends the user input, runs the pipeline and prepares the chat's audit in one transaction
(a prompt that does not fit rolls all of that back and records a ``failed`` audit instead), calls the
provider outside any transaction, then stores the reply and finishes the audit exactly once:
``completed``, ``failed`` (with a normalized provider code) or ``cancelled`` (the client went away).
A preview runs the same loading and pipeline in a transaction that is rolled back: nothing stored changes.
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

from ..core.errors import TokenBudgetExceeded
from ..core.tokens import TokenizerProfile
from ..pipeline import PipelineResult
from ..providers import ChatRequest, ChatResult, Finished, ProviderClient, ProviderError, TextDelta, make_client
from ..storage import Database, Repositories
from ..storage.tables import ChatRow, MessageRow
from .calibration import learn
from .compaction import Compactor
from .counting import ServerCounting, run_counted
from .errors import ServiceError, not_found
from .recovery import ContextRetry
from .turn import Turn, chat_and_bot, load_turn, profile_for, require_generation_ready, resolve_model
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


GenerationEvent = Token | Done | Failed


def preview_payload(turn: Turn, result: PipelineResult) -> dict[str, Any]:
    return {
        "provider_id": turn.provider.id if turn.provider else None,
        "provider_kind": turn.provider.kind if turn.provider else None,
        "model": turn.model.name if turn.model else None,
        **result.to_dict(),
        "calibration": turn.counting.report(turn.profile) if turn.counting else None,
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
        **client_options: Any,
    ) -> None:
        self.db = db
        self.client_factory = client_factory
        self.client_options = client_options
        self.compactor = compactor
        self._background: set[asyncio.Task[Any]] = set()
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
        async with self.db.session() as session:
            repos = Repositories(session)
            chat, bot = await chat_and_bot(repos, chat_id)
            model, provider = await resolve_model(repos, bot)
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
        async with self.db.session() as session:
            repos = Repositories(session)
            chat: ChatRow | None = None
            if chat_id is not None:
                chat = await repos.chats.get(chat_id)
                if chat is None:
                    raise not_found("chat", chat_id)
                bot_id = chat.bot_id
            if bot_id is None:
                raise ServiceError(422, "VALIDATION", "Give chat_id or bot_id.", fields=["chat_id", "bot_id"])
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

    async def start(self, chat_id: str, content: str, max_tokens: int | None) -> tuple[str, Turn, PipelineResult]:
        """Append the input, build the prompt and prepare the audit; raise before anything is sent."""
        generation_id = uuid.uuid4().hex
        failure: tuple[dict[str, Any], TokenBudgetExceeded] | None = None
        note = await self._compact_before_send(chat_id)
        await self._warm_counts(chat_id, content, max_tokens)
        counting = self.counting
        async with self.db.session() as session:
            repos = Repositories(session)
            chat, bot = await chat_and_bot(repos, chat_id)
            await repos.messages.append(chat.id, {"role": "user", "content": content})
            turn = await load_turn(
                repos, bot=bot, chat=chat, draft=None, max_tokens=max_tokens, preview=False, server_counting=counting
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
                await repos.audits.prepare(chat.id, generation_id, preview_payload(turn, result))
        if failure is not None:
            payload, budget_error = failure
            async with self.db.session() as session:
                repos = Repositories(session)
                await repos.audits.prepare(chat_id, generation_id, payload)
                await repos.audits.finish(chat_id, generation_id, "failed", error_code=budget_error.code)
            raise budget_error
        return generation_id, turn, result

    def _client(self, turn: Turn) -> ProviderClient:
        assert turn.provider is not None
        return self.client_factory(
            turn.provider.kind, turn.provider.base_url, turn.provider.api_key, **self.client_options
        )

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
        usage = usage_of(reply, result, profile)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text,
            "meta": {
                "generation_id": generation_id,
                "finish_reason": reply.finish_reason,
                "usage": usage,
                "token_budget": result.budget,
                "context_strategy": result.context_strategy,
                "excluded_context_count": result.excluded_count,
            },
        }
        if reply.tool_calls:
            message["tool_calls"] = [c.to_dict() for c in reply.tool_calls]
        async with self.db.session() as session:
            repos = Repositories(session)
            row = await repos.messages.append(chat_id, message)
            await repos.audits.finish(chat_id, generation_id, "completed", usage=usage, payload_updates=audit_updates)
            await repos.compaction.add_usage(
                chat_id,
                input_tokens=usage["input_tokens"] if usage else 0,
                cached_tokens=usage["cached_input_tokens"] if usage else 0,
                tools=[c.name for c in reply.tool_calls],
            )
        self._after_turn(chat_id)
        return row, usage

    async def finish_failed(
        self,
        chat_id: str,
        generation_id: str,
        code: str,
        *,
        cancelled: bool = False,
        audit_updates: dict[str, Any] | None = None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                status = "cancelled" if cancelled else "failed"
                error_code = "GENERATION_CANCELLED" if cancelled else code
                await Repositories(session).audits.finish(
                    chat_id, generation_id, status, error_code=error_code, payload_updates=audit_updates
                )

    async def complete(self, chat_id: str, content: str, max_tokens: int | None) -> Done:
        generation_id, turn, result = await self.start(chat_id, content, max_tokens)
        retry = ContextRetry(self.db, chat_id, generation_id, turn, preview_payload)
        while True:
            client = self._client(turn)
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
                raise
            except TokenBudgetExceeded:  # count_tokens showed the protected context alone is over (audit finished)
                raise
            except BaseException:
                await self.finish_failed(chat_id, generation_id, "GENERATION_CANCELLED", cancelled=True)
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        row, usage = await self._store_reply(
            chat_id, generation_id, reply, result, turn.profile, retry.updates("completed")
        )
        await learn(self.db, turn.model, turn.base_profile, result.payload, reply.usage)
        return Done(row, usage)

    async def stream(
        self, chat_id: str, generation_id: str, turn: Turn, result: PipelineResult
    ) -> AsyncIterator[GenerationEvent]:
        """Stream one prepared generation; cancelling the consumer cancels the provider call."""
        retry = ContextRetry(self.db, chat_id, generation_id, turn, preview_payload)
        while True:
            client = self._client(turn)
            finished: ChatResult | None = None
            streamed = False
            try:
                request = self._request(turn, result, stream=True)
                if (exact := await retry.exact(client, request, result)) is not None:  # T5: count_tokens
                    result, request = exact, self._request(turn, exact, stream=True)
                async with client.stream(request) as events:
                    async for event in events:
                        if isinstance(event, TextDelta):
                            if event.text:
                                streamed = True
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
                await self.finish_failed(chat_id, generation_id, error.code, audit_updates=retry.updates("failed"))
                yield Failed(error.code, error.message)
                return
            except TokenBudgetExceeded as budget_error:  # from count_tokens (the audit is finished)
                yield Failed(budget_error.code, budget_error.message)
                return
            except BaseException:
                await self.finish_failed(chat_id, generation_id, "GENERATION_CANCELLED", cancelled=True)
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        reply = _require_content(finished)
        row, usage = await self._store_reply(
            chat_id, generation_id, reply, result, turn.profile, retry.updates("completed")
        )
        await learn(self.db, turn.model, turn.base_profile, result.payload, reply.usage)
        yield Done(row, usage)
