"""What ``GET /api/v2/jobs`` shows of a job, whichever runner holds it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.vocabulary import FAILED_ATTEMPT_STATUSES
from ..storage.tables import JobAttemptRow


@dataclass(frozen=True, slots=True)
class AttemptView:
    attempt: int
    status: str
    error_code: str | None
    error: str | None
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class JobView:
    """A job: ``status`` is ``queued``, ``running``, ``completed`` or ``failed``; ``attempts`` counts the attempts
    started (each in ``errors`` when it failed or was interrupted, with its code and message)."""

    id: str
    task: str
    status: str
    attempts: int
    lock: str | None
    args: dict[str, Any]
    queued_at: datetime | None
    run_after: datetime | None
    errors: list[AttemptView] = field(default_factory=list)


def attempt_views(rows: Sequence[JobAttemptRow]) -> list[AttemptView]:
    """The attempts that did not succeed, first attempt first."""
    return [
        AttemptView(row.attempt, row.status, row.error_code, row.error, row.started_at, row.finished_at)
        for row in rows
        if row.status in FAILED_ATTEMPT_STATUSES
    ]
