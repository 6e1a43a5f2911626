"""The job engine on PostgreSQL (V8): procrastinate runs the job definitions of ``definitions``.

procrastinate keeps its jobs in its own tables in the service's database (migration 0015 applies its schema) and
brings what a hand-made queue lacked:

- ``lock`` and ``queueing_lock`` per chat: one pass of a chat runs at a time and at most one more waits, held by
  unique indexes in the database, across every API instance and worker;
- retries with backoff (``Backoff`` through :class:`_Retry`) and a worker that finishes its jobs on SIGTERM;
- worker heartbeats: a job whose worker stopped beating is found and run again by :meth:`EngineRunner.rescue`,
  which every running worker calls each heartbeat interval (within ``expiry + interval`` seconds, 40 s by default).

It talks to the database through psycopg 3 (its driver), in a small pool of its own beside the service's
asyncpg pool. Two things around it are ours, because procrastinate does not do them:

- each attempt is recorded with its error code and message (``attempt.run_attempt``);
- a retry is decided before procrastinate writes it: when another job of the same chat is already queued, the
  failed one ends ``failed`` instead, since re-queueing it would break the queueing lock (procrastinate would
  then leave the job ``doing``, holding the chat's lock; :meth:`EngineRunner.rescue` ends such a job too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import procrastinate
from procrastinate import exceptions as engine_errors
from procrastinate.job_context import JobContext as EngineContext
from procrastinate.jobs import Job as EngineJob
from procrastinate.jobs import Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from procrastinate.worker import Worker
from sqlalchemy import text

from ..core.vocabulary import COMPLETED, FAILED, QUEUED, RUNNING
from ..service.compaction import Compactor
from ..storage import Database, Repositories
from ..storage.types import utcnow
from .attempt import run_attempt
from .base import RunnerBase
from .definitions import DEFAULT_RETENTION, JOBS, Job, JobError
from .views import JobView, attempt_views

log = logging.getLogger("contextshift.jobs")

RUNNER = "procrastinate"
#: procrastinate's queue for every job of contextshift.
QUEUE = "default"
#: Seconds between looks for new jobs when no notification came (LISTEN/NOTIFY wakes a worker at once).
FETCH_INTERVAL = 2.0
#: The engine's own statuses (procrastinate's words, which its tables keep), as ``GET /api/v2/jobs`` names them.
STATUS_NAMES = {
    "todo": QUEUED,
    "doing": RUNNING,
    "succeeded": COMPLETED,
    "failed": FAILED,
    "cancelled": FAILED,
    "aborted": FAILED,
    "aborting": RUNNING,
}
ENGINE_STATUSES = {
    QUEUED: ("todo",),
    RUNNING: ("doing", "aborting"),
    COMPLETED: ("succeeded",),
    FAILED: ("failed", "cancelled", "aborted"),
}


def conninfo(db: Database) -> dict[str, Any]:
    """psycopg's connection arguments for the service's database, its ``search_path`` included (a server setting
    given to asyncpg in ``engine_options``, as the tests give one schema per test)."""
    url = db.url
    arguments: dict[str, Any] = {
        key: value
        for key, value in {
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": url.password,
            "dbname": url.database,
        }.items()
        if value is not None
    }
    arguments.update({key: str(value) for key, value in url.query.items()})
    settings = dict(db.engine_options.get("connect_args", {}).get("server_settings", {}))
    if settings:
        arguments["options"] = " ".join(f"-c {key}={value}" for key, value in settings.items())
    return arguments


class _Retry(BaseRetryStrategy):
    """procrastinate asks this after a failed attempt; ``EngineRunner`` decided already and left the answer."""

    def __init__(self, decisions: dict[int, float | None]) -> None:
        self.decisions = decisions

    def get_retry_decision(self, *, exception: BaseException, job: EngineJob) -> RetryDecision | None:
        assert job.id is not None
        retry_in = self.decisions.pop(job.id, None)
        return None if retry_in is None else RetryDecision(retry_at=utcnow() + timedelta(seconds=retry_in))


class EngineRunner(RunnerBase):
    """Background jobs on PostgreSQL through procrastinate; with ``run_jobs`` it also runs a worker in this process
    (the options are ``RunnerBase``'s; ``contextshift worker`` waits for running jobs on SIGTERM: ``grace=None``).
    """

    kind = RUNNER

    def __init__(
        self,
        db: Database,
        compactor: Compactor,
        *,
        run_jobs: bool = True,
        concurrency: int = 1,
        grace: float | None = None,
        retention: timedelta = DEFAULT_RETENTION,
        jobs: Mapping[str, Job] = JOBS,
        periodic: bool = True,
        fetch_interval: float = FETCH_INTERVAL,
        pool_size: int | None = None,
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
        self.fetch_interval = fetch_interval
        self._decisions: dict[int, float | None] = {}
        size = pool_size or (concurrency + 3 if run_jobs else 2)  # jobs, the fetch, the heartbeat, the rescue
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(kwargs=conninfo(db), min_size=1, max_size=size)
        )
        self._retry = _Retry(self._decisions)
        for job in self.jobs.values():
            self._register(job)
        self._worker: Worker | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._open = False

    # -- definitions to tasks ---------------------------------------------------------------------------------

    def _register(self, job: Job) -> None:
        async def run(context: EngineContext, /, **args: Any) -> None:
            args.pop("timestamp", None)  # a periodic job's defer time
            await self._run(job, context.job, args)

        task = self.app.task(name=job.name, queue=QUEUE, pass_context=True, retry=self._retry)(run)
        if job.cron is not None and self.periodic:
            schedule = self.app.periodic(cron=job.cron, periodic_id=job.name, lock=job.name, queueing_lock=job.name)
            schedule(task)  # type: ignore[arg-type]  # its defer time comes in ``args`` ("timestamp")

    async def _run(self, job: Job, engine_job: EngineJob, args: dict[str, Any]) -> None:
        assert engine_job.id is not None
        job_id = engine_job.id
        try:
            attempted = await run_attempt(
                job, self.context, args, runner=RUNNER, job_id=str(job_id), attempt=engine_job.attempts + 1
            )
        except asyncio.CancelledError:  # stopped past the grace: the job runs again (unless a copy waits)
            self._decisions[job_id] = 0.0 if not await self._copy_queued(engine_job) else None
            raise
        if attempted.ok:
            return
        retry_in = attempted.retry_in
        if retry_in is not None and await self._copy_queued(engine_job):
            log.info("job %s (%s): a queued copy takes over; not retried", job_id, job.name)
            retry_in = None
        self._decisions[job_id] = retry_in
        raise _AttemptFailed(attempted.error_code or "JOB_FAILED")

    async def _copy_queued(self, engine_job: EngineJob) -> bool:
        """Another job of the same queueing lock waits (a retry of this one would clash with it)."""
        if engine_job.queueing_lock is None:
            return False
        async with self.db.session(write=False) as session:
            found = await session.scalar(
                text("SELECT 1 FROM procrastinate_jobs WHERE queueing_lock = :lock AND status = 'todo' LIMIT 1"),
                {"lock": engine_job.queueing_lock},
            )
        return found is not None

    # -- the runner interface ---------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.app.open_async()
        self._open = True
        if self.run_jobs:
            heartbeat = self.db.heartbeat
            self._worker = Worker(
                self.app,
                queues=[QUEUE],
                name=f"contextshift-{self.db.instance_id}",
                concurrency=self.concurrency,
                fetch_job_polling_interval=self.fetch_interval,
                shutdown_graceful_timeout=self.grace,
                install_signal_handlers=False,  # the process decides what a signal means (``cli.worker``)
                update_heartbeat_interval=heartbeat.interval,
                stalled_worker_timeout=heartbeat.expiry.total_seconds(),
            )
            self._tasks = [
                asyncio.create_task(self._worker.run(), name="contextshift-engine-worker"),  # type: ignore[no-untyped-call]
                asyncio.create_task(self._rescue_loop(), name="contextshift-engine-rescue"),
            ]

    async def stop(self) -> None:
        """Stop the worker (running jobs end first, within ``grace``) and close the pool."""
        if self._worker is not None:
            self._worker.stop()  # type: ignore[no-untyped-call]
        for task in self._tasks[1:]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._tasks:
            try:
                await self._tasks[0]
            except asyncio.CancelledError:
                pass
            except Exception as error:  # the worker had stopped on a failure of its own (``wait`` returned)
                log.warning("the job engine's worker stopped on %s", type(error).__name__)
        self._tasks, self._worker = [], None
        if self._open:
            await self.app.close_async()
            self._open = False

    async def wait(self) -> None:
        """Until the worker stops (``stop``, or a failure of its own)."""
        if self._tasks:
            await asyncio.shield(self._tasks[0])

    async def enqueue(self, job: Job, args: Mapping[str, Any]) -> bool:
        """Queue ``job``; False when a job of its lock waits already (it will do the same work)."""
        lock = job.lock_of(args)
        try:
            await self.app.tasks[job.name].configure(lock=lock, queueing_lock=lock).defer_async(**dict(args))
        except engine_errors.AlreadyEnqueued:
            return False
        return True

    async def rescue(self) -> int:
        """Run again the jobs whose worker stopped beating (a ``kill -9``, a lost machine), and end the jobs left
        ``doing`` by a retry that could not be written; how many were rescued or ended.

        A stalled job goes back to the queue at once (its interrupted attempt is closed by the dead instance's
        clean-up), unless it has had its last attempt, or a copy of it is queued: then it ends ``failed``.
        """
        manager = self.app.job_manager
        expiry = self.db.heartbeat.expiry.total_seconds()
        handled = 0
        own = self._worker.worker_id if self._worker is not None else None
        for stalled in await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=expiry):
            if own is not None and stalled.worker_id == own:  # this worker is alive: it is here, looking
                continue
            job = self.jobs.get(stalled.task_name)
            last = job is not None and stalled.attempts + 1 >= job.backoff.max_attempts
            handled += await self._requeue_or_end(stalled, end=last or await self._copy_queued(stalled))
        for stuck in await self._stuck(expiry):
            handled += await self._requeue_or_end(stuck, end=True)
        return handled

    async def _requeue_or_end(self, job: EngineJob, *, end: bool) -> int:
        manager = self.app.job_manager
        try:
            if end:
                await manager.finish_job(job, status=Status.FAILED, delete_job=False)
                log.warning(
                    "job %s (%s) ended failed: its worker is gone",
                    job.id,
                    job.task_name,
                    extra={
                        "event": "job_rescued",
                        "runner": RUNNER,
                        "job_id": str(job.id),
                        "task": job.task_name,
                        "status": FAILED,
                    },
                )
            else:
                await manager.retry_job(job)
                log.warning(
                    "job %s (%s) queued again: its worker is gone",
                    job.id,
                    job.task_name,
                    extra={
                        "event": "job_rescued",
                        "runner": RUNNER,
                        "job_id": str(job.id),
                        "task": job.task_name,
                        "status": QUEUED,
                    },
                )
        except engine_errors.ConnectorException:  # another worker rescued it first, or a copy was just queued
            return 0
        return 1

    async def _stuck(self, expiry: float) -> list[EngineJob]:
        """Jobs ``doing`` although their worker ended their last attempt more than ``expiry`` seconds ago (a retry
        that procrastinate could not write: see the module's docstring). An attempt closed as ``interrupted``
        is not one of these: its worker died, and the job is stalled instead."""
        before = utcnow() - timedelta(seconds=expiry)
        async with self.db.session(write=False) as session:
            rows = (
                await session.execute(
                    text(
                        "SELECT j.id, j.task_name, j.lock, j.queueing_lock, j.attempts FROM procrastinate_jobs j "
                        "WHERE j.status = 'doing' AND EXISTS (SELECT 1 FROM job_attempts a WHERE a.runner = :runner "
                        "AND a.job_id = CAST(j.id AS VARCHAR) AND a.attempt = j.attempts + 1 "
                        "AND a.status IN ('ok', 'error') AND a.finished_at < :before)"
                    ),
                    {"runner": RUNNER, "before": before},
                )
            ).all()
        return [
            EngineJob(
                id=row.id,
                queue=QUEUE,
                lock=row.lock,
                queueing_lock=row.queueing_lock,
                task_name=row.task_name,
                attempts=row.attempts,
            )
            for row in rows
        ]

    async def _rescue_loop(self) -> None:
        while True:
            await asyncio.sleep(self.db.heartbeat.interval)
            try:
                await self.rescue()
            except Exception as error:  # a database hiccup must not stop the rescue for good
                log.warning("the stalled-job rescue hit %s; trying again", type(error).__name__)

    async def delete_ended(self, before: datetime) -> int:
        """``cleanup.jobs``: the engine's ended jobs (their events go with them) and their attempts."""
        async with self.db.session() as session:
            ended = (
                (
                    await session.execute(
                        text(
                            "DELETE FROM procrastinate_jobs j WHERE j.status IN ('succeeded', 'failed', 'cancelled', "
                            "'aborted') AND NOT EXISTS (SELECT 1 FROM procrastinate_events e WHERE e.job_id = j.id "
                            "AND e.at >= :before) "
                            # a periodic job's latest defer still names it (the engine keeps that row)
                            "AND NOT EXISTS (SELECT 1 FROM procrastinate_periodic_defers d WHERE d.job_id = j.id) "
                            "RETURNING j.id"
                        ),
                        {"before": before},
                    )
                )
                .scalars()
                .all()
            )
            live = (await session.execute(text("SELECT CAST(id AS VARCHAR) FROM procrastinate_jobs"))).scalars().all()
            await Repositories(session).job_attempts.delete_before(RUNNER, before, keep=list(live))
        return len(ended)

    async def listing(self, statuses: Sequence[str], *, limit: int, offset: int = 0) -> tuple[list[JobView], bool]:
        """Jobs in ``statuses`` (``queued``, ``running``, ``failed``, ``completed``), newest first."""
        engine_statuses = [s for status in statuses for s in ENGINE_STATUSES[status]]
        async with self.db.session(write=False) as session:
            rows = (
                await session.execute(
                    text(
                        "SELECT j.id, j.task_name, j.status, j.attempts, j.lock, j.args, j.scheduled_at, "
                        "(SELECT min(e.at) FROM procrastinate_events e WHERE e.job_id = j.id) AS queued_at "
                        "FROM procrastinate_jobs j WHERE CAST(j.status AS VARCHAR) = ANY(:statuses) "
                        "ORDER BY j.id DESC LIMIT :limit OFFSET :offset"
                    ),
                    {"statuses": engine_statuses, "limit": limit + 1, "offset": offset},
                )
            ).all()
            page = rows[:limit]
            attempts = await Repositories(session).job_attempts.of_jobs(RUNNER, [str(row.id) for row in page])
        views = [
            JobView(
                id=str(row.id),
                task=row.task_name,
                status=STATUS_NAMES.get(row.status, row.status),
                attempts=len(attempts[str(row.id)]),
                lock=row.lock,
                args=dict(row.args or {}),
                queued_at=row.queued_at,
                run_after=row.scheduled_at,
                errors=attempt_views(attempts[str(row.id)]),
            )
            for row in page
        ]
        return views, len(rows) > limit


class _AttemptFailed(JobError):
    """Tells procrastinate the attempt failed (its error is recorded already; this names only its code)."""

    def __init__(self, error_code: str) -> None:
        super().__init__(f"The attempt failed with {error_code}; see the job's attempts.", error_code=error_code)
