"""Benchmark: the service under concurrent load (N5): preview and generate on a 10k-message chat at
concurrency 1, 8 and 32, on SQLite and PostgreSQL.

Run from the project root:

    .venv/bin/python -m benchmarks.load           # full: 10,000 messages, 96 calls a level -> results/load.md
    .venv/bin/python -m benchmarks.load --quick   # CI smoke: 2,000 messages, 32 calls a level; writes nothing

What it does: the app (``create_app``) under uvicorn on a loopback port in a background thread, on a fresh
SQLite file (and, when ``CONTEXTSHIFT_TEST_POSTGRES_URL`` names a server, on a new PostgreSQL database that is
dropped afterwards), with the fake OpenAI-compatible provider of ``tests/fakes`` (it echoes at once). One
chat gets its history written through the storage layer (``benchmarks/service_data.py``). Then, per
operation and concurrency level, that many workers send the level's calls with httpx as fast as they are
answered: ``POST /context-preview`` (reads only), then ``POST /chats/{id}/generate`` (``stream: false``; each
appends the input and the reply). Turns in one chat run one at a time (N5), so generation at 8 and 32 queues:
its throughput is that of one turn after another, and its latency includes the wait.

Reported per level: calls, errors (any non-2xx answer or transport failure), throughput (calls ÷ wall time
of the level), p50 and p99 (nearest rank) of the call latency, and the process's RSS (server, fake provider
and benchmark share it) before and after the level. Target: 0 errors, and throughput at 32 no lower than at 1.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from contextshift.api.app import create_app

from . import service_data as data
from .report import load_note, say
from .service import (
    API,
    CONTEXT_WINDOW,
    MAX_OUTPUT,
    MODEL_NAME,
    PG_ENV,
    created,
    fill_chat,
    machine,
    postgres_database,
)
from .serving import Service
from .signin import BENCH_HEADERS, BENCH_TOKEN

RESULTS = Path(__file__).resolve().parent / "results" / "load.md"
LEVELS = (1, 8, 32)
PREVIEW = "preview"
GENERATE = "generate"


@dataclass(frozen=True)
class Config:
    quick: bool
    messages: int
    calls: int


def config(quick: bool) -> Config:
    return Config(quick=True, messages=2_000, calls=32) if quick else Config(quick=False, messages=10_000, calls=96)


@dataclass
class Level:
    backend: str
    operation: str
    concurrency: int
    calls: int
    errors: int
    #: Of the errors, how many were 409 CHAT_BUSY (a turn's bounded wait for the chat ran out).
    busy: int
    wall: float
    latencies: list[float]
    rss_before: float
    rss_after: float

    @property
    def throughput(self) -> float:
        return self.calls / self.wall if self.wall > 0 else 0.0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def rss_mib() -> float:
    """The process's resident set now (VmRSS), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run_level(
    base_url: str, backend: str, operation: str, chat_id: str, concurrency: int, calls: int, drafts: list[str]
) -> Level:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(calls):
        queue.put_nowait(n)
    latencies: list[float] = []
    errors = busy = 0

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal errors, busy
        while True:
            try:
                n = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            draft = drafts[n % len(drafts)]
            if operation == PREVIEW:
                path, body = f"{API}/context-preview", {"chat_id": chat_id, "user_message": draft}
            else:
                path, body = f"{API}/chats/{chat_id}/generate", {"content": draft, "stream": False}
            start = time.perf_counter()
            try:
                response = await http.post(path, json=body)
                ok = response.status_code == 200
                busy += response.status_code == 409
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - start)
            errors += 0 if ok else 1

    before = rss_mib()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits, headers=BENCH_HEADERS) as http:
        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return Level(backend, operation, concurrency, calls, errors, busy, wall, latencies, before, rss_mib())


def run_backend(backend: str, url: str, cfg: Config) -> list[Level]:
    from tests.fakes import FakeProvider

    levels: list[Level] = []
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
        chat_id = created(client, "/chats", "chat", {"bot_id": bot_id})
        say(f"  [{backend}] {cfg.messages:,} messages: inserting …", end=" ")
        say(f"{fill_chat(url, chat_id, cfg.messages, seed=f'load-{backend}'):.1f} s")
        drafts = data.user_inputs(cfg.calls, seed=f"load-{backend}")
        # One untimed call of each kind first: counts stored, caches and connections warm.
        for path, body in (
            (f"{API}/context-preview", {"chat_id": chat_id, "user_message": drafts[0]}),
            (f"{API}/chats/{chat_id}/generate", {"content": drafts[0], "stream": False}),
        ):
            if client.post(path, json=body).status_code != 200:
                raise RuntimeError(f"the warm-up call to {path} failed")
        for operation in (PREVIEW, GENERATE):
            for concurrency in LEVELS:
                say(f"  [{backend}] {operation} × {concurrency} …", end=" ")
                level = asyncio.run(
                    run_level(service.base_url, backend, operation, chat_id, concurrency, cfg.calls, drafts)
                )
                say(f"{level.throughput:.1f}/s, {level.errors} errors")
                levels.append(level)
        if not fake.requests:
            raise RuntimeError("the fake provider received no request")
    return levels


HEADERS = (
    "backend",
    "operation",
    "concurrency",
    "calls",
    "errors",
    "req/s",
    "p50 ms",
    "p99 ms",
    "RSS before MiB",
    "RSS after MiB",
    "req/s ÷ at 1",
)


def cells(levels: list[Level]) -> list[list[str]]:
    base = {(lv.backend, lv.operation): lv.throughput for lv in levels if lv.concurrency == 1}
    out = []
    for lv in levels:
        ratio = lv.throughput / base[(lv.backend, lv.operation)] if base.get((lv.backend, lv.operation)) else 0.0
        out.append(
            [
                lv.backend,
                lv.operation,
                str(lv.concurrency),
                str(lv.calls),
                str(lv.errors),
                f"{lv.throughput:.1f}",
                f"{lv.quantile(0.5) * 1000:.0f}",
                f"{lv.quantile(0.99) * 1000:.0f}",
                f"{lv.rss_before:.0f}",
                f"{lv.rss_after:.0f}",
                f"{ratio:.2f}×",
            ]
        )
    return out


def text_table(body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(HEADERS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True))]
    lines += [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in body
    ]
    return "\n".join(lines)


def markdown(cfg: Config, levels: list[Level], load: str, command: str) -> str:
    body = cells(levels)
    table = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    table += ["| " + " | ".join(r) + " |" for r in body]
    verdict = []
    for backend, operation in dict.fromkeys((lv.backend, lv.operation) for lv in levels):
        group = [lv for lv in levels if lv.backend == backend and lv.operation == operation]
        errors = sum(lv.errors for lv in group)
        at1 = next(lv.throughput for lv in group if lv.concurrency == 1)
        at32 = next(lv.throughput for lv in group if lv.concurrency == 32)
        busy = sum(lv.busy for lv in group)
        verdict.append(
            f"- {backend} {operation}: {errors} errors ({busy} × 409 CHAT_BUSY); "
            f"throughput at 32 is {at32 / at1:.2f}× that at 1 "
            f"({'meets' if errors == 0 and at32 >= at1 else 'misses'} the target)"
        )
    return "\n".join(
        [
            "# Load: preview and generate under concurrency",
            "",
            f"`{command}` — {cfg.messages:,} messages in the chat, {cfg.calls} calls per level. "
            "Generation in one chat runs one turn at a time (N5), so at 8 and 32 the calls queue for the chat's turn.",
            "",
            *table,
            "",
            *verdict,
            "",
            f"Machine: {machine(sorted({lv.backend for lv in levels}))}. {load}",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: 2,000 messages, 32 calls a level")
    parser.add_argument(
        "--backend",
        choices=("all", "sqlite", "postgresql"),
        default="all",
        help=f"all (default): SQLite, and PostgreSQL when {PG_ENV} is set",
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
        parser.error(f"--backend postgresql needs {PG_ENV}")
    say(
        f"load benchmark ({'quick' if cfg.quick else 'full'}): {cfg.messages:,} messages, {cfg.calls} calls at "
        f"concurrency {', '.join(map(str, LEVELS))}"
    )
    started = time.perf_counter()
    levels: list[Level] = []
    if args.backend != "postgresql":
        with tempfile.TemporaryDirectory(prefix="contextshift-load-") as folder:
            levels += run_backend("sqlite", f"sqlite:///{Path(folder) / 'load.db'}", cfg)
    if pg_server:
        with postgres_database(pg_server) as url:
            levels += run_backend("postgresql", url, cfg)
    load = load_note()
    say()
    say(text_table(cells(levels)))
    say()
    say(f"{time.perf_counter() - started:.0f} s in all; {load}")
    errors = sum(lv.errors - lv.busy for lv in levels)
    busy = sum(lv.busy for lv in levels)
    output: Path | None = args.output if args.output is not None or cfg.quick else RESULTS
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python -m benchmarks.load", *(argv if argv is not None else sys.argv[1:])])
        output.write_text(markdown(cfg, levels, load, command), encoding="utf-8")
        say(f"wrote {output}")
    if busy:
        say(f"{busy} calls got 409 CHAT_BUSY: their wait for the chat's turn ran out (the machine is slow)")
    if errors:  # anything else (a 5xx above all) is a failure
        say(f"{errors} calls failed")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
