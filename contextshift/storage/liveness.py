"""Crash recovery (N5, A3, C10): each started ``Database`` is a service instance with a heartbeat.

An instance has a row in ``instances`` and renews it every ``interval`` seconds (default 10); with it, it
renews the compaction leases and job claims it holds, so those expire ``expiry`` seconds (default 30) after
the instance stops beating. Whichever instance beats next after that (every instance checks on every beat,
and once on start) finds the dead one and cleans up after it, in one transaction:

- its prepared audits are closed as ``failed`` / ``GENERATION_INTERRUPTED`` (A3);
- its running compaction logs are closed as ``failed`` / ``COMPACTION_INTERRUPTED`` (C12);
- its chats' compaction leases are released, and its running jobs go back to ``queued`` (V8);
- its running job attempts are closed as ``interrupted`` / ``JOB_INTERRUPTED``;
- its row is deleted.

On start, an instance also cleans up its own earlier life (the service keeps its id across a restart when
``CONTEXTSHIFT_INSTANCE_ID`` is set; give each instance its own) and what an older version left without an
owner. It never touches the work of another instance whose heartbeat is fresh. A dead instance's lease is
free within ``expiry + interval`` seconds (40 s by default), well under a minute.

Why heartbeats and not a PostgreSQL advisory lock: they work the same on SQLite (several processes may share
one file) and PostgreSQL, they need no database connection held open for the length of a pass (a pass
waits minutes on a summarizer), and the dead instance's logs and audits can be found and closed by id.
A session-bound lock frees the lease when the connection drops, but says nothing about which logs to close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from ..core.vocabulary import FAILED, INTERRUPTED, PREPARED, QUEUED, RUNNING
from .repositories._common import execute_rowcount
from .repositories.audits import GENERATION_INTERRUPTED
from .repositories.jobs import queued_sibling
from .tables import AuditRow, ChatRow, CompactionLogRow, InstanceRow, JobAttemptRow, JobRow
from .types import utcnow

log = logging.getLogger("contextshift.storage.liveness")

COMPACTION_INTERRUPTED = "COMPACTION_INTERRUPTED"
JOB_INTERRUPTED = "JOB_INTERRUPTED"
#: The heartbeat's period and expiry in seconds unless ``Database`` is given others
#: (``CONTEXTSHIFT_HEARTBEAT_SECONDS`` / ``CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS``, through ``Settings``).
DEFAULT_INTERVAL = 10.0
DEFAULT_EXPIRY = 30.0


@dataclass(frozen=True, slots=True)
class Recovered:
    """What one clean-up closed or freed."""

    audits: int = 0
    logs: int = 0
    leases: int = 0
    jobs: int = 0
    instances: int = 0
    attempts: int = 0

    def __bool__(self) -> bool:
        return any((self.audits, self.logs, self.leases, self.jobs, self.instances, self.attempts))


@dataclass(frozen=True, slots=True)
class _Orphans:
    """The rows a dead owner left: those of an instance not in ``live`` (``on_start``: ownerless ones of an older
    version too, those started before ``now - ownerless_age`` when given)."""

    session: AsyncSession
    live: Select[Any]
    now: datetime
    on_start: bool
    ownerless_age: timedelta | None

    def owned(self, column: Any, started: Any) -> Any:
        """The condition on an owner ``column`` (and a ``started`` time) that a row is orphaned."""
        dead = column.is_not(None) & column.not_in(self.live)
        if not self.on_start:
            return dead
        ownerless = column.is_(None)
        if self.ownerless_age is not None:
            ownerless = ownerless & (started < self.now - self.ownerless_age)
        return or_(dead, ownerless)

    async def close(self, row: Any, unfinished: str, started: Any, **values: Any) -> int:
        """Close the ``unfinished`` rows of ``row``'s table that a dead owner left."""
        return await execute_rowcount(
            self.session,
            update(row)
            .where(row.status == unfinished, self.owned(row.instance_id, started))
            .values(**values)
            .execution_options(synchronize_session=False),
        )


class InstanceRepository:
    """The ``instances`` table and the clean-up after dead instances (on one session)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def beat(self, instance_id: str, expiry: timedelta, *, role: str | None = None) -> None:
        """Renew the instance's heartbeat (registering it if it has no row) and every lease it holds."""
        now = utcnow()
        values: dict[str, Any] = {"heartbeat_at": now}
        if role is not None:
            values["role"] = role
        renewed = await execute_rowcount(
            self.session,
            update(InstanceRow)
            .where(InstanceRow.id == instance_id)
            .values(**values)
            .execution_options(synchronize_session=False),
        )
        if renewed == 0:
            self.session.add(InstanceRow(id=instance_id, started_at=now, heartbeat_at=now, role=role))
            await self.session.flush()
        await self.session.execute(
            update(ChatRow)
            .where(ChatRow.compaction_lease_owner == instance_id, ChatRow.compaction_lease_until.is_not(None))
            .values(compaction_lease_until=now + expiry, updated_at=ChatRow.updated_at)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(
            update(JobRow)
            .where(JobRow.instance_id == instance_id, JobRow.status == RUNNING)
            .values(lease_until=now + expiry, updated_at=JobRow.updated_at)
            .execution_options(synchronize_session=False)
        )

    async def leave(self, instance_id: str) -> None:
        """A clean stop: the instance's row goes (what it left unfinished is then anyone's to close)."""
        await self.session.execute(delete(InstanceRow).where(InstanceRow.id == instance_id))

    def _live(self, expiry: timedelta, *, but: str | None) -> Select[Any]:
        query = select(InstanceRow.id).where(InstanceRow.heartbeat_at >= utcnow() - expiry)
        if but is not None:
            query = query.where(InstanceRow.id != but)
        return query

    async def recover(
        self, instance_id: str, expiry: timedelta, *, on_start: bool = False, ownerless_age: timedelta | None = None
    ) -> Recovered:
        """Close and free what dead instances left (``on_start``: this instance's own earlier life too, and
        ownerless rows of an older version, those older than ``ownerless_age`` when given)."""
        now = utcnow()
        live = self._live(expiry, but=instance_id if on_start else None)
        orphans = _Orphans(self.session, live, now, on_start=on_start, ownerless_age=ownerless_age)
        audits = await orphans.close(
            AuditRow,
            PREPARED,
            AuditRow.created_at,
            status=FAILED,
            error_code=GENERATION_INTERRUPTED,
            finished_at=now,
        )
        logs = await orphans.close(
            CompactionLogRow,
            RUNNING,
            CompactionLogRow.started_at,
            status=FAILED,
            error_code=COMPACTION_INTERRUPTED,
            completed_at=now,
        )
        # An expired lease is free anyway; a dead instance's is freed at once (and this instance's own, on start).
        # The dead are read once, and the same ids are freed and deleted: under READ COMMITTED each statement sees
        # the commits before it, so an instance found dead only by the delete would leave its lease held.
        dead = list(
            await self.session.scalars(
                select(InstanceRow.id).where(InstanceRow.heartbeat_at < now - expiry, InstanceRow.id != instance_id)
            )
        )
        leases = await self._free_leases(dead, instance_id if on_start else None)
        jobs = await self._requeue_jobs(orphans)
        attempts = await orphans.close(
            JobAttemptRow,
            RUNNING,
            JobAttemptRow.started_at,
            status=INTERRUPTED,
            error_code=JOB_INTERRUPTED,
            error="The instance running this attempt stopped before it ended.",
            finished_at=now,
        )
        gone = await execute_rowcount(
            self.session,
            delete(InstanceRow)
            .where(InstanceRow.id.in_(dead), InstanceRow.heartbeat_at < now - expiry)
            .execution_options(synchronize_session=False),
        )
        return Recovered(audits, logs, leases, jobs, gone, attempts)

    async def _free_leases(self, dead: list[str], own: str | None) -> int:
        """Release the compaction leases the ``dead`` instances hold (and this instance's ``own``, on start)."""
        lease_held: ColumnElement[bool] = ChatRow.compaction_lease_owner.in_(dead)
        if own is not None:
            lease_held = lease_held | (ChatRow.compaction_lease_owner == own)
        return await execute_rowcount(
            self.session,
            update(ChatRow)
            .where(lease_held)
            .values(compaction_lease_owner=None, compaction_lease_until=None, updated_at=ChatRow.updated_at)
            .execution_options(synchronize_session=False),
        )

    async def _requeue_jobs(self, orphans: _Orphans) -> int:
        """A job whose runner died runs again (its next attempt), unless a copy of it is queued meanwhile: then
        that copy does the work, and the interrupted one ends failed (one queued job per lock)."""
        now = orphans.now
        superseded = await execute_rowcount(
            self.session,
            update(JobRow)
            .where(JobRow.status == RUNNING, orphans.owned(JobRow.instance_id, JobRow.updated_at), queued_sibling())
            .values(status=FAILED, lease_until=None, instance_id=None, finished_at=now)
            .execution_options(synchronize_session=False),
        )
        return superseded + await orphans.close(
            JobRow, RUNNING, JobRow.updated_at, status=QUEUED, run_after=now, lease_until=None, instance_id=None
        )

    async def live(self, expiry: timedelta) -> list[InstanceRow]:
        """The instances whose heartbeat is fresh, most recently started first."""
        query = (
            select(InstanceRow)
            .where(InstanceRow.heartbeat_at >= utcnow() - expiry)
            .order_by(InstanceRow.started_at.desc(), InstanceRow.id)
        )
        return list(await self.session.scalars(query))

    async def heartbeat_of(self, instance_id: str) -> datetime | None:
        row = await self.session.get(InstanceRow, instance_id, populate_existing=True)
        return None if row is None else row.heartbeat_at


class Heartbeat:
    """The instance's beat: a task renewing its row and leases every ``interval``, cleaning up after the dead.

    ``sessions`` opens one transaction (``Database.session``)."""

    def __init__(
        self,
        sessions: Any,
        instance_id: str,
        *,
        interval: float,
        expiry: float,
        ownerless_age: timedelta | None = None,
    ) -> None:
        if not 0 < interval < expiry:
            raise ValueError("the heartbeat interval must be positive and shorter than its expiry")
        self.sessions = sessions
        self.instance_id = instance_id
        self.interval = interval
        self.expiry = timedelta(seconds=expiry)
        self.ownerless_age = ownerless_age
        #: V8: what the instance does (``api``, ``api+jobs``, ``worker``), shown by ``/healthz``; set before start.
        self.role: str | None = None
        self.beats = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Recovered:
        """Register, clean up after this instance's earlier life and the dead, and start beating."""
        async with self.sessions() as session:
            repo = InstanceRepository(session)
            await repo.beat(self.instance_id, self.expiry, role=self.role)
            recovered = await repo.recover(
                self.instance_id, self.expiry, on_start=True, ownerless_age=self.ownerless_age
            )
        if recovered:
            log.info("instance %s started and cleaned up %s", self.instance_id, recovered)
        self._task = asyncio.create_task(self._loop(), name=f"contextshift-heartbeat-{self.instance_id}")
        return recovered

    async def beat(self) -> Recovered:
        """One beat now: renew, then clean up after instances whose heartbeat stopped."""
        async with self.sessions() as session:
            repo = InstanceRepository(session)
            await repo.beat(self.instance_id, self.expiry, role=self.role)
            recovered = await repo.recover(self.instance_id, self.expiry)
        self.beats += 1
        if recovered:
            log.warning("cleaned up after dead instance(s): %s", recovered)
        return recovered

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.beat()
            except Exception as error:  # a database hiccup must not stop the beat for good
                log.warning("heartbeat of instance %s failed (%s)", self.instance_id, type(error).__name__)

    async def stop(self) -> None:
        """Stop beating and leave (a clean stop)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            with contextlib.suppress(Exception):
                async with self.sessions() as session:
                    await InstanceRepository(session).leave(self.instance_id)
