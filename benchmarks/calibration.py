"""Benchmark: counts that never overflow (T5): calibration and recovery against a fixed 4-characters estimate.

Run from the project root:

    .venv/bin/python -m benchmarks.calibration           # 100 turns per tokenizer -> benchmarks/results/calibration.md
    .venv/bin/python -m benchmarks.calibration --quick   # CI smoke (20 turns), writes nothing by default

What it does: the fake provider of ``tests/fakes`` counts tokens with a tokenizer *d* times denser than a
4-characters estimate (d = 2, 1.5, 1 and 0.7: o200k's count of each text, scaled so that over the stored
history it is d times the estimate; text by text the ratio varies with the content as a real tokenizer's
does), has a window of 4,096 tokens, rejects a
prompt plus ``max_tokens`` over it with the real count ("your messages resulted in N tokens") and
reports real usage. Per d, a fresh SQLite file and the app under uvicorn on a loopback port; a model with
no known tokenizer (the ``approximate`` profile), a bot with a 512-token reply reserve (prompt budget
3,584) and compaction off, and a chat of 120 stored messages (prose, code, JSON results and a few lines
of Russian, below); then 100 turns of ``POST /generate``
(``stream: false``), each a new question.

The baseline, in the same run against the same fake: LangChain's ``trim_messages`` with
``count_tokens_approximately`` (4 characters a token, 3 per message) to the same budget, sent with httpx;
no calibration, no recovery: a rejection is a failed turn.

Per policy: the share of turns that needed a retry (contextshift: a ``context-length-retry`` attempt in the
audit; baseline: rejected), failed turns, *wasted upstream tokens* (the real prompt tokens of every
rejected request, the work a provider did for nothing), the mean real prompt of the accepted requests as a
share of the budget (*window use*: how much history the model got to see), and contextshift's learned
factor. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from contextshift.api.app import create_app
from contextshift.core.tokens import approximate_count
from contextshift.storage import Database
from contextshift.tokenizers import get_tokenizer
from tests.fakes import Counting, FakeProvider

from .report import say
from .signin import BENCH_HEADERS, BENCH_TOKEN

RESULTS = Path(__file__).resolve().parent / "results" / "calibration.md"
DENSITIES = (2.0, 1.5, 1.0, 0.7)
WINDOW = 4096
RESERVE = 512
BUDGET = WINDOW - RESERVE
HISTORY = 120
API = "/api/v2"

PROSE = [
    "We compared three hotels near the old town; the second one had the best reviews and a quiet courtyard.",
    "Remind me tomorrow to call the dentist and to move the meeting with Anna from Thursday to Friday at 10.",
    "The garden needs more shade in the afternoon, so we planted two young maples along the western fence.",
    "I finished the report, but the figures for March still look off compared with the invoices we received.",
]
CODE = [
    "def total(items):\n    return sum(i.price * i.qty for i in items if not i.refunded)\n",
    "for (let i = 0; i < rows.length; i++) { if (rows[i].id === id) { rows.splice(i, 1); break; } }",
    "SELECT c.id, count(*) FROM chats c JOIN messages m ON m.chat_id = c.id GROUP BY c.id HAVING count(*) > 10;",
]
JSON = [
    '{"results": [{"id": 1842, "title": "Q3 forecast", "score": 0.87}, {"id": 1907, "title": "Plan", "score": 0.7}]}',
    '{"weather": {"city": "Lisbon", "temp_c": 18.5, "wind_kmh": 12, "forecast": ["sun", "clouds", "rain"]}}',
]
RUSSIAN = ["Завтра мы едем в Лиссабон, билеты уже куплены, гостиница рядом с районом Алфама."]


def history_text(rng: random.Random, n: int) -> str:
    pool = rng.choice([PROSE, PROSE, CODE, JSON, RUSSIAN])
    return f"[{n}] " + " ".join(rng.choice(pool) for _ in range(rng.randint(1, 3)))


def question(turn: int) -> str:
    return f"Question {turn}: given all of the above, what should we do next about item {turn % 7}?"


def real_counter(density: float, texts: list[str]) -> Counting:
    """o200k's count scaled so that over ``texts`` it is ``density`` times the 4-characters estimate."""
    o200k = get_tokenizer("o200k_base")
    scale = density * sum(approximate_count(t) for t in texts) / sum(o200k.count(t) for t in texts)
    return Counting(count_text=lambda text: math.ceil(o200k.count(text) * scale), window=WINDOW)


def history(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [history_text(rng, n) for n in range(HISTORY)]


class Server:
    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@dataclass
class Outcome:
    policy: str
    density: float
    turns: int
    retried: int = 0
    failed: int = 0
    wasted: int = 0
    accepted_tokens: int = 0
    accepted: int = 0
    factor: float | None = None
    calls: int | None = None

    @property
    def window_use(self) -> str:
        return f"{self.accepted_tokens / self.accepted / BUDGET:.0%}" if self.accepted else "–"


def _rejected(fake: FakeProvider, since: int, counting: Counting) -> list[int]:
    return [counting.prompt_tokens(r.json) for r in fake.requests[since:] if r.over_limit]


async def run_contextshift(fake: FakeProvider, density: float, turns: int, seed: int) -> Outcome:
    texts = history(seed)
    counting = real_counter(density, texts)
    fake.reset()
    fake.count_as(counting)
    outcome = Outcome("contextshift", density, turns)
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(database=Database(f"sqlite:///{Path(folder) / 'bench.db'}"), admin_token=BENCH_TOKEN)
        with Server(app) as url:
            async with httpx.AsyncClient(base_url=url + API, timeout=60, headers=BENCH_HEADERS) as http:

                async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
                    response = await http.post(path, json=body)
                    response.raise_for_status()
                    return response.json()  # type: ignore[no-any-return]

                provider = (await post("/providers", {"name": "f", "kind": "openai", "base_url": fake.base_url}))[
                    "provider"
                ]
                model = (
                    await post(
                        "/models", {"provider_id": provider["id"], "name": "mystery-model", "context_window": WINDOW}
                    )
                )["model"]
                bot = (
                    await post(
                        "/bots",
                        {
                            "name": "b",
                            "chat_model_id": model["id"],
                            "response_reserve": RESERVE,
                            "compaction_enabled": False,
                        },
                    )
                )["bot"]
                chat = (await post("/chats", {"bot_id": bot["id"]}))["chat"]
                for n, text in enumerate(texts):
                    role = "user" if n % 2 == 0 else "assistant"
                    await post(f"/chats/{chat['id']}/messages", {"role": role, "content": text})
                for turn in range(turns):
                    since = len(fake.requests)
                    response = await http.post(
                        f"/chats/{chat['id']}/generate", json={"content": question(turn), "stream": False}
                    )
                    rejected = _rejected(fake, since, counting)
                    outcome.wasted += sum(rejected)
                    audit = (await http.get(f"/chats/{chat['id']}/context-audit")).json()["audit"]
                    if audit["attempts"]:
                        outcome.retried += 1
                    if response.status_code != 200:
                        outcome.failed += 1
                        continue
                    accepted = [r for r in fake.requests[since:] if not r.over_limit and r.protocol == "openai"]
                    outcome.accepted += 1
                    outcome.accepted_tokens += counting.prompt_tokens(accepted[-1].json)
                calibration = (await http.get(f"/models/{model['id']}")).json()["model"]["calibration"]
                outcome.factor, outcome.calls = calibration["factor"], calibration["calls"]
    return outcome


async def run_baseline(fake: FakeProvider, density: float, turns: int, seed: int) -> Outcome:
    from langchain_core.messages import AIMessage, HumanMessage, convert_to_openai_messages
    from langchain_core.messages.utils import count_tokens_approximately, trim_messages

    texts = history(seed)
    counting = real_counter(density, texts)
    fake.reset()
    fake.count_as(counting)
    outcome = Outcome("4-chars estimate (LangChain)", density, turns)
    messages: list[Any] = [(HumanMessage if n % 2 == 0 else AIMessage)(content=t) for n, t in enumerate(texts)]
    async with httpx.AsyncClient(base_url=fake.base_url, timeout=60) as http:
        for turn in range(turns):
            messages.append(HumanMessage(content=question(turn)))
            kept = trim_messages(
                messages,
                max_tokens=BUDGET,
                token_counter=count_tokens_approximately,
                strategy="last",
                start_on="human",
            )
            body = {"model": "mystery-model", "messages": convert_to_openai_messages(kept), "max_tokens": RESERVE}
            response = await http.post("/chat/completions", json=body)
            tokens = counting.prompt_tokens(body)
            if response.status_code != 200:
                outcome.retried += 1
                outcome.failed += 1
                outcome.wasted += tokens
                continue
            outcome.accepted += 1
            outcome.accepted_tokens += tokens
            messages.append(AIMessage(content=response.json()["choices"][0]["message"]["content"]))
    return outcome


def table(rows: list[Outcome]) -> str:
    lines = [
        "| tokenizer vs estimate | policy | turns | needed a retry | failed turns | wasted upstream tokens | "
        "window use | learned factor |",
        "|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for o in rows:
        factor = f"×{o.factor:.2f} ({o.calls} calls)" if o.factor is not None else "–"
        lines.append(
            f"| {o.density:g}× | {o.policy} | {o.turns} | {o.retried / o.turns:.0%} | {o.failed} | "
            f"{o.wasted:,} | {o.window_use} | {factor} |"
        )
    return "\n".join(lines)


async def main_async(turns: int, seed: int) -> list[Outcome]:
    rows: list[Outcome] = []
    with FakeProvider() as fake:
        for density in DENSITIES:
            ours = await run_contextshift(fake, density, turns, seed)
            theirs = await run_baseline(fake, density, turns, seed)
            for row in (ours, theirs):
                say(
                    f"{density:g}x {row.policy:30} retry {row.retried:3}/{turns}  failed {row.failed:3}  "
                    f"wasted {row.wasted:8,}  window use {row.window_use:>4}  factor {row.factor}"
                )
            rows += [ours, theirs]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20 turns per tokenizer; writes no results file")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--write", action="store_true", help="write the results file even with --quick")
    args = parser.parse_args(argv)
    turns = args.turns or (20 if args.quick else 100)
    rows = asyncio.run(main_async(turns, args.seed))
    report = table(rows)
    say("\n" + report)
    if args.write or not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            "# Calibration benchmark: retries and wasted tokens against a fixed 4-characters estimate\n\n"
            f"`python -m benchmarks.calibration` — {turns} turns per tokenizer on a chat of {HISTORY} stored "
            f"messages (prose, code, JSON, some Russian); window {WINDOW:,}, reply reserve {RESERVE} (prompt "
            f"budget {BUDGET:,}). The fake provider counts with o200k, scaled so that over the stored history "
            "it is d times the estimate (varying by content as a real tokenizer does), rejects a prompt plus "
            "max_tokens over the window stating the real count, and reports real usage. contextshift: the "
            "service (approximate profile, calibration from usage, 10% margin until calibrated, recovery "
            "inside the turn). Baseline: LangChain `trim_messages` with `count_tokens_approximately`, no "
            "recovery. *Needed a retry*: contextshift turns with a context-length-retry (each still "
            "answered); baseline turns rejected. *Wasted upstream tokens*: the real prompt tokens of rejected "
            "requests. *Window use*: mean real prompt of accepted requests over the budget.\n\n" + report + "\n",
            encoding="utf-8",
        )
        say(f"wrote {RESULTS}")
    ours = [r for r in rows if r.policy == "contextshift"]
    if any(r.failed for r in ours):  # a smoke run fails loudly when a turn did not get its reply
        print("contextshift failed a turn", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
