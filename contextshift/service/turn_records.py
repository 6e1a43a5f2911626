"""What a chat turn leaves in the database (N5): the reply, a partial reply, a kept input, and the chat audit's
end, each written once and retried until stored (:func:`.replies.persist`); the reply's stored copy while it
streams (:mod:`.checkpoints`). The chat audit's side of :class:`.chat_call.ChatCall`, the turn's recorder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.tokens import TokenizerProfile
from ..core.vocabulary import CANCELLED, COMPLETED, PREPARED, PROVIDER_ERROR
from ..core.vocabulary import FAILED as FAILED_STATUS
from ..pipeline import PipelineResult
from ..providers import ChatResult, ProviderError
from ..storage import Database, Repositories
from ..storage.tables import MessageRow
from .checkpoints import Checkpoints, Write
from .history import is_command, is_failed_input
from .replies import (
    CUT,
    FAILED,
    INTERRUPTED,
    INTERRUPTED_CODE,
    REDO_ERROR,
    Redo,
    partial_message,
    persist,
    reply_message,
    reply_meta,
)
from .turns import TurnHold
from .usage import usage_of


@dataclass(slots=True)
class Running:
    """A started turn: its hold on the chat, the user message it answers and the reply it redoes, if any."""

    hold: TurnHold
    input_id: str | None
    redo: Redo | None = None
    #: The streamed reply's stored copy while it streams (N5: a crash keeps it), replaced by the outcome.
    checkpoints: Checkpoints | None = None
    #: A redo's stored copy: the index of the reply's version it writes, and (continue) the text it extends.
    version: int | None = None
    original: str | None = None


class TurnRecords:
    """The records of the turns running in one service, by generation id (``running``, shared with it)."""

    def __init__(self, db: Database, running: dict[str, Running], after_reply: Callable[[str], None]) -> None:
        self.db = db
        self.running = running
        #: Called with the chat's id once a reply is stored (C2: the background compaction check).
        self.after_reply = after_reply

    def input_id(self, generation_id: str) -> str | None:
        running = self.running.get(generation_id)
        return running.input_id if running else None

    def redo(self, generation_id: str) -> Redo | None:
        running = self.running.get(generation_id)
        return running.redo if running else None

    async def keep_reply(
        self, repos: Repositories, chat_id: str, generation_id: str, message: dict[str, Any]
    ) -> MessageRow:
        """Store a turn's reply: a new message, or a new version of the reply it regenerates, or the rest of
        the reply it continues."""
        running = self.running.get(generation_id)
        redo = running.redo if running is not None else None
        copy_id = running.checkpoints.row_id if running is not None and running.checkpoints is not None else None
        row: MessageRow | None
        if redo is None:
            if copy_id is not None:
                await repos.messages.delete(chat_id, copy_id)  # the outcome takes the stored copy's place
            return await repos.messages.append(chat_id, message)
        if copy_id is not None and running is not None:  # the version the stored copy wrote becomes the outcome
            put = await self._put_redo(repos, chat_id, redo, running.version, running.original, message)
            row = put[0] if put is not None else None
        elif redo.action == "regenerate":
            row = await repos.messages.add_alternative(chat_id, redo.message_id, message)
        else:
            row = await repos.messages.extend_reply(chat_id, redo.message_id, message["content"], message["meta"])
        if row is None:  # deleted while the turn ran: kept as a new message rather than lost (N5)
            return await repos.messages.append(chat_id, message)
        return row

    async def store_reply(
        self,
        chat_id: str,
        generation_id: str,
        reply: ChatResult,
        result: PipelineResult,
        profile: TokenizerProfile | None = None,
        audit_updates: dict[str, Any] | None = None,
    ) -> tuple[MessageRow, dict[str, Any] | None]:
        """The reply and the audit's completion in one transaction, retried until it is stored (N5)."""
        await self.stop_checkpoints(generation_id)
        usage = usage_of(reply, result, profile)
        meta = reply_meta(generation_id, self.input_id(generation_id), reply.finish_reason, usage, result)
        if reply.cut is not None:  # stopped by contextshift at the reply's cap: what came is kept, with why
            meta[CUT] = reply.cut
        message = reply_message(meta, reply)

        async def write(repos: Repositories) -> MessageRow:
            row = await self.keep_reply(repos, chat_id, generation_id, message)
            updates = {**(audit_updates or {}), "reply_message_id": row.id}
            await repos.audits.finish(chat_id, generation_id, COMPLETED, usage=usage, payload_updates=updates)
            await repos.compaction.add_usage(
                chat_id,
                input_tokens=usage["input_tokens"] if usage else 0,
                cached_tokens=usage["cached_input_tokens"] if usage else 0,
                tools=[c.name for c in reply.tool_calls],
            )
            return row

        row = await persist(self.db, write, what="a reply")
        self.after_reply(chat_id)
        return row, usage

    async def store_partial(
        self,
        chat_id: str,
        generation_id: str,
        text: str,
        result: PipelineResult,
        error: ProviderError | None,
        audit_updates: dict[str, Any] | None = None,
    ) -> MessageRow:
        """What was streamed before the provider failed (``error``) or the user stopped (None), kept."""
        await self.stop_checkpoints(generation_id)
        reason = PROVIDER_ERROR if error is not None else CANCELLED
        code = error.code if error is not None else None
        meta = reply_meta(generation_id, self.input_id(generation_id), INTERRUPTED, None, result)
        message = partial_message(meta, text, reason, code)

        async def write(repos: Repositories) -> MessageRow:
            row = await self.keep_reply(repos, chat_id, generation_id, message)
            status = FAILED_STATUS if error is not None else CANCELLED
            updates = {**(audit_updates or {}), "reply_message_id": row.id}
            await repos.audits.finish(
                chat_id, generation_id, status, error_code=code or "GENERATION_CANCELLED", payload_updates=updates
            )
            return row

        return await persist(self.db, write, what="a partial reply")

    @staticmethod
    async def _put_redo(
        repos: Repositories,
        chat_id: str,
        redo: Redo,
        version: int | None,
        original: str | None,
        message: dict[str, Any],
    ) -> tuple[MessageRow, int] | None:
        """A redo's reply (or its stored copy) written as the version the turn writes (a new one on the first
        write of a regenerate); a continue's text goes after the reply's ``original`` text."""
        if redo.action == "continue":
            message = {**message, "content": (original or "") + message["content"], "tool_calls": None}
        return await repos.messages.put_version(chat_id, redo.message_id, version, message)

    def checkpoints(self, chat_id: str, generation_id: str, result: PipelineResult) -> Checkpoints | None:
        """N5: the stored copy of a reply while it streams: a new message, or the version a redo writes."""
        running = self.running.get(generation_id)
        if running is None:
            return None
        if running.redo is not None:
            running.checkpoints = Checkpoints(self._redo_write(chat_id, generation_id, running, running.redo, result))
            return running.checkpoints
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

    def _redo_write(
        self, chat_id: str, generation_id: str, running: Running, redo: Redo, result: PipelineResult
    ) -> Write:
        """The stored copy of a regenerate (a new version of the reply, shown) or a continue (the reply's
        original text and what came so far), marked ``interrupted`` until the turn's outcome replaces it."""
        meta = reply_meta(generation_id, running.input_id, INTERRUPTED, None, result)

        async def write(text: str, row_id: str | None) -> str | None:
            async with self.db.session() as session:
                repos = Repositories(session)
                row = await repos.messages.get(redo.message_id, chat_id)
                if row is None:
                    if await repos.chats.get(chat_id) is None:
                        return None
                    raise LookupError("the reply being redone is gone")  # logged; the outcome is kept as new
                version, original = running.version, running.original
                if redo.action == "continue" and original is None:  # the first write: the reply as it was
                    original = row.content if isinstance(row.content, str) else ""
                    version = row.alternative or 0
                copy = partial_message(meta, text, INTERRUPTED, None)
                put = await self._put_redo(repos, chat_id, redo, version, original, copy)
                assert put is not None
            running.version, running.original = put[1], original  # once committed
            return put[0].id

        return write

    async def stop_checkpoints(self, generation_id: str) -> None:
        running = self.running.get(generation_id)
        if running is not None and running.checkpoints is not None:
            await running.checkpoints.close()

    async def mark_interrupted(self, repos: Repositories, chat_id: str) -> None:
        """N5: an input whose turn died with its process (no reply, its audit left ``prepared`` or closed as
        interrupted) is marked ``meta.failed`` before the next input, so the next prompt does not carry two user
        messages in a row; ``retry_of`` can still answer it while it is the newest message."""
        newest = (await repos.messages.list_page(chat_id, limit=1)).rows
        if not newest or newest[0].role != "user" or is_failed_input(newest[0]) or is_command(newest[0]):
            return
        audit = await repos.audits.get(chat_id)
        if audit is None or (audit.payload or {}).get("input_message_id") != newest[0].id:
            return
        if audit.status == PREPARED or audit.error_code == INTERRUPTED_CODE:  # we hold the turn: it is dead
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
        status = CANCELLED if cancelled else FAILED_STATUS
        error_code = "GENERATION_CANCELLED" if cancelled else code
        input_id = self.input_id(generation_id)
        redo = self.redo(generation_id)

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

    def kept_input(self, generation_id: str) -> str | None:
        """The input a failed turn kept with ``meta.failed`` (none for a redo: its input was answered before)."""
        return None if self.redo(generation_id) is not None else self.input_id(generation_id)


__all__ = ["Running", "TurnRecords"]
