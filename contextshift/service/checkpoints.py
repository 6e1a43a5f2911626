"""A streaming reply written to the database as it grows (N5), so that a crash keeps what the client saw.

The first text is stored at once as a partial reply (``meta.partial``, ``finish_reason`` and
``partial_reason`` ``interrupted``: what it will say if the process dies before the turn ends); after that the
row is brought up to date at least every :data:`CHECKPOINT_SECONDS`, or as soon as :data:`CHECKPOINT_CHARS`
more characters came. The writes run in a task of their own and never hold up the stream; that task is never cancelled
(:meth:`Checkpoints.close` lets a write under way finish). When the turn ends,
its outcome (the whole reply, or the partial one with its real reason) replaces the row
(:meth:`Checkpoints.row_id` says which). What "the row" is belongs to the writer
(:meth:`.turn_records.TurnRecords.checkpoints`): a new assistant message for an ordinary turn, the new version of
the reply for a regenerate, the reply's original text followed by what came for a continue.

A write that finds the chat gone stops the turn (:attr:`Checkpoints.gone`); any other failed write is logged
and tried again with the next text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("contextshift.generation")

#: Seconds a streamed reply's stored copy lags behind at most (while text keeps coming).
CHECKPOINT_SECONDS = 1.0
#: Characters after which the stored copy is brought up to date without waiting for the second.
CHECKPOINT_CHARS = 256

#: ``write(text, row_id)``: store ``text`` as the partial reply (a new row when ``row_id`` is None); returns the
#: row's id, or None when the chat is gone.
Write = Callable[[str, str | None], Awaitable[str | None]]


class Checkpoints:
    """Keeps the stored copy of one streaming reply up to date; :meth:`close` before storing its outcome."""

    def __init__(self, write: Write, *, seconds: float = CHECKPOINT_SECONDS, chars: int = CHECKPOINT_CHARS) -> None:
        self._write = write
        self.seconds = seconds
        self.chars = chars
        self._parts: list[str] = []
        self._length = 0
        self._saved = 0
        #: The stored partial reply, once the first text was written.
        self.row_id: str | None = None
        #: True when a write found the chat deleted: the turn should end.
        self.gone = False
        self._closed = False
        self._new = asyncio.Event()
        self._enough = asyncio.Event()
        self._task: asyncio.Task[None] = asyncio.create_task(self._run())

    def add(self, text: str) -> None:
        """More streamed text (never blocks)."""
        self._parts.append(text)
        self._length += len(text)
        self._new.set()
        if self._length - self._saved >= self.chars:
            self._enough.set()

    async def _run(self) -> None:
        while not self.gone:
            await self._new.wait()
            self._new.clear()
            self._enough.clear()
            if self._closed:
                return
            await self._save()
            # at most one write a second, unless enough text piles up before then
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.seconds):
                    await self._enough.wait()

    async def _save(self) -> None:
        length = self._length
        if length <= self._saved:
            return
        text = "".join(self._parts)
        try:
            row_id = await self._write(text, self.row_id)
        except Exception as error:
            log.warning("could not store the streamed reply so far (%s); next time", type(error).__name__)
            return
        if row_id is None:
            self.gone = True
            return
        self.row_id = row_id
        self._saved = length

    async def close(self) -> None:
        """Stop writing; a write under way finishes first. The task is never cancelled: a database call cut
        short in its worker thread can leave a transaction (and SQLite's write lock) behind, and a row written
        but not known would be left next to the outcome."""
        self._closed = True
        self._new.set()
        self._enough.set()
        cancelled = False
        while not self._task.done():
            try:
                await asyncio.shield(self._task)
            except asyncio.CancelledError:
                cancelled = True  # the caller is going away: still wait for the write, then let it go
            except Exception:
                break
        if cancelled:
            raise asyncio.CancelledError


__all__ = ["CHECKPOINT_CHARS", "CHECKPOINT_SECONDS", "Checkpoints", "Write"]
