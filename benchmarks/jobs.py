"""Benchmark: background compaction passes run by ``contextshift worker`` processes on PostgreSQL (V8), with 1 and 2
workers: passes a second, and the latency from a pass being queued to its start.

Run from the project root (needs ``CONTEXTSHIFT_TEST_POSTGRES_URL``, e.g. ``postgresql://postgres@127.0.0.1/test``):

    .venv/bin/python -m benchmarks.jobs           # full: 60 passes a burst, 20 latency samples -> results/jobs.md
    .venv/bin/python -m benchmarks.jobs --quick   # CI smoke: 8 passes a burst, 5 samples; writes nothing

What it does: on a new PostgreSQL database (dropped afterwards), chats of 20 messages each past half their
4,000-token window are written through the storage layer, with the fake OpenAI-compatible provider of
``tests/fakes`` as their summarizer (it answers each summarizer call at once, in this process, over a real socket).
Then, for 1 and for 2 real ``contextshift worker`` processes (concurrency 1 each, started and idle first):

- *burst*: one compaction pass queued for each of N chats at once (the job engine's ``defer``, as an API
  instance does after a turn); passes a second = N ÷ (last pass's end − first queueing);
- *latency*: one pass queued at a time, the next once it ended; enqueue-to-start = the attempt's start (the
  worker's clock) − the job's ``deferred`` event (the database's; same machine).

A pass is the whole job: the chat read, the summarizer call, validation, the summary committed, the compaction
log and the attempt record. Figures are printed and written, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from contextshift.jobs.engine import EngineRunner
from contextshift.service.compaction import Compactor
from contextshift.storage import Database, Repositories
from tests.fakes import FakeProvider, Reply

from .report import load_note, say
from .service import PG_ENV, machine, postgres_database

RESULTS = Path(__file__).resolve().parent / "results" / "jobs.md"
COMMAND = str(Path(sys.executable).with_name("contextshift"))
WORKERS = (1, 2)
SUMMARY = "The user and the helper counted words together; nothing else was decided."
#: Polls of 0.05 s: the bound on waiting for a worker to start or a burst to end (10 minutes).
POLLS = 12_000


@dataclass(frozen=True)
class Config:
    quick: bool
    burst: int
    samples: int


def config(quick: bool) -> Config:
    return Config(quick=True, burst=8, samples=5) if quick else Config(quick=False, burst=60, samples=20)


@dataclass
class Row:
    workers: int
    passes: int
    failed: int
    per_second: float
    latency_ms: list[float]

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latency_ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else 0.0


async def _chats(url: str, base_url: str, count: int, tag: str) -> list[str]:
    db = Database(url)
    await db.start()
    try:
        async with db.session() as session:
            repos = Repositories(session)
            provider = await repos.providers.create(
                name=f"fake-{tag}", kind="openai", base_url=base_url, api_key="sk-bench"
            )
            model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=4000)
            bot = await repos.bots.create(name=f"bench-{tag}", chat_model_id=model.id, response_reserve=200)
            chats = [await repos.chats.create(bot_id=bot.id) for _ in range(count)]
            history = [
                {
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": f"turn {n}: " + " ".join(f"word{n}x{i}" for i in range(30)),
                }
                for n in range(20)
            ]
            for chat in chats:
                await repos.messages.append_many(chat.id, history)
        return [chat.id for chat in chats]
    finally:
        await db.close()


class Workers:
    """``count`` worker processes on ``url``, started and ready (their ``worker_started`` line), then stopped."""

    def __init__(self, url: str, count: int, logs: Path, env: dict[str, str]) -> None:
        self.url, self.count, self.logs, self.env = url, count, logs, env
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Workers:
        for n in range(self.count):
            log = self.logs / f"worker-{self.count}-{n}.log"
            with log.open("wb") as out:
                self.processes.append(
                    subprocess.Popen(
                        [COMMAND, "worker", "--database", self.url],
                        env={**os.environ, **self.env},
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
            for _ in range(POLLS):
                if '"worker_started"' in log.read_text(errors="replace"):
                    break
                if self.processes[-1].poll() is not None:
                    raise RuntimeError(f"a worker exited:\n{log.read_text(errors='replace')}")
                time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


async def _ended(db: Database, first_id: int) -> tuple[int, int]:
    async with db.session(write=False) as session:
        row = (
            await session.execute(
                text(
                    "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed') "
                    "FROM procrastinate_jobs WHERE task_name = 'compaction.pass' AND id >= :first"
                ),
                {"first": first_id},
            )
        ).one()
    return int(row[0]), int(row[1])


async def _max_id(db: Database) -> int:
    async with db.session(write=False) as session:
        value = await session.scalar(text("SELECT coalesce(max(id), 0) FROM procrastinate_jobs"))
    return int(value or 0)


async def _burst(db: Database, runner: EngineRunner, chats: list[str]) -> tuple[int, int, float]:
    first = await _max_id(db) + 1
    for chat_id in chats:
        await runner.queue_compaction(chat_id)
    for _ in range(POLLS):
        ok, failed = await _ended(db, first)
        if ok + failed == len(chats):
            break
        await asyncio.sleep(0.05)
    return ok, failed, await _seconds(db, "max(a.finished_at) - min(e.at)", first, None)


async def _seconds(db: Database, interval: str, first: int, last: int | None) -> float:
    """``interval`` (over the jobs' ``deferred`` events ``e`` and attempts ``a``) of the passes ``first``..``last``."""
    async with db.session(write=False) as session:
        value = await session.scalar(
            text(
                f"SELECT extract(epoch FROM {interval}) FROM procrastinate_jobs j "
                "JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred' "
                "JOIN job_attempts a ON a.runner = 'procrastinate' AND a.job_id = CAST(j.id AS VARCHAR) "
                "WHERE j.task_name = 'compaction.pass' AND j.id BETWEEN :first AND :last"
            ),
            {"first": first, "last": last if last is not None else 2**62},
        )
    return float(value or 0.0)


async def _latencies(db: Database, runner: EngineRunner, chats: list[str]) -> list[float]:
    found = []
    for chat_id in chats:
        first = await _max_id(db) + 1
        await runner.queue_compaction(chat_id)
        for _ in range(POLLS):
            ok, failed = await _ended(db, first)
            if ok + failed:
                break
            await asyncio.sleep(0.01)
        found.append(await _seconds(db, "min(a.started_at) - min(e.at)", first, first) * 1000)
    return found


async def _measure(url: str, fake: FakeProvider, cfg: Config, logs: Path, env: dict[str, str]) -> list[Row]:
    rows = []
    for count in WORKERS:
        burst = await _chats(url, fake.base_url, cfg.burst, f"burst-{count}")
        single = await _chats(url, fake.base_url, cfg.samples, f"single-{count}")
        fake.script(*[Reply(SUMMARY)] * ((cfg.burst + cfg.samples) * 4))
        db = Database(url)
        await db.start()
        runner = EngineRunner(db, Compactor(db), run_jobs=False, periodic=False)
        await runner.start()
        try:
            with Workers(url, count, logs, env):
                say(f"  {count} worker(s): burst of {cfg.burst} …", end=" ")
                ok, failed, span = await _burst(db, runner, burst)
                say(f"{ok / span if span else 0:.1f} passes/s; latency × {cfg.samples} …", end=" ")
                row = Row(count, ok, failed, ok / span if span else 0.0, await _latencies(db, runner, single))
                say(f"p50 {row.quantile(0.5):.0f} ms")
        finally:
            await runner.stop()
            await db.close()
        fake.reset()
        rows.append(row)
    return rows


HEADERS = ("workers", "passes", "failed", "passes/s", "latency p50 ms", "latency max ms", "latency samples")


def cells(rows: list[Row]) -> list[list[str]]:
    return [
        [
            str(r.workers),
            str(r.passes),
            str(r.failed),
            f"{r.per_second:.1f}",
            f"{r.quantile(0.5):.0f}",
            f"{max(r.latency_ms):.0f}",
            str(len(r.latency_ms)),
        ]
        for r in rows
    ]


def markdown(cfg: Config, rows: list[Row], load: str, command: str) -> str:
    body = cells(rows)
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(
        [
            "# Background jobs: compaction passes run by `contextshift worker` on PostgreSQL",
            "",
            f"`{command}`: bursts of {cfg.burst} passes, {cfg.samples} latency samples. Machine: "
            f"{machine(['postgresql'])}. {load}",
            "",
            *lines,
            "",
            "A pass is a whole background compaction job (chat read, summarizer call to the fake provider, which",
            "answers at once, validation, summary commit, log and attempt records). *passes/s*: a burst queued at",
            "once ÷ the time from its first queueing to its last pass's end. *latency*: from a pass being queued",
            "(`deferred` event) to its attempt's start, one pass at a time with the workers idle (LISTEN/NOTIFY",
            "wakes them). Workers run at concurrency 1 each; the benchmark, the fake provider and PostgreSQL",
            "share the machine's CPUs with them.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jobs", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: bursts of 8, 5 latency samples")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"Markdown results (default {RESULTS}; --quick writes nothing unless given)",
    )
    args = parser.parse_args(argv)
    cfg = config(args.quick)
    server = os.environ.get(PG_ENV, "").strip()
    if not server:
        say(f"jobs benchmark: skipped (set {PG_ENV} to a PostgreSQL server; workers need PostgreSQL)")
        return 0
    say(
        f"jobs benchmark ({'quick' if cfg.quick else 'full'}): bursts of {cfg.burst} passes, "
        f"{cfg.samples} latency samples, with {' and '.join(map(str, WORKERS))} worker(s)"
    )
    with tempfile.TemporaryDirectory(prefix="contextshift-bench-jobs-") as scratch:
        env = {
            "CONTEXTSHIFT_DATA_DIR": scratch,
            "CONTEXTSHIFT_SECRET_KEY": os.environ.get("CONTEXTSHIFT_SECRET_KEY")
            or base64.urlsafe_b64encode(os.urandom(32)).decode(),
        }
        os.environ.update(env)  # this process writes the provider's key with the workers' secret key
        with postgres_database(server) as url, FakeProvider() as fake:
            rows = asyncio.run(_measure(url, fake, cfg, Path(scratch), env))
    load = load_note()
    command = "python -m benchmarks.jobs" + (" --quick" if cfg.quick else "")
    say("")
    width = [max(len(h), *(len(c[i]) for c in cells(rows))) for i, h in enumerate(HEADERS)]
    for line in (HEADERS, *cells(rows)):
        say("  ".join(cell.rjust(width[i]) for i, cell in enumerate(line)))
    say(load)
    output: Path | None = args.output if args.output is not None or cfg.quick else RESULTS
    if output is not None and not (cfg.quick and args.output is None):
        output.write_text(markdown(cfg, rows, load, command), encoding="utf-8")
        say(f"written: {output}")
    say(
        json.dumps(
            {
                "rows": [
                    {
                        "workers": r.workers,
                        "passes_per_second": round(r.per_second, 2),
                        "latency_p50_ms": round(r.quantile(0.5)),
                    }
                    for r in rows
                ]
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
