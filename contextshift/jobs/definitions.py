"""The background jobs (V8), each defined once: what it does, its lock, its retries and its schedule.

Both runners run these same definitions: the job engine on PostgreSQL (``engine.EngineRunner``) and the embedded
runner on SQLite (``local.LocalRunner``). A definition knows nothing of either; ``attempt.run_attempt`` runs one
attempt of it for both and records it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..core.errors import ContextShiftError
from ..core.vocabulary import RUNNING
from ..service.accounts import SESSION_LIFETIME
from ..service.compaction import Compactor
from ..service.errors import Refusal, ServiceError
from ..storage import Database, Repositories
from ..storage.types import utcnow

log = logging.getLogger("contextshift.jobs")

#: How long ended jobs (and their attempts) are kept for ``GET /api/v2/jobs`` before ``cleanup.jobs`` deletes them.
DEFAULT_RETENTION = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retries with exponential backoff, up to a limit.

    Attempt ``n`` (1-based) that fails waits ``base * factor ** (n - 1)`` seconds, at most ``cap``, before
    attempt ``n + 1``; after ``max_attempts`` attempts the job has failed. With the defaults (5, 2 s, ×2):
    2, 4, 8 and 16 s between the five attempts, 30 s in all.
    """

    max_attempts: int = 5
    base: float = 2.0
    factor: float = 2.0
    cap: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base < 0 or self.factor < 1 or self.cap < 0:
            raise ValueError("a backoff needs max_attempts >= 1, base >= 0, factor >= 1 and cap >= 0")

    def delay(self, attempt: int) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None when it was the last one."""
        if attempt >= self.max_attempts:
            return None
        return float(min(self.cap, self.base * self.factor ** max(attempt - 1, 0)))


class JobError(ContextShiftError):
    """A job could not do its work this time; the attempt is retried (``retryable``) or the job fails."""

    code = "JOB_FAILED"
    retryable = True


class ChatBusy(JobError):
    """Another pass holds the chat's compaction lease (a turn's synchronous pass, or a dead instance's that
    expires on its own): the background pass runs again after the backoff."""

    code = "JOB_CHAT_BUSY"

    def __init__(self, chat_id: str) -> None:
        super().__init__("Another compaction pass of this chat is running; trying again later.", chat_id=chat_id)


class EndedJobs(Protocol):
    """The runner's own record of ended jobs (its table), which ``cleanup.jobs`` trims."""

    async def delete_ended(self, before: datetime) -> int: ...


@dataclass
class JobContext:
    """What a job may use: the database, the compactor and the runner's record of ended jobs."""

    db: Database
    compactor: Compactor
    ended: EndedJobs
    retention: timedelta = DEFAULT_RETENTION


JobFunction = Callable[[JobContext, Mapping[str, Any]], Awaitable[None]]


def _no_lock(_args: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Job:
    """One kind of background work.

    ``lock`` names what the job works on (``chat:<id>``): one job of a lock runs at a time, and at most one more
    waits. ``every_minutes``: a periodic job, queued that often by whichever runner is up (at most one copy
    waits: its lock is its name).
    """

    name: str
    run: JobFunction
    lock: Callable[[Mapping[str, Any]], str | None] = _no_lock
    backoff: Backoff = field(default_factory=Backoff)
    every_minutes: int | None = None

    def lock_of(self, args: Mapping[str, Any]) -> str | None:
        return self.name if self.every_minutes is not None else self.lock(args)

    @property
    def cron(self) -> str | None:
        """The schedule as a cron line (every N minutes; a whole number of hours past the hour)."""
        minutes = self.every_minutes
        if minutes is None:
            return None
        if minutes < 60:
            return f"*/{minutes} * * * *"
        return f"0 */{minutes // 60} * * *"


# -- the jobs ---------------------------------------------------------------------------------------------------


async def _compaction_pass(context: JobContext, args: Mapping[str, Any]) -> None:
    """C2: the background compaction of one chat (its passes, its log, its cooldown: ``Compactor.run``)."""
    chat_id = str(args["chat_id"])
    try:
        outcome = await context.compactor.run(chat_id, "background")
    except ServiceError as refused:
        if refused.kind is Refusal.NOT_FOUND:  # the chat (or its bot) was deleted meanwhile: nothing to do
            log.info("compaction of chat %s: %s; nothing to do", chat_id, refused.code)
            return
        raise
    if outcome.reason == RUNNING:
        raise ChatBusy(chat_id)


async def _expired_proxy_audits(context: JobContext, _args: Mapping[str, Any]) -> None:
    """V7: delete the endpoint's expired audits (reads never show them; this frees the space)."""
    async with context.db.session() as session:
        deleted = await Repositories(session).proxy_audits.delete_expired()
    if deleted:
        log.info("deleted %d expired endpoint audit(s)", deleted)


async def _expired_sessions(context: JobContext, _args: Mapping[str, Any]) -> None:
    """N2: delete browser sessions past their lifetime (they sign no one in already)."""
    async with context.db.session() as session:
        deleted = await Repositories(session).tokens.delete_sessions_before(utcnow() - SESSION_LIFETIME)
    if deleted:
        log.info("deleted %d expired browser session(s)", deleted)


async def _ended_jobs(context: JobContext, _args: Mapping[str, Any]) -> None:
    """V8: delete the records of jobs that ended longer than the retention ago, with their attempts."""
    deleted = await context.ended.delete_ended(utcnow() - context.retention)
    if deleted:
        log.info("deleted %d ended job record(s)", deleted)


COMPACTION_PASS = Job(
    "compaction.pass",
    _compaction_pass,
    lock=lambda args: f"chat:{args['chat_id']}",
)
PROXY_AUDITS_CLEANUP = Job("cleanup.proxy_audits", _expired_proxy_audits, every_minutes=5)
SESSIONS_CLEANUP = Job("cleanup.sessions", _expired_sessions, every_minutes=60)
JOBS_CLEANUP = Job("cleanup.jobs", _ended_jobs, every_minutes=60)

#: Every job, by name.
JOBS: dict[str, Job] = {
    job.name: job for job in (COMPACTION_PASS, PROXY_AUDITS_CLEANUP, SESSIONS_CLEANUP, JOBS_CLEANUP)
}


def describe(error: BaseException) -> tuple[str, str]:
    """An attempt's error as ``(code, message)``: our own code and words, never an upstream body (N2).

    contextshift's errors carry both; anything else is named by its type only (its text may quote a provider
    or hold SQL parameters).
    """
    if isinstance(error, ContextShiftError):
        return error.code, error.message
    return "JOB_ERROR", f"The job raised {type(error).__name__}."


def retryable(error: BaseException) -> bool:
    """A refusal of the service (a deleted bot's model, a disallowed provider host) will not change by waiting."""
    if isinstance(error, JobError):
        return error.retryable
    return not isinstance(error, ServiceError)
