"""Background compaction jobs.

Jobs live in the database (``compaction_jobs``), so pending work survives a restart and is picked up again;
a job is claimed with a lease, so two workers never run it at once, and the chat's own compaction lease
keeps any two passes on one chat apart. The claim is the instance's: its heartbeat renews the lease, and when
the instance dies the job goes back to pending within a heartbeat expiry (N5, ``storage.liveness``).
``InProcessJobRunner`` is the default: an asyncio task inside the service. A multi-instance deployment can
run the same loop elsewhere or replace it through ``JobRunner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Protocol

from ..service.compaction import Compactor
from ..storage import Database, Repositories

log = logging.getLogger("contextshift.jobs")


class JobRunner(Protocol):
    def notify(self, chat_id: str) -> None:
        """A job was queued for ``chat_id``: run it soon."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class InProcessJobRunner:
    def __init__(
        self,
        db: Database,
        compactor: Compactor,
        *,
        poll_interval: float = 5.0,
        lease: timedelta | None = None,
    ) -> None:
        self.db = db
        self.compactor = compactor
        self.poll_interval = poll_interval
        self.lease = lease if lease is not None else db.heartbeat.expiry
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()

    def notify(self, chat_id: str) -> None:
        self._wake.set()

    async def start(self) -> None:
        self.compactor.schedule = self.notify
        self._task = asyncio.create_task(self._loop(), name="contextshift-jobs")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run_pending(self) -> int:
        """Run every claimable job now; how many ran."""
        ran = 0
        while True:
            async with self.db.session() as session:
                job = await Repositories(session).compaction.claim_job(self.lease)
            if job is None:
                return ran
            try:
                await self.compactor.run(job.chat_id, "background")
            except Exception as error:  # one chat's failure must not stop the others
                log.warning("background compaction of chat %s failed (%s)", job.chat_id, type(error).__name__)
            finally:
                async with self.db.session() as session:
                    await Repositories(session).compaction.finish_job(job.id)
            ran += 1

    async def _loop(self) -> None:
        while True:
            self.idle.clear()
            self._wake.clear()  # before the run: a notify() that arrives during it is not lost
            try:
                await self.run_pending()
            except Exception as error:
                log.warning("the job loop hit %s; retrying", type(error).__name__)
            self.idle.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):  # not wait_for, which can drop a cancellation
                    await self._wake.wait()
