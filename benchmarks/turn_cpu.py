"""Benchmark: server CPU of one chat turn (issue 26: ≤ 20 ms at 1k stored messages).

``python -m benchmarks.turn_cpu`` — in process, no HTTP: ``Generations.complete`` on a chat of ``--messages``
stored messages (model ``gpt-4o``, exact o200k counts, context window 16,000), compaction off, and an
*instant* provider: the real OpenAI client builds the request body, and the reply comes back at once
without a socket; one shared HTTP client, as the app has. What is timed is ``time.process_time`` around
each turn: the event loop, the pipeline and the database driver's threads (the whole process's CPU), so
load from other processes does not inflate it.

``--profile N``: afterwards, cProfile N more turns (CPU time) and print the functions by own time and by
package.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from contextshift.core.tokens import ChatFormatProfile, CountCache
from contextshift.providers import make_client
from contextshift.providers.base import ChatRequest, ChatResult, ChatStream, ListedModel, ProviderClient
from contextshift.service.generation import Generations
from contextshift.storage import Database, Repositories
from contextshift.tokenizers import get_tokenizer

from . import service_data as data
from .report import load_note, say

MODEL_NAME = "gpt-4o"
CONTEXT_WINDOW = 16_000
PG_ENV = "CONTEXTSHIFT_TEST_POSTGRES_URL"


class InstantClient:
    """The OpenAI client's own request body, and a reply at once without any I/O."""

    def __init__(self, real: ProviderClient) -> None:
        self._real = real

    @property
    def kind(self) -> str:
        return self._real.kind

    @property
    def enforces_output_limit(self) -> bool:
        return True

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        return self._real.request_body(request)

    async def complete(self, request: ChatRequest) -> ChatResult:
        self._real.request_body(request)  # what a real call serializes before it sends
        return ChatResult(text="ok.", finish_reason="stop")

    def stream(self, request: ChatRequest) -> ChatStream:
        raise NotImplementedError("the turn benchmark completes, it does not stream")

    async def list_models(self) -> list[ListedModel]:
        return []

    async def aclose(self) -> None:
        await self._real.aclose()


def instant_client(kind: str, base_url: str, api_key: str | None = None, **options: Any) -> ProviderClient:
    return InstantClient(make_client(kind, base_url, api_key, **options))


async def _setup(db: Database, messages: int) -> str:
    async with db.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="p", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(
            provider_id=provider.id, name=MODEL_NAME, context_window=CONTEXT_WINDOW, max_output_tokens=1024
        )
        bot = await repos.bots.create(name="b", chat_model_id=model.id, system_prompt=data.SYSTEM_PROMPT)
        chat = await repos.chats.create(bot_id=bot.id, title="bench")
    for chunk in data.history(messages, seed="turn-cpu"):
        async with db.session() as session:
            await Repositories(session).messages.append_many(chat.id, chunk)
    return chat.id


def _by_package(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals: dict[str, float] = defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        parts = Path(filename).parts
        if "site-packages" in parts:
            key = parts[parts.index("site-packages") + 1]
        elif "contextshift" in parts:
            index = parts.index("contextshift")
            key = "/".join(parts[index : index + 3]) if len(parts) > index + 2 else "contextshift"
        elif filename.startswith("<") or "python3" in filename:
            key = "stdlib/builtins"
        else:
            key = "other"
        totals[key] += own
    return sorted(totals.items(), key=lambda item: -item[1])


async def run(url: str, messages: int, turns: int, profile_turns: int) -> dict[str, Any]:
    db = Database(url)
    await db.start()
    try:
        chat_id = await _setup(db, messages)
        # as the app does: one shared HTTP client (an SSL context is costly to build)
        http_client = httpx.AsyncClient()
        generations = Generations(db, client_factory=instant_client, http_client=http_client)
        drafts = data.user_inputs(turns + profile_turns + 5, seed="turn-cpu")
        profile = get_tokenizer(MODEL_NAME)
        if isinstance(profile, ChatFormatProfile):
            profile.cache = CountCache()
        for draft in drafts[:5]:  # warm: counts stored and cached, as on a running server
            await generations.complete(chat_id, draft, None)
        cpu: list[float] = []
        for draft in drafts[5 : 5 + turns]:
            start = time.process_time()
            await generations.complete(chat_id, draft, None)
            cpu.append(time.process_time() - start)
        report: dict[str, Any] = {"cpu": cpu}
        if profile_turns:
            profiler = cProfile.Profile(time.process_time)  # CPU, not the waits
            profiler.enable()
            for draft in drafts[5 + turns :]:
                await generations.complete(chat_id, draft, None)
            profiler.disable()
            report["profile"] = profiler
        await generations.settle()
        await http_client.aclose()
        return report
    finally:
        await db.close()


def _print_profile(profiler: cProfile.Profile, turns: int, top: int) -> None:
    stats = pstats.Stats(profiler)
    total = sum(own for (_cc, _nc, own, _cum, _callers) in stats.stats.values())  # type: ignore[attr-defined]
    say(f"\nprofile: {turns} turns, {1000 * total / turns:.1f} ms of profiled time per turn; by package (own time):")
    for key, own in _by_package(stats)[:top]:
        say(f"  {100 * own / total:5.1f}%  {1000 * own / turns:6.2f} ms/turn  {key}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    say(out.getvalue())
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top + 10)
    say(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: 300 messages, 10 turns")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile N more turns afterwards")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.turns = min(args.messages, 300), min(args.turns, 10)
    with tempfile.TemporaryDirectory() as folder:
        if args.backend == "sqlite":
            report = asyncio.run(run(f"sqlite+aiosqlite:///{folder}/bench.db", args.messages, args.turns, args.profile))
        else:
            from .service import postgres_database

            server = os.environ.get(PG_ENV, "").strip()
            if not server:
                say(f"set {PG_ENV} to run on PostgreSQL")
                return 2
            with postgres_database(server) as url:
                report = asyncio.run(run(url, args.messages, args.turns, args.profile))
    cpu = sorted(report["cpu"])
    say(
        f"{args.backend}, {args.messages:,} stored messages, {len(cpu)} turns: CPU per turn median "
        f"{1000 * statistics.median(cpu):.1f} ms, mean {1000 * statistics.fmean(cpu):.1f} ms, "
        f"min {1000 * cpu[0]:.1f} ms, max {1000 * cpu[-1]:.1f} ms ({load_note()})"
    )
    if "profile" in report:
        _print_profile(report["profile"], args.profile, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
