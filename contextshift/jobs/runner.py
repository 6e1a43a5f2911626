"""The runner interface (V8) and the choice of runner: the job engine on PostgreSQL, the embedded runner on SQLite.

Either runner queues the jobs of ``definitions`` and, with ``run_jobs``, runs them in this process: plain
``contextshift serve`` does, ``serve --no-jobs`` only queues, and ``contextshift worker`` only runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ..service.compaction import Compactor
from ..storage import Database
from .definitions import Job
from .views import JobView


class JobRunner(Protocol):
    """What the service and the worker use of a runner."""

    #: ``procrastinate`` or ``local``.
    kind: str
    run_jobs: bool

    async def start(self) -> None:
        """Connect; set the compactor's queue; with ``run_jobs``, start running jobs."""

    async def stop(self) -> None:
        """Stop running jobs (letting running ones end as the runner's ``grace`` says) and disconnect."""

    async def wait(self) -> None:
        """Until the runner stops."""

    async def enqueue(self, job: Job, args: Mapping[str, Any]) -> bool:
        """Queue ``job``; False when a job of its lock waits already."""

    async def queue_compaction(self, chat_id: str) -> bool:
        """Queue a background compaction pass of the chat (``Compactor.queue``)."""

    async def delete_ended(self, before: datetime) -> int:
        """Delete the records of jobs that ended before ``before``."""

    async def listing(self, statuses: Sequence[str], *, limit: int, offset: int = 0) -> tuple[list[JobView], bool]:
        """Jobs in ``statuses``, newest first, and whether more exist."""


def make_runner(
    db: Database, compactor: Compactor, *, run_jobs: bool = True, concurrency: int = 1, grace: float | None = 0.0
) -> JobRunner:
    """The job engine for a PostgreSQL database, the embedded runner for SQLite."""
    if db.dialect == "postgresql":
        from .engine import EngineRunner  # imports procrastinate and psycopg: only when they are used

        return EngineRunner(db, compactor, run_jobs=run_jobs, concurrency=concurrency, grace=grace)
    from .local import LocalRunner

    return LocalRunner(db, compactor, run_jobs=run_jobs, concurrency=concurrency, grace=grace)
