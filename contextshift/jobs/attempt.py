"""One attempt at a job, the same for both runners: recorded in ``job_attempts`` and logged as structured lines.

The runner decides what follows from the result (done, again after ``retry_in`` seconds, or failed); the record
keeps each attempt's error code and message, which ``GET /api/v2/jobs`` shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.vocabulary import COMPLETED, FAILED, INTERRUPTED
from ..storage import Repositories
from ..storage.liveness import JOB_INTERRUPTED
from .definitions import Job, JobContext, describe, retryable

log = logging.getLogger("contextshift.jobs")


@dataclass(frozen=True, slots=True)
class Attempted:
    """What an attempt came to: ``ok``, or its error and when to try again (``retry_in`` seconds; None: never)."""

    ok: bool
    error_code: str | None = None
    retry_in: float | None = None


async def run_attempt(
    job: Job, context: JobContext, args: Mapping[str, Any], *, runner: str, job_id: str, attempt: int
) -> Attempted:
    """Run ``job`` once as attempt ``attempt`` (1-based) of job ``job_id``; a cancellation is recorded as an
    interruption and goes on (the runner hands the job back)."""
    fields = {"runner": runner, "job_id": job_id, "task": job.name, "attempt": attempt}
    async with context.db.session() as session:
        record = await Repositories(session).job_attempts.start(
            runner=runner, job_id=job_id, task=job.name, attempt=attempt
        )
    log.info("job %s (%s) attempt %d started", job_id, job.name, attempt, extra={"event": "job_started", **fields})
    started = time.monotonic()
    try:
        await job.run(context, args)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):  # best effort: a dead instance's attempt is closed by liveness anyway
                async with context.db.session() as session:
                    await Repositories(session).job_attempts.finish(
                        record.id, INTERRUPTED, error_code=JOB_INTERRUPTED, error="The runner stopped this attempt."
                    )
        log.warning(
            "job %s (%s) attempt %d interrupted",
            job_id,
            job.name,
            attempt,
            extra={"event": "job_interrupted", "error_code": JOB_INTERRUPTED, **fields},
        )
        raise
    except Exception as error:
        code, message = describe(error)
        retry_in = job.backoff.delay(attempt) if retryable(error) else None
        async with context.db.session() as session:
            await Repositories(session).job_attempts.finish(record.id, FAILED, error_code=code, error=message)
        log.warning(
            "job %s (%s) attempt %d failed: %s%s",
            job_id,
            job.name,
            attempt,
            code,
            f"; again in {retry_in:g} s" if retry_in is not None else "; no more attempts",
            extra={
                "event": "job_failed",
                "error_code": code,
                "retry_in": retry_in,
                "duration_ms": round((time.monotonic() - started) * 1000),
                **fields,
            },
        )
        return Attempted(False, code, retry_in)
    async with context.db.session() as session:
        await Repositories(session).job_attempts.finish(record.id, COMPLETED)
    log.info(
        "job %s (%s) attempt %d ok",
        job_id,
        job.name,
        attempt,
        extra={"event": "job_ok", "duration_ms": round((time.monotonic() - started) * 1000), **fields},
    )
    return Attempted(True)
