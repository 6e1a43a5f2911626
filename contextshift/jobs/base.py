"""What both runners hold and do alike: the settings, the jobs they know, the context a job runs with."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..service.compaction import Compactor
from ..storage import Database
from .definitions import COMPACTION_PASS, Job, JobContext


class RunnerBase:
    """``run_jobs``: run jobs in this process (else only queue them); ``concurrency``: jobs run at once; ``grace``:
    on stop, seconds to let running jobs end before they are interrupted (None: wait for them); ``retention``: how
    long ended jobs are kept; ``jobs``: the jobs known, by name (``definitions.JOBS``; a test may add its own);
    ``periodic``: queue the periodic jobs on their schedule (a test may leave them to itself)."""

    def __init__(
        self,
        db: Database,
        compactor: Compactor,
        *,
        run_jobs: bool,
        concurrency: int,
        grace: float | None,
        retention: timedelta,
        jobs: Mapping[str, Job],
        periodic: bool,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.db = db
        self.compactor = compactor
        self.run_jobs = run_jobs
        self.concurrency = concurrency
        self.grace = grace
        self.jobs = dict(jobs)
        self.periodic = periodic
        self.context = JobContext(db, compactor, ended=self, retention=retention)

    async def enqueue(self, job: Job, args: Mapping[str, Any]) -> bool:
        """Queue ``job``; False when a job of its lock waits already (each runner's own)."""
        raise NotImplementedError

    async def delete_ended(self, before: datetime) -> int:
        """Delete the records of jobs that ended before ``before`` (each runner's own)."""
        raise NotImplementedError

    async def queue_compaction(self, chat_id: str) -> bool:
        """A background pass of the chat (False when one waits already): what ``create_app`` gives its
        ``Compactor`` as ``queue``."""
        return await self.enqueue(COMPACTION_PASS, {"chat_id": chat_id})
