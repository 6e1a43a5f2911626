"""Background jobs (V8), for admins: ``GET /api/v2/jobs`` lists queued, running and failed jobs, each with its
attempts and the code and message of every attempt that failed, whichever runner holds them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ...core.vocabulary import FAILED, QUEUED, RUNNING, FailedAttemptStatus, JobStatus
from ...jobs import JobView
from ..auth import Admin
from ..deps import Jobs
from ..errors import error_responses

router = APIRouter(tags=["jobs"], responses=error_responses(400, 403, 422, 500))

Limit = Annotated[int, Query(ge=1, le=200)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]
DEFAULT_STATUSES: list[JobStatus] = [QUEUED, RUNNING, FAILED]


class JobAttemptOut(BaseModel):
    attempt: int = Field(description="1 for the first run")
    status: FailedAttemptStatus = Field(description="``interrupted``: its worker stopped during it")
    error_code: str | None
    error: str | None = Field(description="contextshift's own message (never a provider's reply)")
    started_at: datetime
    finished_at: datetime | None


class JobOut(BaseModel):
    id: str
    task: str = Field(description="What the job does, e.g. ``compaction.pass`` or ``cleanup.proxy_audits``")
    status: JobStatus
    attempts: int = Field(description="Attempts started so far")
    lock: str | None = Field(description="What it works on (``chat:<id>``): one job of a lock runs at a time")
    args: dict[str, Any]
    queued_at: datetime | None
    run_after: datetime | None = Field(description="A queued job's earliest start (a retry waits its backoff)")
    errors: list[JobAttemptOut] = Field(description="The attempts that failed or were interrupted, first first")


class JobList(BaseModel):
    runner: Literal["procrastinate", "local"]
    jobs: list[JobOut]
    has_more: bool


def _job(view: JobView) -> JobOut:
    return JobOut(
        id=view.id,
        task=view.task,
        status=view.status,  # type: ignore[arg-type]
        attempts=view.attempts,
        lock=view.lock,
        args=view.args,
        queued_at=view.queued_at,
        run_after=view.run_after,
        errors=[
            JobAttemptOut(
                attempt=e.attempt,
                status=e.status,  # type: ignore[arg-type]
                error_code=e.error_code,
                error=e.error,
                started_at=e.started_at,
                finished_at=e.finished_at,
            )
            for e in view.errors
        ],
    )


@router.get(
    "/jobs",
    response_model=JobList,
    description="Background jobs, newest first (admins only). `status` may be repeated; by default queued, "
    "running and failed jobs are listed.",
)
async def list_jobs(
    _admin: Admin,
    runner: Jobs,
    status: Annotated[list[JobStatus] | None, Query()] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> dict[str, Any]:
    views, more = await runner.listing(status or DEFAULT_STATUSES, limit=limit, offset=offset)
    return {"runner": runner.kind, "jobs": [_job(v) for v in views], "has_more": more}
