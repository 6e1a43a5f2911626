"""Benchmark: one automatic compaction pass on a long chat (100k stored messages): time and RSS growth.

Run from the project root:

    .venv/bin/python -m benchmarks.compaction_pass            # 1k, 10k, 100k -> benchmarks/results/compaction-pass.md
    .venv/bin/python -m benchmarks.compaction_pass --quick    # 1k and 10k, writes nothing by default

What it does: per backend (SQLite in a temporary folder, and PostgreSQL when ``CONTEXTSHIFT_TEST_POSTGRES_URL``
names a server: a new database, dropped afterwards) and per size, a chat whose history is written straight
through the storage layer in a child process (``benchmarks/service_data.py``, 5,000 messages a transaction),
so the parent's memory holds none of it. The parent then builds the service's ``Compactor`` on the database
and runs one ``background`` run (what the job runner does after a turn at 50% of the window: model ``gpt-4o``,
window 16,000, automatic trigger) through one shared HTTP client, as the app and the worker do, against the
scripted OpenAI-compatible fake of ``benchmarks.compaction`` (it answers a summarizer request at once with a
short summary made of the transcript's words). On PostgreSQL the filled database is ``ANALYZE``d first, as
autovacuum does after a bulk insert (a test server may run without autovacuum; the planner then guesses).
The run makes up to the automatic pass limit of passes.

Measured: wall time and CPU time (this process, every thread) of the run, the passes it made and the messages
it folded, and the RSS growth (peak RSS after the run, ``ru_maxrss``, less the RSS just before it; the peak is
the process's since it started, so after an earlier, bigger run the figure is an upper bound of what this run
added). Timings are printed, never asserted. The script also runs on an older checkout (copied into its
``benchmarks/``): that is how the "before" figures of ``docs/benchmarks.md`` were made.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import text

from contextshift.service.compaction import Compactor
from contextshift.storage import Database, Repositories
from contextshift.tokenizers import get_tokenizer

from .compaction import ScriptedModel
from .report import load_note, say
from .service import PG_ENV, fill_chat, machine, postgres_database
from .serving import Service

RESULTS = Path(__file__).resolve().parent / "results" / "compaction-pass.md"
WINDOW = 16_000


@dataclass(frozen=True)
class Measured:
    backend: str
    messages: int
    seconds: float
    #: CPU seconds of this process during the run (every thread: the pass, the database driver's and the fake
    #: summarizer's server); the database server's own work is not in it.
    cpu: float
    rss_growth_mib: float
    status: str
    passes: int
    folded: int


def rss_mib() -> float:
    """The process's resident set now (Linux ``/proc``; elsewhere the peak so far)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_mib()


def peak_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


async def _setup(url: str, base_url: str) -> str:
    db = Database(url)
    await db.start()
    try:
        async with db.session() as session:
            repos = Repositories(session)
            provider = await repos.providers.create(
                name="scripted", kind="openai", base_url=base_url, api_key="sk-bench"
            )
            model = await repos.models.create(provider_id=provider.id, name="gpt-4o", context_window=WINDOW)
            bot = await repos.bots.create(name="bench", chat_model_id=model.id)
            chat = await repos.chats.create(bot_id=bot.id, title="long")
            return chat.id
    finally:
        await db.close()


async def _analyze(url: str) -> None:
    """PostgreSQL's statistics of the filled tables, as autovacuum gathers them after a bulk insert (a test
    server may run without it; the planner then guesses, and plans the window's reads badly)."""
    db = Database(url)
    await db.start()
    try:
        async with db.session() as session:
            await session.execute(text("ANALYZE"))
    finally:
        await db.close()


async def _run(url: str, chat_id: str) -> tuple[float, float, str, int, int]:
    db = Database(url)
    await db.start()
    shared = httpx.AsyncClient()  # one connection pool for every summarizer call, as the app and the worker
    try:
        compactor = Compactor(db, client_options={"http_client": shared})
        start, cpu = time.perf_counter(), time.process_time()
        outcome = await compactor.run(chat_id, "background")
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        status = outcome.status + (f" ({outcome.error_code})" if outcome.error_code else "")
        return elapsed, cpu, status, outcome.passes_committed + outcome.passes_failed, outcome.message_count
    finally:
        await shared.aclose()
        await db.close()


def measure(backend: str, url: str, size: int, base_url: str) -> Measured:
    chat_id = asyncio.run(_setup(url, base_url))
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(1) as pool:  # the history is written by a child: none of it stays in this process
        pool.apply(fill_chat, (url, chat_id, size, f"{backend}-{size}"))
    if backend == "postgresql":
        asyncio.run(_analyze(url))
    before = rss_mib()
    seconds, cpu, status, passes, folded = asyncio.run(_run(url, chat_id))
    return Measured(backend, size, seconds, cpu, max(0.0, peak_mib() - before), status, passes, folded)


def table(rows: list[Measured]) -> str:
    lines = [
        "| backend | messages | run s | s per pass | CPU s per pass | RSS growth MiB | status | passes | folded |",
        "|---|--:|--:|--:|--:|--:|---|--:|--:|",
    ]
    for r in rows:
        per = max(r.passes, 1)
        lines.append(
            f"| {r.backend} | {r.messages:,} | {r.seconds:.2f} | {r.seconds / per:.2f} | {r.cpu / per:.2f} "
            f"| {r.rss_growth_mib:.0f} | {r.status} | {r.passes} "
            f"| {r.folded:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compaction_pass", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k messages only")
    parser.add_argument("--backend", choices=("all", "sqlite", "postgresql"), default="all")
    parser.add_argument("--output", type=Path, default=None, help=f"Markdown results (default {RESULTS})")
    args = parser.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    pg_server = "" if args.backend == "sqlite" else os.environ.get(PG_ENV, "").strip()
    rows: list[Measured] = []
    model = ScriptedModel({}, chat_latency=0.0, summarizer_latency=0.0)
    get_tokenizer("gpt-4o").count("load the encoding before any timing")
    with Service(model) as fake:
        for size in sizes:
            if args.backend != "postgresql":
                with tempfile.TemporaryDirectory(prefix="contextshift-pass-bench-") as folder:
                    rows.append(measure("sqlite", f"sqlite:///{Path(folder) / 'pass.db'}", size, fake.base_url))
                    say(table(rows[-1:]).splitlines()[-1])
            if pg_server:
                with postgres_database(pg_server) as url:
                    rows.append(measure("postgresql", url, size, fake.base_url))
                    say(table(rows[-1:]).splitlines()[-1])
    load = load_note()
    say()
    say(table(rows))
    say(load)
    output = args.output if args.output is not None or args.quick else RESULTS
    if output is not None:
        command = " ".join(["python -m benchmarks.compaction_pass", *(argv if argv is not None else sys.argv[1:])])
        text = "\n".join(
            [
                "# One automatic compaction pass on a long chat",
                "",
                f"`{command}` — one `background` compaction run (the `Compactor` of the service, automatic "
                f"trigger, `gpt-4o` window {WINDOW:,}) on a chat whose history was written through the storage "
                "layer by a child process; the summarizer is the scripted fake of `benchmarks.compaction` (no "
                "latency), called through one shared HTTP connection pool as the app and the worker do. On "
                "PostgreSQL the filled database is `ANALYZE`d first, as autovacuum would. *CPU s*: this "
                "process's CPU time over every thread (the pass, the database driver, the fake summarizer's "
                "server), not the database server's. *RSS growth*: peak RSS after the run (the process's since "
                "it started) less the RSS before it: exact, or an upper bound when an earlier run of the process "
                "peaked higher.",
                "",
                table(rows),
                "",
                f"{machine(['postgresql'] if pg_server else [])}; {load}.",
                "",
            ]
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
