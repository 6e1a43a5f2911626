"""One turn at a time per chat (N5): a second turn on a busy chat waits its turn, at most ``wait`` seconds.

Decision: a turn that finds its chat busy *waits* (default up to 30 s) rather than failing at once, so
two quick messages from one user both get answered, in order; after the wait it is refused with 409
``CHAT_BUSY`` and nothing is stored. The transcript therefore always alternates: a user message, then
the reply to it (``meta.reply_to``), then the next user message.

The hold is the chat's turn lease in the database (:class:`~contextshift.storage.repositories.turns.
TurnRepository`), so it holds across processes and instances on one SQLite file or PostgreSQL database.
Within one process, waiters queue on an ``asyncio.Lock`` per chat first (first come, first served, no
polling); across processes they poll the lease. The holder renews the lease every ``renew`` seconds;
a process that dies stops renewing, and its lease expires after ``ttl`` seconds.

Changes that would pull the ground from under a running turn (rewind, deleting a message or the chat) take the
same lease for their own transaction (:func:`between_turns`) and are refused with 409 ``CHAT_BUSY`` meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import anyio

from ..storage import Database, Repositories
from .errors import Refusal, ServiceError, not_found

log = logging.getLogger("contextshift.turns")

CHAT_BUSY = "CHAT_BUSY"


@dataclass(frozen=True, slots=True)
class TurnPolicy:
    """Seconds: how long a turn waits for a busy chat, the lease's TTL and how often its holder renews it."""

    wait: float = 30.0
    ttl: float = 30.0
    renew: float = 10.0
    #: Polling interval bounds while another process holds the chat.
    poll_min: float = 0.02
    poll_max: float = 0.25


class TurnHold:
    """A chat's turn, held until :meth:`release` (idempotent; may be called from any task)."""

    def __init__(self, turns: ChatTurns, chat_id: str, owner: str, lock: asyncio.Lock) -> None:
        self.chat_id = chat_id
        self.owner = owner
        self._turns = turns
        self._lock = lock
        self._renewer = asyncio.create_task(turns._renew(chat_id, owner))
        self._released = False

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        with anyio.CancelScope(shield=True):
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
            try:
                await self._turns._release(self.chat_id, self.owner)
            finally:
                self._turns._unlock(self.chat_id, self._lock)


class ChatTurns:
    """Hands out each chat's turn to one generation at a time."""

    def __init__(self, db: Database, policy: TurnPolicy | None = None) -> None:
        self.db = db
        self.policy = policy or TurnPolicy()
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    async def acquire(self, chat_id: str) -> TurnHold:
        """Wait for the chat's turn (at most ``policy.wait`` seconds, else 409 ``CHAT_BUSY``) and hold it."""
        deadline = time.monotonic() + self.policy.wait
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        self._users[chat_id] = self._users.get(chat_id, 0) + 1
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can drop a cancellation
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await lock.acquire()
        except BaseException:
            self._forget(chat_id)
            if isinstance(sys.exc_info()[1], TimeoutError):
                raise _busy(chat_id) from None
            raise
        owner = uuid.uuid4().hex
        try:
            await self._acquire(chat_id, owner, deadline)
        except BaseException:
            self._unlock(chat_id, lock)
            raise
        return TurnHold(self, chat_id, owner, lock)

    @asynccontextmanager
    async def hold(self, chat_id: str) -> AsyncIterator[TurnHold]:
        """:meth:`acquire` for the duration of a block."""
        held = await self.acquire(chat_id)
        try:
            yield held
        finally:
            await held.release()

    def _unlock(self, chat_id: str, lock: asyncio.Lock) -> None:
        lock.release()
        self._forget(chat_id)

    def _forget(self, chat_id: str) -> None:
        self._users[chat_id] -= 1
        if self._users[chat_id] == 0:
            del self._users[chat_id]
            self._locks.pop(chat_id, None)

    async def _acquire(self, chat_id: str, owner: str, deadline: float) -> None:
        ttl = timedelta(seconds=self.policy.ttl)
        pause = self.policy.poll_min
        while True:
            async with self.db.session() as session:
                repos = Repositories(session)
                if await repos.turns.acquire(chat_id, owner, ttl):
                    return
                if await repos.chats.get(chat_id) is None:
                    raise not_found("chat", chat_id)
            if time.monotonic() + pause > deadline:
                raise _busy(chat_id)
            await asyncio.sleep(pause)
            pause = min(self.policy.poll_max, pause * 2)

    async def _renew(self, chat_id: str, owner: str) -> None:
        ttl = timedelta(seconds=self.policy.ttl)
        while True:
            await asyncio.sleep(self.policy.renew)
            try:
                async with self.db.session() as session:
                    if not await Repositories(session).turns.renew(chat_id, owner, ttl):
                        log.warning("the turn lease of chat %s was lost", chat_id)
                        return
            except Exception as error:  # the next renewal may succeed; the lease has ttl - renew to spare
                log.warning("renewing the turn lease of chat %s failed (%s)", chat_id, type(error).__name__)

    async def _release(self, chat_id: str, owner: str) -> None:
        for attempt in range(3):
            try:
                async with self.db.session() as session:
                    await Repositories(session).turns.release(chat_id, owner)
                return
            except Exception as error:  # it expires on its own after ttl
                log.warning("releasing the turn lease of chat %s failed (%s)", chat_id, type(error).__name__)
                await asyncio.sleep(0.1 * (attempt + 1))


@asynccontextmanager
async def between_turns(repos: Repositories, chat_id: str) -> AsyncIterator[None]:
    """Hold the chat's turn lease for a change that must not run during a turn (rewind, message and chat
    delete) in the caller's transaction: 409 ``CHAT_BUSY`` at once while a turn runs (a reply must never be
    stored pointing at a deleted message). The lease is taken and given back in the same transaction, so a
    turn that starts afterwards sees the change, and a refused change leaves nothing behind."""
    owner = uuid.uuid4().hex
    if not await repos.turns.acquire(chat_id, owner, timedelta(seconds=TurnPolicy().ttl)):
        if await repos.chats.get(chat_id) is None:
            raise not_found("chat", chat_id)
        raise _busy(chat_id)
    yield
    await repos.turns.release(chat_id, owner)  # a deleted chat has no lease to give back: nothing happens


def chat_busy(chat_id: str) -> ServiceError:
    """409 ``CHAT_BUSY`` for ``chat_id``."""
    return _busy(chat_id)


def _busy(chat_id: str) -> ServiceError:
    return ServiceError(
        Refusal.CONFLICT,
        CHAT_BUSY,
        "Another turn is still running in this chat; try again when it has finished.",
        chat_id=chat_id,
    )
