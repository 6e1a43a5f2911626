"""V8: both job runners run the same definitions by the same rules, on a real database each.

SQLite gets the embedded runner and PostgreSQL the job engine (``make_runner``'s choice); every test here runs on
both. The jobs are real ``Job`` definitions whose work a test controls (fail so often, wait for an event); waits
are bounded by counting polls, never by the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text, update

from contextshift.jobs import COMPACTION_PASS, JOBS, Backoff, Job, JobContext, JobError, JobRunner, JobView
from contextshift.jobs.definitions import DEFAULT_RETENTION, JOBS_CLEANUP, PROXY_AUDITS_CLEANUP, SESSIONS_CLEANUP
from contextshift.jobs.engine import EngineRunner
from contextshift.jobs.local import LocalRunner
from contextshift.service.accounts import SESSION_LIFETIME
from contextshift.service.compaction import Compactor
from contextshift.service.errors import Refusal, ServiceError
from contextshift.storage import Database, Repositories
from contextshift.storage.tables import ApiTokenRow, JobAttemptRow
from contextshift.storage.types import utcnow
from tests.storage.seed import seed_chat

#: Polls of 0.05 s: the bound on every wait here.
POLLS = 1200
NO_WAIT = Backoff(max_attempts=3, base=0.0)


class Broken(JobError):
    code = "TEST_BROKEN"

    def __init__(self, attempt: int) -> None:
        super().__init__(f"Broken on attempt {attempt}.", attempt=attempt)


@dataclass
class Work:
    """What the test jobs did: runs per key, and how many ran at once at most."""

    runs: dict[str, int] = field(default_factory=dict)
    running: int = 0
    most_at_once: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def job(self, name: str, body: Callable[[Mapping[str, Any], int], Awaitable[None]], **options: Any) -> Job:
        async def run(_context: JobContext, args: Mapping[str, Any]) -> None:
            key = str(args.get("key", name))
            self.runs[key] = self.runs.get(key, 0) + 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            try:
                await body(args, self.runs[key])
            finally:
                self.running -= 1

        return Job(name, run, **options)


@asynccontextmanager
async def running(
    db: Database, *jobs: Job, concurrency: int = 1, retention: timedelta = DEFAULT_RETENTION
) -> AsyncIterator[JobRunner]:
    """The backend's runner with ``jobs`` besides the real ones, running jobs in this process."""
    known = {**JOBS, **{job.name: job for job in jobs}}
    compactor = Compactor(db)
    # the tests queue the periodic jobs themselves
    options: dict[str, Any] = {"jobs": known, "concurrency": concurrency, "retention": retention, "periodic": False}
    runner: JobRunner
    if db.dialect == "postgresql":
        runner = EngineRunner(db, compactor, fetch_interval=0.05, **options)
    else:
        runner = LocalRunner(db, compactor, poll_interval=0.05, **options)
    await runner.start()
    try:
        yield runner
    finally:
        await runner.stop()


async def until(probe: Callable[[], Awaitable[Any]]) -> Any:
    for _ in range(POLLS):
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"still not so after {POLLS} polls")


async def ended(runner: JobRunner, task: str, count: int = 1) -> list[JobView]:
    async def probe() -> list[JobView] | None:
        jobs = [j for j in (await runner.listing(["completed", "failed"], limit=50))[0] if j.task == task]
        return jobs if len(jobs) >= count else None

    found: list[JobView] = await until(probe)
    return found


async def test_a_failing_job_is_retried_up_to_its_limit_and_each_attempt_error_is_kept(db: Database) -> None:
    work = Work()

    async def fail(_args: Mapping[str, Any], attempt: int) -> None:
        raise Broken(attempt)

    flaky = work.job("test.flaky", fail, backoff=NO_WAIT)
    async with running(db, flaky) as runner:
        assert await runner.enqueue(flaky, {}) is True
        (job,) = await ended(runner, "test.flaky")
    assert (job.status, job.attempts, work.runs) == ("failed", 3, {"test.flaky": 3})
    assert [(e.attempt, e.status, e.error_code, e.error) for e in job.errors] == [
        (1, "failed", "TEST_BROKEN", "Broken on attempt 1."),
        (2, "failed", "TEST_BROKEN", "Broken on attempt 2."),
        (3, "failed", "TEST_BROKEN", "Broken on attempt 3."),
    ]


async def test_a_job_that_fails_once_succeeds_on_its_second_attempt(db: Database) -> None:
    work = Work()

    async def once(_args: Mapping[str, Any], attempt: int) -> None:
        if attempt == 1:
            raise RuntimeError("upstream said sk-SECRET-1 in its body")

    job_def = work.job("test.once", once, backoff=NO_WAIT)
    async with running(db, job_def) as runner:
        await runner.enqueue(job_def, {})
        (job,) = await ended(runner, "test.once")
    assert (job.status, job.attempts) == ("completed", 2)
    # an error that is not contextshift's own is named by its type: its text may quote a provider (N2)
    assert [(e.attempt, e.error_code, e.error) for e in job.errors] == [
        (1, "JOB_ERROR", "The job raised RuntimeError.")
    ]


async def test_a_refusal_of_the_service_is_not_retried(db: Database) -> None:
    work = Work()

    async def refuse(_args: Mapping[str, Any], _attempt: int) -> None:
        raise ServiceError(Refusal.UNPROCESSABLE, "PROVIDER_HOST_NOT_ALLOWED", "Not that host.")

    job_def = work.job("test.refused", refuse, backoff=NO_WAIT)
    async with running(db, job_def) as runner:
        await runner.enqueue(job_def, {})
        (job,) = await ended(runner, "test.refused")
    assert (job.status, job.attempts, [e.error_code for e in job.errors]) == (
        "failed",
        1,
        ["PROVIDER_HOST_NOT_ALLOWED"],
    )


async def test_one_job_of_a_lock_runs_and_at_most_one_more_waits(db: Database) -> None:
    work = Work()

    async def hold(_args: Mapping[str, Any], _attempt: int) -> None:
        work.started.set()
        await work.release.wait()

    chat_job = work.job("test.chat", hold, lock=lambda args: f"chat:{args['key']}")
    async with running(db, chat_job, concurrency=2) as runner:
        assert await runner.enqueue(chat_job, {"key": "c1"}) is True
        await until(lambda: _true(work.started.is_set()))
        assert await runner.enqueue(chat_job, {"key": "c1"}) is True  # one waits while one runs
        assert await runner.enqueue(chat_job, {"key": "c1"}) is False  # and no more
        assert await runner.enqueue(chat_job, {"key": "c2"}) is True  # another chat's is its own
        await until(lambda: _true(work.runs.get("c2") == 1))
        work.release.set()
        jobs = await ended(runner, "test.chat", 3)
    assert sorted(j.status for j in jobs) == ["completed"] * 3
    assert work.runs == {"c1": 2, "c2": 1}
    assert work.most_at_once == 2  # c1 and c2 at once; never the two of c1


async def test_a_failed_job_whose_copy_already_waits_ends_and_the_copy_runs(db: Database) -> None:
    work = Work()

    async def first_fails(_args: Mapping[str, Any], attempt: int) -> None:
        if work.runs["c1"] == 1:
            work.started.set()
            await work.release.wait()
            raise Broken(attempt)

    chat_job = work.job("test.superseded", first_fails, lock=lambda args: f"chat:{args['key']}", backoff=NO_WAIT)
    async with running(db, chat_job) as runner:
        await runner.enqueue(chat_job, {"key": "c1"})
        await until(lambda: _true(work.started.is_set()))
        assert await runner.enqueue(chat_job, {"key": "c1"}) is True
        work.release.set()
        jobs = await ended(runner, "test.superseded", 2)
        assert (await runner.listing(["queued", "running"], limit=10))[0] == []
    by_status = {j.status: j for j in jobs}
    assert set(by_status) == {"failed", "completed"}
    assert (by_status["failed"].attempts, [e.error_code for e in by_status["failed"].errors]) == (1, ["TEST_BROKEN"])
    assert (by_status["completed"].attempts, by_status["completed"].errors) == (1, [])
    assert work.runs == {"c1": 2}


@given(
    attempts=st.integers(1, 12),
    base=st.floats(0, 60, allow_nan=False),
    factor=st.floats(1, 4, allow_nan=False),
    cap=st.floats(0, 600, allow_nan=False),
)
def test_a_backoff_never_shrinks_never_passes_its_cap_and_ends_at_its_limit(
    attempts: int, base: float, factor: float, cap: float
) -> None:
    backoff = Backoff(max_attempts=attempts, base=base, factor=factor, cap=cap)
    delays = [backoff.delay(n) for n in range(1, attempts + 3)]
    waits = [d for d in delays if d is not None]
    assert len(waits) == attempts - 1 and delays[attempts - 1 :] == [None, None, None]
    assert all(0 <= w <= cap for w in waits) and waits == sorted(waits)


def test_the_backoff_doubles_from_its_base_up_to_its_cap_and_stops_at_the_limit() -> None:
    backoff = Backoff(max_attempts=6, base=2.0, factor=2.0, cap=10.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 10.0, 10.0, None]
    assert [Backoff().delay(n) for n in range(1, 6)] == [2.0, 4.0, 8.0, 16.0, None]
    with pytest.raises(ValueError):
        Backoff(max_attempts=0)


async def _true(value: bool) -> bool:
    return value


async def test_the_cleanup_jobs_delete_expired_audits_sessions_and_ended_job_records(db: Database) -> None:
    async with db.session() as session:
        repos = Repositories(session)
        alice = (await repos.users.create(name="alice")).id
        for audit_id, ttl in (("gone", timedelta(0)), ("kept", timedelta(days=1))):
            await repos.proxy_audits.prepare(
                audit_id, user_id=alice, model="m", payload={"entries": []}, excluded_count=0, ttl=ttl
            )
        old = await repos.tokens.issue(alice, name="browser", kind="session")
        fresh = await repos.tokens.issue(alice, name="browser", kind="session")
        await session.execute(
            update(ApiTokenRow)
            .where(ApiTokenRow.id == old.token.id)
            .values(created_at=utcnow() - SESSION_LIFETIME - timedelta(minutes=1))
        )
    work = Work()

    async def quick(_args: Mapping[str, Any], _attempt: int) -> None:
        return None

    done = work.job("test.quick", quick)
    async with running(db, done, retention=timedelta(0)) as runner:
        await runner.enqueue(done, {})
        await ended(runner, "test.quick")
        for cleanup in (PROXY_AUDITS_CLEANUP, SESSIONS_CLEANUP):
            await runner.enqueue(cleanup, {})
            (job,) = await ended(runner, cleanup.name)
            assert (job.status, job.attempts) == ("completed", 1)
        await runner.enqueue(JOBS_CLEANUP, {})  # the retention is 0: every ended record goes

        async def only_the_cleanup_left() -> bool:
            jobs = (await runner.listing(["completed", "failed"], limit=50))[0]
            return [j.task for j in jobs] == ["cleanup.jobs"]

        await until(only_the_cleanup_left)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.proxy_audits.get("gone", user_id=alice) is None
        assert await repos.proxy_audits.get("kept", user_id=alice) is not None
        tokens = set(await session.scalars(select(ApiTokenRow.id).where(ApiTokenRow.user_id == alice)))
        assert tokens == {fresh.token.id}
        runners = set(await session.scalars(select(JobAttemptRow.task)))
        assert runners == {"cleanup.jobs"}  # the ended jobs' attempts went with them


async def test_a_job_whose_worker_stopped_beating_is_queued_again_or_ended_after_its_last_attempt(
    db: Database,
) -> None:
    if db.dialect != "postgresql":
        pytest.skip("the embedded runner's rescue is the instances' clean-up (tests/storage/test_liveness.py)")
    work = Work()

    async def quick(_args: Mapping[str, Any], _attempt: int) -> None:
        return None

    job_def = work.job("test.rescued", quick, lock=lambda args: f"chat:{args['key']}", backoff=NO_WAIT)
    runner = EngineRunner(db, Compactor(db), run_jobs=False, jobs={**JOBS, job_def.name: job_def}, periodic=False)
    await runner.start()
    try:
        await runner.enqueue(job_def, {"key": "c1"})
        await runner.enqueue(job_def, {"key": "c2"})
        async with db.session() as session:  # what a kill -9 leaves: jobs "doing" for a worker gone silent
            dead = (
                await session.execute(
                    text(
                        "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '1 hour') "
                        "RETURNING id"
                    )
                )
            ).scalar_one()
            await session.execute(
                text(
                    "UPDATE procrastinate_jobs SET status = 'doing', worker_id = :dead, "
                    "attempts = CASE WHEN args->>'key' = 'c2' THEN 2 ELSE 0 END"
                ),
                {"dead": dead},
            )
        assert await runner.rescue() == 2
        assert await runner.rescue() == 0  # nothing twice
        jobs = {j.args["key"]: j for j in (await runner.listing(["queued", "failed"], limit=10))[0]}
        assert (jobs["c1"].status, jobs["c2"].status) == ("queued", "failed")  # c2 had had its 3 attempts
    finally:
        await runner.stop()


async def test_the_embedded_runner_queues_its_periodic_jobs_when_it_starts(db: Database) -> None:
    runner = LocalRunner(db, Compactor(db), poll_interval=0.05)
    await runner.start()
    try:
        jobs = await ended(runner, "cleanup.jobs")
        names = {j.task for j in (await runner.listing(["completed"], limit=10))[0]}
    finally:
        await runner.stop()
    assert jobs[0].status == "completed"
    assert names == {"cleanup.proxy_audits", "cleanup.sessions", "cleanup.jobs"}


async def test_a_compaction_pass_waits_out_a_busy_chat_and_a_deleted_chat_needs_none(db: Database) -> None:
    seeded = await seed_chat(db)
    gone = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.compaction.acquire_lease(seeded.chat_id, "another-instance", timedelta(hours=1))
        assert await repos.chats.delete(gone.chat_id)
    compaction = replace(COMPACTION_PASS, backoff=NO_WAIT)  # the real definition, without the waits
    async with running(db, compaction) as runner:
        assert await runner.enqueue(compaction, {"chat_id": seeded.chat_id})
        assert await runner.enqueue(compaction, {"chat_id": gone.chat_id})
        jobs = {j.args["chat_id"]: j for j in await ended(runner, "compaction.pass", 2)}
    busy, deleted = jobs[seeded.chat_id], jobs[gone.chat_id]
    assert (busy.status, busy.attempts, busy.lock) == ("failed", 3, f"chat:{seeded.chat_id}")
    assert [e.error_code for e in busy.errors] == ["JOB_CHAT_BUSY"] * 3
    assert (deleted.status, deleted.attempts, deleted.errors) == ("completed", 1, [])


async def test_the_engine_keeps_an_ended_periodic_job_its_schedule_still_names(db: Database) -> None:
    if db.dialect != "postgresql":
        pytest.skip("the engine's periodic schedule is PostgreSQL's")
    work = Work()

    async def quick(_args: Mapping[str, Any], _attempt: int) -> None:
        return None

    done = work.job("test.periodic", quick)
    async with running(db, done, retention=timedelta(0)) as runner:
        await runner.enqueue(done, {})
        (ended_job,) = await ended(runner, "test.periodic")
        async with db.session() as session:  # what the engine's periodic deferrer keeps: its latest defer
            await session.execute(
                text(
                    "INSERT INTO procrastinate_periodic_defers (task_name, periodic_id, defer_timestamp, job_id) "
                    "VALUES ('test.periodic', '', 1, :job)"
                ),
                {"job": int(ended_job.id)},
            )
        await runner.enqueue(JOBS_CLEANUP, {})
        (cleanup,) = await ended(runner, "cleanup.jobs")
        kept = [j.task for j in (await runner.listing(["completed"], limit=10))[0]]
    assert (cleanup.status, cleanup.errors) == ("completed", [])
    assert kept == ["cleanup.jobs", "test.periodic"]
