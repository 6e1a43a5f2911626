"""Background jobs of the embedded runner (V8, SQLite) and the attempts of either runner.

Concurrency is by conditional UPDATEs, as for the compaction lease: a job is claimed only while it is still
``queued`` and no job of its lock runs; it is finished only by the attempt that claimed it. The partial unique
indexes (one queued and one running job per lock) back both up in the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from ...core.vocabulary import COMPLETED, ENDED_JOB_STATUSES, FAILED, QUEUED, RUNNING
from ..tables import JobAttemptRow, JobRow
from ..types import utcnow
from ._common import execute_rowcount

#: Claim candidates read per try: a few, since each one may be taken by another runner meanwhile.
_CANDIDATES = 10


def _no_running_sibling() -> Any:
    """The job has no lock, or no job of its lock is running."""
    other = aliased(JobRow)
    return or_(
        JobRow.lock.is_(None),
        ~exists().where(other.lock == JobRow.lock, other.status == RUNNING, other.id != JobRow.id),
    )


def queued_sibling() -> Any:
    """Another job of the same lock is queued (a retry would be a second copy: that one takes over)."""
    other = aliased(JobRow)
    return and_(
        JobRow.lock.is_not(None),
        exists().where(other.lock == JobRow.lock, other.status == QUEUED, other.id != JobRow.id),
    )


class JobRepository:
    """The ``jobs`` table (on one session)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def enqueue(
        self, task: str, args: dict[str, Any], *, lock: str | None = None, run_after: datetime | None = None
    ) -> JobRow | None:
        """Queue a job; None when a job of ``lock`` is already queued (it will do the same work)."""
        if lock is not None:
            waiting = await self.session.scalar(
                select(JobRow.id).where(JobRow.lock == lock, JobRow.status == QUEUED).limit(1)
            )
            if waiting is not None:
                return None
        row = JobRow(task=task, args=dict(args), lock=lock, status=QUEUED, run_after=run_after or utcnow())
        try:
            async with self.session.begin_nested():  # a concurrent enqueue of the same lock loses here
                self.session.add(row)
                await self.session.flush()
        except IntegrityError:
            return None
        return row

    async def claim(self, ttl: timedelta, instance_id: str | None, *, now: datetime | None = None) -> JobRow | None:
        """The oldest due job whose lock is free, now ``running`` for ``instance_id`` (attempts + 1)."""
        now = now or utcnow()
        claimable = and_(JobRow.status == QUEUED, JobRow.run_after <= now, _no_running_sibling())
        candidates = list(
            await self.session.scalars(
                select(JobRow.id).where(claimable).order_by(JobRow.run_after, JobRow.created_at).limit(_CANDIDATES)
            )
        )
        for job_id in candidates:
            try:
                async with self.session.begin_nested():
                    claimed = await execute_rowcount(
                        self.session,
                        update(JobRow)
                        .where(JobRow.id == job_id, claimable)
                        .values(
                            status=RUNNING,
                            attempts=JobRow.attempts + 1,
                            lease_until=now + ttl,
                            instance_id=instance_id,  # its heartbeat renews the lease (N5)
                        )
                        .execution_options(synchronize_session=False),
                    )
            except IntegrityError:  # another runner started a job of the same lock meanwhile
                continue
            if claimed == 1:
                return await self.session.get(JobRow, job_id, populate_existing=True)
        return None

    async def succeed(self, job_id: str) -> bool:
        return await self._end(job_id, status=COMPLETED)

    async def fail(self, job_id: str) -> bool:
        return await self._end(job_id, status=FAILED)

    async def retry(self, job_id: str, run_after: datetime) -> bool:
        """Queue the running job again for ``run_after``; False (and the job failed) when another job of its lock
        is queued already: that one does the same work, and two queued copies would break the lock's rule."""
        requeued = await execute_rowcount(
            self.session,
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.status == RUNNING, ~queued_sibling())
            .values(status=QUEUED, run_after=run_after, lease_until=None, instance_id=None)
            .execution_options(synchronize_session=False),
        )
        if requeued == 1:
            return True
        await self.fail(job_id)
        return False

    async def _end(self, job_id: str, *, status: str) -> bool:
        ended = await execute_rowcount(
            self.session,
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.status == RUNNING)
            .values(status=status, lease_until=None, instance_id=None, finished_at=utcnow())
            .execution_options(synchronize_session=False),
        )
        return ended == 1

    async def get(self, job_id: str) -> JobRow | None:
        return await self.session.get(JobRow, job_id, populate_existing=True)

    async def listing(self, statuses: Sequence[str], *, limit: int, offset: int = 0) -> tuple[list[JobRow], bool]:
        """Jobs in ``statuses``, newest first; ``has_more`` when older ones exist."""
        query = (
            select(JobRow)
            .where(JobRow.status.in_(list(statuses)))
            .order_by(JobRow.created_at.desc(), JobRow.id.desc())
            .offset(offset)
            .limit(limit + 1)
        )
        rows = list(await self.session.scalars(query))
        return rows[:limit], len(rows) > limit

    async def count(self, status: str) -> int:
        query = select(func.count()).select_from(JobRow).where(JobRow.status == status)
        return int(await self.session.scalar(query) or 0)

    async def delete_finished(self, before: datetime) -> int:
        """Delete jobs that ended before ``before`` (their attempts too); how many went."""
        ended = select(JobRow.id).where(JobRow.status.in_(ENDED_JOB_STATUSES), JobRow.finished_at < before)
        await self.session.execute(
            delete(JobAttemptRow)
            .where(JobAttemptRow.runner == "local", JobAttemptRow.job_id.in_(ended))
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(
            self.session,
            delete(JobRow)
            .where(JobRow.status.in_(ENDED_JOB_STATUSES), JobRow.finished_at < before)
            .execution_options(synchronize_session=False),
        )


class JobAttemptRepository:
    """The ``job_attempts`` table (on one session): what each attempt of a job did."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def start(self, *, runner: str, job_id: str, task: str, attempt: int) -> JobAttemptRow:
        row = JobAttemptRow(
            runner=runner,
            job_id=job_id,
            task=task,
            attempt=attempt,
            status=RUNNING,
            instance_id=self.session.info.get("instance_id"),  # N5: closed as interrupted if this instance dies
        )
        self.session.add(row)
        await self.session.flush()
        return row

    async def finish(
        self, attempt_id: str, status: str, *, error_code: str | None = None, error: str | None = None
    ) -> bool:
        """Close a running attempt (not one already closed as interrupted); True when this call closed it."""
        closed = await execute_rowcount(
            self.session,
            update(JobAttemptRow)
            .where(JobAttemptRow.id == attempt_id, JobAttemptRow.status == RUNNING)
            .values(status=status, error_code=error_code, error=error, finished_at=utcnow())
            .execution_options(synchronize_session=False),
        )
        return closed == 1

    async def of_jobs(self, runner: str, job_ids: Sequence[str]) -> dict[str, list[JobAttemptRow]]:
        """Each job's attempts, first attempt first."""
        found: dict[str, list[JobAttemptRow]] = {job_id: [] for job_id in job_ids}
        if not job_ids:
            return found
        query = (
            select(JobAttemptRow)
            .where(JobAttemptRow.runner == runner, JobAttemptRow.job_id.in_(list(job_ids)))
            .order_by(JobAttemptRow.attempt, JobAttemptRow.started_at)
        )
        for row in await self.session.scalars(query):
            found[row.job_id].append(row)
        return found

    async def delete_before(self, runner: str, before: datetime, *, keep: Sequence[str] = ()) -> int:
        """Delete ``runner``'s closed attempts that started before ``before``, except those of jobs ``keep``."""
        statement = delete(JobAttemptRow).where(
            JobAttemptRow.runner == runner, JobAttemptRow.status != RUNNING, JobAttemptRow.started_at < before
        )
        if keep:
            statement = statement.where(JobAttemptRow.job_id.not_in(list(keep)))
        return await execute_rowcount(self.session, statement.execution_options(synchronize_session=False))
