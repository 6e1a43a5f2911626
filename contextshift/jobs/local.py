"""The embedded job runner (V8): the job definitions of ``definitions``, run from the ``jobs`` table, for SQLite.

The job engine (``engine``) needs PostgreSQL; on a SQLite file the service keeps running its jobs itself, through
the same definitions and with the same rules: one running and at most one queued job per lock, retries with the
job's backoff up to its limit, each attempt recorded. Jobs live in the database, so they survive a restart;
a job is claimed by a conditional UPDATE with a lease that the instance's heartbeat renews, and a dead
instance's job is queued again by whichever instance beats next (``storage.liveness``). Several processes may
share one file: each polls, and a job runs in one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..core.vocabulary import QUEUED
from ..service.compaction import Compactor
from ..storage import Database, Repositories
from ..storage.tables import JobRow
from ..storage.types import utcnow
from .attempt import run_attempt
from .base import RunnerBase
from .definitions import DEFAULT_RETENTION, JOBS, Job
from .views import JobView, attempt_views

log = logging.getLogger("contextshift.jobs")

RUNNER = "local"
#: Seconds between looks for due jobs when nothing in this process queued one (other processes, retries).
POLL_INTERVAL = 5.0
#: Seconds between looks at the periodic jobs' schedules.
SCHEDULE_INTERVAL = 30.0


class LocalRunner(RunnerBase):
    """Background jobs in this process, from the ``jobs`` table (the options are ``RunnerBase``'s; a job
    interrupted past the ``grace`` is queued again)."""

    kind = RUNNER

    def __init__(
        self,
        db: Database,
        compactor: Compactor,
        *,
        run_jobs: bool = True,
        concurrency: int = 1,
        grace: float | None = 0.0,
        retention: timedelta = DEFAULT_RETENTION,
        jobs: Mapping[str, Job] = JOBS,
        periodic: bool = True,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        super().__init__(
            db,
            compactor,
            run_jobs=run_jobs,
            concurrency=concurrency,
            grace=grace,
            retention=retention,
            jobs=jobs,
            periodic=periodic,
        )
        self.poll_interval = poll_interval
        self.idle = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._scheduler: asyncio.Task[None] | None = None
        self._next_due: dict[str, float] = {}  # a periodic job's next queueing, by this process's clock only

    async def start(self) -> None:
        if not self.run_jobs:
            return
        self._stopping.clear()
        self._loops = [
            asyncio.create_task(self._loop(), name=f"contextshift-jobs-{n}") for n in range(self.concurrency)
        ]
        if self.periodic:
            self._scheduler = asyncio.create_task(self._schedule(), name="contextshift-jobs-schedule")

    async def stop(self) -> None:
        """Stop taking jobs; running ones end within ``grace`` seconds or are interrupted and queued again."""
        self._stopping.set()
        self._wake.set()
        if self._scheduler is not None:
            self._scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scheduler
            self._scheduler = None
        if self._loops:
            if self.grace is None or self.grace > 0:
                await asyncio.wait(self._loops, timeout=self.grace)
            for task in self._loops:
                task.cancel()
            for task in self._loops:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._loops = []

    async def wait(self) -> None:
        """Until the runner stops."""
        await self._stopping.wait()
        if self._loops:
            await asyncio.wait(self._loops)

    async def enqueue(self, job: Job, args: Mapping[str, Any]) -> bool:
        """Queue ``job``; False when a job of its lock waits already (it will do the same work)."""
        async with self.db.session() as session:
            queued = await Repositories(session).jobs.enqueue(job.name, dict(args), lock=job.lock_of(args))
        if queued is not None:
            self._wake.set()
        return queued is not None

    async def run_pending(self) -> int:
        """Run due jobs until none is left (or the runner stops); how many attempts ran."""
        ran = 0
        while not self._stopping.is_set():
            async with self.db.session() as session:
                row = await Repositories(session).jobs.claim(self.db.heartbeat.expiry, self.db.instance_id)
            if row is None:
                return ran
            await self._attempt(row)
            ran += 1
        return ran

    async def _attempt(self, row: JobRow) -> None:
        job = self.jobs.get(row.task)
        if job is None:  # a job of a newer version: leave it to that version
            async with self.db.session() as session:
                await Repositories(session).jobs.fail(row.id)
            log.warning("job %s: no task %r here; ended failed", row.id, row.task)
            return
        try:
            attempted = await run_attempt(
                job, self.context, row.args, runner=RUNNER, job_id=row.id, attempt=row.attempts
            )
        except asyncio.CancelledError:
            async with asyncio.timeout(5), self.db.session() as session:  # runs next time (or a copy does)
                await Repositories(session).jobs.retry(row.id, utcnow())
            raise
        async with self.db.session() as session:
            jobs = Repositories(session).jobs
            if attempted.ok:
                await jobs.succeed(row.id)
            elif attempted.retry_in is None:
                await jobs.fail(row.id)
            elif not await jobs.retry(row.id, utcnow() + timedelta(seconds=attempted.retry_in)):
                log.info("job %s (%s): a queued copy takes over; not retried", row.id, row.task)

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self.idle.clear()
            self._wake.clear()  # before the run: a job queued during it is not missed
            try:
                await self.run_pending()
            except Exception as error:
                log.warning("the job loop hit %s; going on", type(error).__name__)
            self.idle.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):  # not wait_for, which can drop a cancellation
                    await self._wake.wait()

    async def _schedule(self) -> None:
        """Queue each periodic job when it is due (at start, then every ``every_minutes``)."""
        while True:
            now = time.monotonic()
            for job in self.jobs.values():
                if job.every_minutes is None or self._next_due.get(job.name, 0.0) > now:
                    continue
                try:
                    await self.enqueue(job, {})
                except Exception as error:
                    log.warning("queueing %s hit %s; trying again", job.name, type(error).__name__)
                    continue
                self._next_due[job.name] = now + job.every_minutes * 60
            await asyncio.sleep(SCHEDULE_INTERVAL)

    async def delete_ended(self, before: datetime) -> int:
        async with self.db.session() as session:
            return await Repositories(session).jobs.delete_finished(before)

    async def listing(self, statuses: Sequence[str], *, limit: int, offset: int = 0) -> tuple[list[JobView], bool]:
        """Jobs in ``statuses`` (``queued``, ``running``, ``failed``, ``completed``), newest first."""
        async with self.db.session(write=False) as session:
            repos = Repositories(session)
            rows, more = await repos.jobs.listing(statuses, limit=limit, offset=offset)
            attempts = await repos.job_attempts.of_jobs(RUNNER, [row.id for row in rows])
        views = [
            JobView(
                id=row.id,
                task=row.task,
                status=row.status,
                attempts=row.attempts,
                lock=row.lock,
                args=dict(row.args or {}),
                queued_at=row.created_at,
                run_after=row.run_after if row.status == QUEUED else None,
                errors=attempt_views(attempts[row.id]),
            )
            for row in rows
        ]
        return views, more
