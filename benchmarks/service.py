"""Benchmark: the chat service's live preview and generation on chats of 100, 10k and 100k stored messages.

Run from the project root:

    .venv/bin/python -m benchmarks.service           # full run (100 / 10k / 100k) -> benchmarks/results/service.md
    .venv/bin/python -m benchmarks.service --quick   # CI smoke (100 / 10k, fewer calls), writes nothing by default

What it does: starts the FastAPI app (``create_app``) under uvicorn on a loopback port in a background
thread, on a fresh SQLite file in a temporary folder (and, when ``CONTEXTSHIFT_TEST_POSTGRES_URL`` names a
server, again on a uniquely named PostgreSQL database that is dropped afterwards), and the fake
OpenAI-compatible provider of ``tests/fakes`` (it echoes the last user message). Over HTTP it creates a
provider, a model (``gpt-4o``: the exact o200k profile; context window 16,000, so 14,976 tokens of budget
after the bot's default 1,024-token reply reserve) and a bot; then, per size, a chat whose history is
written straight through the storage layer (5,000 messages a transaction; varied text of 10–120 words
with some tool calls, see ``benchmarks/service_data.py``).

Per chat it times, with httpx against the running server (wall time of the whole HTTP call):

1. ``POST /context-preview``, *cold*: the first call on the chat, with nothing stored and the shared
   profile's in-memory count cache emptied (as after a restart): the window is tokenized, nothing stored;
2. ``POST /chats/{id}/generate`` (``stream: false``), *cold*: the count cache emptied again, so the
   window's counts are computed and stored (``message_tokens``);
3. ``POST /context-preview`` warm: N calls (different drafts), in rounds over the chats (100, 10k, 100k,
   100, …) so that load from other processes falls on every size alike;
4. ``POST /chats/{id}/generate`` warm: N calls in rounds likewise (each appends its input and the reply);
5. the same previews and generations again with the bot switched to the ``recall`` strategy (G4a): each
   turn also searches the chat's full-text index (FTS5 / tsvector) for older messages matching the draft
   (rows ``preview, recall`` and ``generate, recall``; their first call is not cold).

On PostgreSQL the database gets a ``VACUUM ANALYZE`` after the bulk load (what autovacuum does on its own
soon after; ``--no-analyze`` skips it, and then the planner, with no statistics, reads a 100k chat's pages
through a bitmap scan plus sort, so every call grows with the chat).

Medians and p99 (nearest rank; with fewer than 100 calls that is the slowest call) of the warm calls,
the growth of the warm median with chat length (target: flat), and the peak RSS of the process
(``ru_maxrss``: server, fake provider and the benchmark itself share the process). Timings are printed,
never asserted. ``--profile`` then runs a cProfile of the server thread over 20 previews and 20
generations on the largest chat, prints the top functions and leaves the ``.prof`` files in the temp folder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import math
import os
import platform
import pstats
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from contextshift import __version__
from contextshift.api.app import create_app
from contextshift.core.tokens import ChatFormatProfile, CountCache
from contextshift.storage import Database, Repositories
from contextshift.tokenizers import get_tokenizer

from . import service_data as data
from .report import load_note, say
from .serving import Service
from .signin import BENCH_HEADERS, BENCH_TOKEN

RESULTS = Path(__file__).resolve().parent / "results" / "service.md"
PG_ENV = "CONTEXTSHIFT_TEST_POSTGRES_URL"
MODEL_NAME = "gpt-4o"
CONTEXT_WINDOW = 16_000
MAX_OUTPUT = 1_024
API = "/api/v2"
PREVIEW = "preview"
GENERATE = "generate"
RECALL_PREVIEW = "preview, recall"
RECALL_GENERATE = "generate, recall"
PROFILE_RUNS = 20


@dataclass(frozen=True)
class Config:
    quick: bool
    sizes: tuple[int, ...]
    preview_runs: int
    generate_runs: int
    slow_call: float  # a cold call slower than this (seconds) halves the warm calls of that size


def config(quick: bool) -> Config:
    if quick:
        return Config(quick=True, sizes=(100, 10_000), preview_runs=10, generate_runs=8, slow_call=1.0)
    return Config(quick=False, sizes=(100, 10_000, 100_000), preview_runs=30, generate_runs=20, slow_call=2.0)


# -- the server ---------------------------------------------------------------------------------------------


# -- databases ----------------------------------------------------------------------------------------------


def _plain_dsn(url: str, database: str | None = None) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


async def _pg_execute(dsn: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@contextlib.contextmanager
def postgres_database(server: str) -> Iterator[str]:
    """A new database ``cs_bench_<hex>`` on the server, dropped at the end."""
    name = f"cs_bench_{uuid.uuid4().hex[:16]}"
    asyncio.run(_pg_execute(_plain_dsn(server), f'CREATE DATABASE "{name}"'))
    try:
        yield _plain_dsn(server, name)
    finally:
        asyncio.run(_pg_execute(_plain_dsn(server), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _fill(url: str, chat_id: str, size: int, seed: str) -> None:
    db = Database(url)
    await db.start()
    try:
        for chunk in data.history(size, seed):
            async with db.session() as session:
                await Repositories(session).messages.append_many(chat_id, chunk)
    finally:
        await db.close()


def fill_chat(url: str, chat_id: str, size: int, seed: str) -> float:
    """Append ``size`` messages through the storage layer; returns the seconds it took."""
    start = time.perf_counter()
    asyncio.run(_fill(url, chat_id, size, seed))
    return time.perf_counter() - start


# -- measuring ----------------------------------------------------------------------------------------------


@dataclass
class Measured:
    backend: str
    operation: str
    messages: int
    cold: float
    warm: list[float]
    window: int  # messages of the history in the prompt (preview entries included, source history)
    prompt_tokens: int
    rss_mib: float
    note: str = ""
    #: CPU seconds of each warm call in the process, less the calling (client) thread's own.
    cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.warm)

    @property
    def cpu_median(self) -> float | None:
        return statistics.median(self.cpu) if self.cpu else None

    @property
    def p99(self) -> float:
        ordered = sorted(self.warm)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass
class Run:
    backend: str
    rows: list[Measured] = field(default_factory=list)
    inserts: dict[int, float] = field(default_factory=dict)
    profile: str = ""


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def empty_count_cache() -> None:
    """Forget the shared profile's in-memory counts, as a restart would (stored counts stay)."""
    profile = get_tokenizer(MODEL_NAME)
    if isinstance(profile, ChatFormatProfile):
        profile.cache = CountCache(profile.cache.limit)


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    response = client.post(path, json=body)
    elapsed = time.perf_counter() - start
    if response.status_code not in (200, 201):
        raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text[:500]}")
    return elapsed, response.json()


def created(client: httpx.Client, path: str, key: str, body: dict[str, Any]) -> str:
    return str(post(client, f"{API}{path}", body)[1][key]["id"])


def window_of(report: dict[str, Any]) -> tuple[int, int]:
    """(history messages kept, exact prompt tokens) of a preview or an audit."""
    history = sum(1 for e in report["entries"] if e["included"] and e["source"] == "history")
    return history, int(report["budget"].get("prompt_tokens", 0))


class ChatUnderTest:
    """One chat of the benchmark and its calls (each with a fresh draft)."""

    def __init__(self, client: httpx.Client, chat_id: str, size: int, drafts: Iterator[str]) -> None:
        self.client, self.chat_id, self.size, self.drafts = client, chat_id, size, drafts
        self.preview_cold = self.generate_cold = 0.0
        self.previews: list[float] = []
        self.generations: list[float] = []
        self.preview_cpu: list[float] = []
        self.generate_cpu: list[float] = []
        self.last_preview: dict[str, Any] = {}

    def timed(self, operation: str) -> float:
        """One warm call; its CPU time outside this (client) thread is kept: the server's, its driver threads'
        and the instant fake provider's. Unlike wall time, other processes' load does not inflate it."""
        process, thread = time.process_time(), time.thread_time()
        elapsed = self.preview() if operation == PREVIEW else self.generate()
        cpu = (time.process_time() - process) - (time.thread_time() - thread)
        (self.preview_cpu if operation == PREVIEW else self.generate_cpu).append(max(0.0, cpu))
        return elapsed

    def preview(self) -> float:
        elapsed, self.last_preview = post(
            self.client, f"{API}/context-preview", {"chat_id": self.chat_id, "user_message": next(self.drafts)}
        )
        return elapsed

    def generate(self) -> float:
        body = {"content": next(self.drafts), "stream": False}
        elapsed, answer = post(self.client, f"{API}/chats/{self.chat_id}/generate", body)
        if not str(answer["message"]["content"]).startswith("Echo: "):
            raise RuntimeError(f"unexpected reply: {str(answer['message']['content'])[:100]!r}")
        return elapsed

    def audit(self) -> dict[str, Any]:
        audit: dict[str, Any] | None = self.client.get(f"{API}/chats/{self.chat_id}/context-audit").json()["audit"]
        if audit is None or audit["status"] != "completed":
            raise RuntimeError(f"the last generation left no completed audit: {audit and audit['status']}")
        return audit


def warm_rounds(chats: list[ChatUnderTest], operation: str, runs: dict[int, int]) -> None:
    """Warm calls in rounds over the chats (100, 10k, 100k, 100, 10k, …), so that load from other
    processes, caches and the database's background work fall on every size alike."""
    for round_ in range(max(runs.values())):
        for chat in chats:
            if round_ < runs[chat.size]:
                if operation == PREVIEW:
                    chat.previews.append(chat.timed(PREVIEW))
                else:
                    chat.generations.append(chat.timed(GENERATE))


def profile_calls(service: Service, chat: ChatUnderTest, runs: int, out: Path) -> str:
    """cProfile of the server thread over ``runs`` previews, then ``runs`` generations, on one chat."""
    texts = []
    for name, call in ((PREVIEW, ChatUnderTest.preview), (GENERATE, ChatUnderTest.generate)):
        with service.profiling(chat.client) as profiler:
            for _ in range(runs):
                call(chat)
        path = out.with_name(f"{out.stem}-{name}.prof")
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(path))
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(15)
        texts.append(f"--- {name} ×{runs} on {chat.size:,} messages ({path})\n{buffer.getvalue()}")
    return "\n".join(texts)


async def _analyze(url: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(_plain_dsn(url))
    try:
        await connection.execute("VACUUM ANALYZE")
    finally:
        await connection.close()


def run_backend(backend: str, url: str, cfg: Config, *, profile: bool, analyze: bool) -> Run:
    from tests.fakes import FakeProvider

    run = Run(backend)
    with (
        FakeProvider() as fake,
        Service(create_app(url, admin_token=BENCH_TOKEN)) as service,
        httpx.Client(base_url=service.base_url, timeout=120, headers=BENCH_HEADERS) as client,
    ):
        provider_id = created(
            client,
            "/providers",
            "provider",
            {"name": "fake", "kind": "openai", "base_url": fake.base_url, "api_key": "sk-bench"},
        )
        model_id = created(
            client,
            "/models",
            "model",
            {
                "provider_id": provider_id,
                "name": MODEL_NAME,
                "type": "chat",
                "context_window": CONTEXT_WINDOW,
                "max_output_tokens": MAX_OUTPUT,
            },
        )
        bot_id = created(
            client, "/bots", "bot", {"name": "bench", "chat_model_id": model_id, "system_prompt": data.SYSTEM_PROMPT}
        )
        chats: list[ChatUnderTest] = []
        for size in cfg.sizes:
            chat_id = created(client, "/chats", "chat", {"bot_id": bot_id})
            say(f"  [{backend}] {size:,} messages: inserting …", end=" ")
            run.inserts[size] = fill_chat(url, chat_id, size, seed=f"{backend}-{size}")
            say(f"{run.inserts[size]:.1f} s")
            drafts = iter(
                data.user_inputs(2 + cfg.preview_runs + cfg.generate_runs + 2 * PROFILE_RUNS, seed=f"{backend}-{size}")
            )
            chats.append(ChatUnderTest(client, chat_id, size, drafts))
        if analyze and backend == "postgresql":
            # What autovacuum does on its own a little later: without statistics, the planner reads a bulk-
            # loaded chat's rows through a bitmap scan and sorts them (cost grows with the chat), see --no-analyze.
            asyncio.run(_analyze(url))
        say(f"  [{backend}] cold calls …", end=" ")
        for chat in chats:
            empty_count_cache()  # as after a restart: nothing counted in memory, nothing stored for this chat
            chat.preview_cold = chat.preview()
            empty_count_cache()
            chat.generate_cold = chat.generate()
        if not fake.requests:
            raise RuntimeError("the fake provider received no request")
        fake.reset()
        slow = {c.size: max(c.preview_cold, c.generate_cold) > cfg.slow_call for c in chats}
        preview_runs = {c.size: max(5, cfg.preview_runs // 2) if slow[c.size] else cfg.preview_runs for c in chats}
        generate_runs = {c.size: max(5, cfg.generate_runs // 2) if slow[c.size] else cfg.generate_runs for c in chats}
        say("warm previews …", end=" ")
        warm_rounds(chats, PREVIEW, preview_runs)
        say("warm generations …", end=" ")
        warm_rounds(chats, GENERATE, generate_runs)
        fake.reset()
        say("done")
        for chat in chats:
            rss = peak_rss_mib()
            note = "fewer calls (slow cold call)" if slow[chat.size] else ""
            run.rows.append(
                Measured(
                    backend,
                    PREVIEW,
                    chat.size,
                    chat.preview_cold,
                    chat.previews,
                    *window_of(chat.last_preview["preview"]),
                    rss,
                    note,
                    chat.preview_cpu,
                )
            )
            run.rows.append(
                Measured(
                    backend,
                    GENERATE,
                    chat.size,
                    chat.generate_cold,
                    chat.generations,
                    *window_of(chat.audit()),
                    rss,
                    note,
                    chat.generate_cpu,
                )
            )
        # The same chats with the bot on the ``recall`` strategy: each turn also searches the full-text index.
        response = client.patch(f"{API}/bots/{bot_id}", json={"context_strategy": "recall"})
        if response.status_code != 200:
            raise RuntimeError(f"PATCH bot answered {response.status_code}: {response.text[:300]}")
        calls = 2 + cfg.preview_runs + cfg.generate_runs
        recalling = [
            ChatUnderTest(client, c.chat_id, c.size, iter(data.user_inputs(calls, seed=f"{backend}-{c.size}-r")))
            for c in chats
        ]
        say(f"  [{backend}] recall: first calls …", end=" ")
        for chat in recalling:
            chat.preview_cold = chat.preview()
            chat.generate_cold = chat.generate()
        say("warm previews …", end=" ")
        warm_rounds(recalling, PREVIEW, preview_runs)
        say("warm generations …", end=" ")
        warm_rounds(recalling, GENERATE, generate_runs)
        fake.reset()
        say("done")
        for chat in recalling:
            rss = peak_rss_mib()
            recalled = sum(1 for e in chat.last_preview["preview"]["entries"] if e["reason"] == "recalled")
            note = f"{recalled} recalled in the last preview; first call not cold (counts cached)"
            run.rows.append(
                Measured(
                    backend,
                    RECALL_PREVIEW,
                    chat.size,
                    chat.preview_cold,
                    chat.previews,
                    *window_of(chat.last_preview["preview"]),
                    rss,
                    note,
                    chat.preview_cpu,
                )
            )
            run.rows.append(
                Measured(
                    backend,
                    RECALL_GENERATE,
                    chat.size,
                    chat.generate_cold,
                    chat.generations,
                    *window_of(chat.audit()),
                    rss,
                    "",
                    chat.generate_cpu,
                )
            )
        if profile:
            out = Path(tempfile.gettempdir()) / f"service-{backend}"
            run.profile = profile_calls(service, chats[-1], PROFILE_RUNS, out)
            fake.reset()
    return run


# -- the report ---------------------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}×"


LATENCY_HEADERS = (
    "backend",
    "operation",
    "messages",
    "cold ms",
    "warm median ms",
    "warm p99 ms",
    "calls",
    "history in prompt",
    "prompt tokens",
    "peak RSS MiB",
    "server CPU ms",
    "note",
)
GROWTH_HEADERS = (
    "backend",
    "operation",
    "median @100",
    "@10k",
    "@100k",
    "10k ÷ 100",
    "100k ÷ 100",
    "100k ÷ 10k",
    "flat?",
)


def latency_cells(rows: list[Measured]) -> list[list[str]]:
    return [
        [
            r.backend,
            r.operation,
            f"{r.messages:,}",
            _ms(r.cold),
            _ms(r.median),
            _ms(r.p99),
            str(len(r.warm)),
            f"{r.window:,}",
            f"{r.prompt_tokens:,}",
            f"{r.rss_mib:,.0f}",
            _ms(r.cpu_median),
            r.note,
        ]
        for r in rows
    ]


def growth_cells(rows: list[Measured], cpu: bool = False) -> list[list[str]]:
    """The growth of the warm median with chat length: of wall time, or (``cpu``) of server CPU time."""
    out = []
    keys = dict.fromkeys((r.backend, r.operation) for r in rows)
    for backend, operation in keys:
        by_size = {
            r.messages: (r.cpu_median if cpu else r.median)
            for r in rows
            if r.backend == backend and r.operation == operation
        }
        small, mid, large = by_size.get(100), by_size.get(10_000), by_size.get(100_000)
        top = large if large is not None else mid
        verdict = "–"
        if small is not None and top is not None:
            # 100 messages fill only part of the budget (smaller prompt), so the 100k ÷ 10k step is the
            # purest test of "independent of history length"; both must stay small.
            step = (large / mid) if (large is not None and mid is not None) else 1.0
            verdict = "yes" if top / small <= 1.5 and step <= 1.25 else "no"
        out.append(
            [
                backend,
                operation,
                _ms(small),
                _ms(mid),
                _ms(large),
                _ratio(mid, small),
                _ratio(large, small),
                _ratio(large, mid),
                verdict,
            ]
        )
    return out


def text_table(headers: tuple[str, ...], body: list[list[str]], left: int = 2) -> str:
    lines = [list(headers), *body]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for n, line in enumerate(lines):
        cells = [c.ljust(widths[i]) if i < left or not n else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(headers: tuple[str, ...], body: list[list[str]], left: int = 2) -> str:
    align = ["---" if i < left or headers[i] in ("note", "flat?") else "--:" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines)


def machine(backends: list[str]) -> str:
    parts = [
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
        f"{os.cpu_count()} CPUs",
        f"contextshift {__version__}",
        f"SQLite {sqlite3.sqlite_version}",
        f"uvicorn {uvicorn.__version__}",
        f"httpx {httpx.__version__}",
    ]
    if "postgresql" in backends:
        parts.append("PostgreSQL (local server)")
    return ", ".join(parts)


def markdown(cfg: Config, runs: list[Run], load: str, command: str, analyze: bool) -> str:
    rows = [r for run in runs for r in run.rows]
    inserts = "; ".join(
        f"{run.backend}: " + ", ".join(f"{n:,} in {s:.1f} s" for n, s in run.inserts.items()) for run in runs
    )
    postgres_note: list[str] = []
    if any(run.backend == "postgresql" for run in runs):
        postgres_note = [
            "",
            "PostgreSQL: "
            + (
                "`VACUUM ANALYZE` after the bulk load (what autovacuum does on its own soon after; without it the "
                "planner, having no statistics, reads a bulk-loaded chat's pages through a bitmap heap scan and a "
                "sort of every row of the chat: see `--no-analyze`)."
                if analyze
                else "no `VACUUM ANALYZE` after the bulk load (`--no-analyze`): the planner has no statistics for the "
                "new rows."
            ),
        ]
    return "\n".join(
        [
            "# Service benchmark: preview and generate against chat length",
            "",
            f"`{command}` — the FastAPI app under uvicorn "
            "on a loopback port, the fake OpenAI-compatible provider of `tests/fakes` (echo), model `gpt-4o` "
            f"(exact o200k), context window {CONTEXT_WINDOW:,} (budget {CONTEXT_WINDOW - 1024:,} after the default "
            "1,024-token reply reserve). Each chat's history is written through the storage layer; every call "
            "below is a real HTTP request (httpx), wall time of the whole call.",
            "",
            "*Cold*: the first call on the chat, the in-memory count cache emptied (as after a restart); preview "
            "tokenizes the window and stores nothing, generate tokenizes and stores the counts. *Warm*: the "
            f"following calls ({cfg.preview_runs} previews, then {cfg.generate_runs} generations, each appending its "
            "input and the reply), in rounds over the chats (100, 10k, 100k, 100, …) so that load from other "
            "processes falls on every size alike. p99 is nearest-rank (below 100 calls: the slowest call). "
            "*History in prompt*: history messages the prompt kept (from the last preview, and the chat's audit "
            "after the last generation). Peak RSS is the whole process (server, fake provider, benchmark) so far.",
            *postgres_note,
            "",
            markdown_table(LATENCY_HEADERS, latency_cells(rows)),
            "",
            "Growth of the warm median with chat length (target: flat, ≈1×; 100 messages fill only part of the "
            'budget, so 100k ÷ 10k is the cleanest view of "independent of history length"):',
            "",
            markdown_table(GROWTH_HEADERS, growth_cells(rows)),
            "",
            "The same growth in *server CPU ms* (median CPU time of a warm call in the process, less the calling "
            "thread's: the server, its database driver threads and the instant fake provider; load from other "
            "processes does not inflate it as it does wall time):",
            "",
            markdown_table(GROWTH_HEADERS, growth_cells(rows, cpu=True)),
            "",
            f"Inserting the histories (storage layer, 5,000 a transaction): {inserts}.",
            "",
            f"{machine([run.backend for run in runs])}; {load}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: 100 and 10k messages, fewer calls")
    parser.add_argument(
        "--backend",
        choices=("all", "sqlite", "postgresql"),
        default="all",
        help=f"all (default): SQLite, and PostgreSQL when {PG_ENV} is set",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"afterwards, cProfile the server thread over {PROFILE_RUNS} previews and {PROFILE_RUNS} "
        "generations on the largest chat (service-<backend>-<operation>.prof in the temp folder)",
    )
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="PostgreSQL: time right after the bulk load, without VACUUM ANALYZE (no planner stats)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"Markdown results (default {RESULTS}; --quick writes nothing unless given)",
    )
    args = parser.parse_args(argv)
    cfg = config(args.quick)
    pg_server = "" if args.backend == "sqlite" else os.environ.get(PG_ENV, "").strip()
    if args.backend == "postgresql" and not pg_server:
        parser.error(f"--backend postgresql needs {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    say(
        f"service benchmark ({'quick' if cfg.quick else 'full'}): sizes {', '.join(f'{n:,}' for n in cfg.sizes)}; "
        f"{cfg.preview_runs} previews and {cfg.generate_runs} generations per chat"
    )
    if not pg_server and args.backend == "all":
        say(f"  (PostgreSQL skipped: set {PG_ENV} to include it)")
    started = time.perf_counter()
    runs: list[Run] = []
    options = {"profile": args.profile, "analyze": not args.no_analyze}
    if args.backend != "postgresql":
        with tempfile.TemporaryDirectory(prefix="contextshift-bench-") as folder:
            runs.append(run_backend("sqlite", f"sqlite:///{Path(folder) / 'service.db'}", cfg, **options))
    if pg_server:
        with postgres_database(pg_server) as url:
            runs.append(run_backend("postgresql", url, cfg, **options))
    load = load_note()
    rows = [r for run in runs for r in run.rows]
    say()
    say(text_table(LATENCY_HEADERS, latency_cells(rows)))
    say()
    say(text_table(GROWTH_HEADERS, growth_cells(rows)))
    say()
    say("server CPU ms:")
    say(text_table(GROWTH_HEADERS, growth_cells(rows, cpu=True)))
    say()
    say(f"peak RSS {peak_rss_mib():,.0f} MiB; {time.perf_counter() - started:.0f} s in all; {load}")
    for run in runs:
        if run.profile:
            say(
                f"\n== cProfile of the server thread, {run.backend}, on the largest chat (coroutines make the "
                f"cumulative column unreliable; trust tottime, or use py-spy record --idle --threads)\n{run.profile}"
            )
    output: Path | None = args.output if args.output is not None or cfg.quick else RESULTS
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python -m benchmarks.service", *(argv if argv is not None else sys.argv[1:])])
        output.write_text(markdown(cfg, runs, load, command, not args.no_analyze), encoding="utf-8")
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
