"""Benchmark: automatic compaction — turn latency on against off, and summarizer work against a Codex-like baseline.

Run from the project root:

    .venv/bin/python -m benchmarks.compaction           # full run (300 turns) -> benchmarks/results/compaction.md
    .venv/bin/python -m benchmarks.compaction --quick   # CI smoke (80 turns, shorter pauses), writes nothing by default

What it does. Every scenario gets a fresh SQLite file in a temporary folder, the FastAPI app (``create_app``)
under uvicorn on a loopback port in a background thread (``benchmarks.service.Service``), and its own fake
model: a tiny OpenAI-compatible ``/chat/completions`` endpoint (:class:`ScriptedModel`, also under uvicorn in
a thread). The fake answers a chat request with the scripted reply to its last user message and a
summarizer request (recognised by its system prompt, "You condense the older part of a conversation…")
with a short summary made of the transcript's own words (``compaction_data.summary_text``: 15% of the
transcript, capped by the request's ``max_tokens``); usage is counted exactly with o200k (its own profile
instance), and every call waits an artificial latency, as a real model would (30 ms a chat call, 80 ms a
summarizer call; ``--quick``: 20 and 50 ms). Over HTTP it creates a provider, a model (``gpt-4o``, context
window 8,000) and a bot (reply reserve 512, so a prompt may use 7,488 tokens), runs a short warm-up chat,
then plays the scripted session (300 turns, 80 with ``--quick``: users 20–120 words, replies 40–60 words,
see ``benchmarks/compaction_data.py``) into one chat, one ``POST /chats/{id}/generate`` (``stream: false``)
a turn, reading the context audit after each turn (prompt tokens, ``context-shift`` entries, raw history
kept) outside the timed call.

Scenarios (the same script each time):

* ``off`` — ``compaction_enabled: false``: the prompt is kept in budget by context shifting alone;
* ``on`` — automatic compaction (threshold 0): after a turn, ≥ 50% of the window queues a background pass
  (in-process job runner, off the request path); before a turn, ≥ 75% runs a synchronous pass first;
  target 40%;
* ``off`` and ``on`` run side by side, each on its own server and SQLite file: turn ``i`` of ``off``, turn
  ``i`` of ``on``, then a pause (the user reading the reply: 0.25 s, 0.15 s with ``--quick``), so that load
  from other processes falls on both alike and turn ``i`` can be compared with turn ``i`` (*paired Δ*);
* then ``off, back-to-back`` and ``on, back-to-back``, each alone, with no pause at all (the next turn is
  sent as soon as the reply and the audit are read, as an agent loop would); ``--no-back-to-back`` skips
  them, and so does ``--quick`` unless ``--back-to-back`` is given.

Measured: turn latency (wall time of the whole HTTP call; median, p95, p99 nearest rank) with compaction on
against off, and, for "on", separately for the turns that paid a synchronous pass (a ``sync`` log started
inside the call), the turns a background run overlapped (a ``background`` log's interval intersects the
call), the turns that queued a background run, and the rest; how long the two compaction checks take in the
server (``Compactor.before_send``, awaited before every turn, and ``Compactor.after_turn``, the task started
after each reply: timed by wrappers this benchmark installs in its own process); the summarizer calls and
their tokens (the fake's own counts, which include calls whose summary was then not committed; the compaction
logs give runs, passes and error codes); turns whose prompt had to be shifted (audit entries
``context-shift``), prompt sizes, and the fewest raw history messages a prompt held once compaction had
started.

The baseline is a simulation over the same script, "Codex-like": when the prompt (system + history + the new
input, counted with ``contextshift.get_tokenizer("gpt-4o")``) reaches 90% of the window, the whole history,
the previous summary included, goes to the summarizer (contextshift's own summarizer prompt and renderer, no
input cap) and one summary replaces all of it; the summary follows the same rule as the fake's. A prompt
still over the budget would be shifted (counted). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import platform
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from contextshift import __version__, get_tokenizer
from contextshift.api.app import create_app
from contextshift.core.compaction import build_prompt, max_output_tokens
from contextshift.core.messages import Message
from contextshift.tokenizers import TiktokenProfile

from . import compaction_data as data
from .report import load_note, say
from .service import Service, created, markdown_table, peak_rss_mib, post, text_table
from .signin import BENCH_HEADERS, BENCH_TOKEN

RESULTS = Path(__file__).resolve().parent / "results" / "compaction.md"
API = "/api/v2"
MODEL_NAME = "gpt-4o"
WINDOW = 8_000
RESERVE = 512
MAX_OUTPUT = 1_024
BASELINE_SHARE = 0.90
SUMMARIZER_PREFIX = "You condense the older part of a conversation"
SHIFT_REASONS = ("context-shift", "final-budget")
WARMUP_TURNS = 3
#: A run log whose start lies this close to a turn's call is attributed to it (clock and scheduling slack).
SLACK = 0.002


@dataclass(frozen=True)
class Config:
    quick: bool
    turns: int
    think: float
    chat_latency: float
    summarizer_latency: float
    back_to_back: bool
    seed: str


# -- the fake model -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    kind: str  # "chat" | "summarizer"
    started: float  # time.time()
    finished: float
    input_tokens: int
    output_tokens: int


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class ScriptedModel:
    """An OpenAI-compatible ``POST …/chat/completions`` (raw ASGI): scripted replies, short summaries, exact usage.

    Chat requests get the scripted reply to their last user message (``Echo: …`` for an unscripted one, e.g.
    the warm-up); summarizer requests get ``compaction_data.summary_text`` of their transcript. Each call is
    recorded (:attr:`calls`) with the wall time it started and finished and its usage.
    """

    def __init__(self, replies: dict[str, str], *, chat_latency: float, summarizer_latency: float) -> None:
        self.replies = replies
        self.chat_latency = chat_latency
        self.summarizer_latency = summarizer_latency
        self.profile = TiktokenProfile("o200k_base")  # its own count cache: the service's runs in another thread
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self.in_flight = 0
        self.unscripted = 0
        self._serial = 0

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def reset(self) -> None:
        with self._lock:
            self._calls.clear()
            self.unscripted = 0

    def _count(self, messages: list[dict[str, Any]]) -> int:
        return self.profile.count_messages(
            [Message(role=str(m.get("role", "user")), content=_text(m.get("content"))) for m in messages]
        )

    def _answer(self, request: dict[str, Any]) -> tuple[str, str, int, int, float]:
        """(kind, text, prompt tokens, completion tokens, latency) for one request."""
        messages = [m for m in request.get("messages", []) if isinstance(m, dict)]
        prompt_tokens = self._count(messages)
        if messages and _text(messages[0].get("content")).startswith(SUMMARIZER_PREFIX):
            user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
            body = data.transcript_body(user)
            max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
            size = data.summary_length(self.profile.count(body), int(max_tokens) if max_tokens else None)
            text = data.summary_text(body, size, self.profile.count)
            return "summarizer", text, prompt_tokens, self.profile.count(text), self.summarizer_latency
        last = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        text = self.replies.get(last)
        if text is None:
            with self._lock:
                self.unscripted += 1
            text = f"Echo: {last[:200]}"
        return "chat", text, prompt_tokens, self.profile.count(text), self.chat_latency

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        raw = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await self._json(send, 404, {"error": {"message": "no such route", "type": "not_found_error"}})
            return
        try:
            request = json.loads(raw)
        except ValueError:
            await self._json(send, 400, {"error": {"message": "not JSON", "type": "invalid_request_error"}})
            return
        if request.get("stream"):
            await self._json(send, 400, {"error": {"message": "stream not scripted", "type": "invalid_request_error"}})
            return
        started = time.time()
        with self._lock:
            self.in_flight += 1
            self._serial += 1
            serial = self._serial
        try:
            kind, text, prompt_tokens, completion_tokens, latency = self._answer(request)
            if latency > 0:
                await asyncio.sleep(latency)
            payload = {
                "id": f"chatcmpl-bench-{serial}",
                "object": "chat.completion",
                "created": int(started),
                "model": request.get("model", MODEL_NAME),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
            await self._json(send, 200, payload)
            with self._lock:
                self._calls.append(Call(kind, started, time.time(), prompt_tokens, completion_tokens))
        finally:
            with self._lock:
                self.in_flight -= 1

    @staticmethod
    async def _json(send: Any, status: int, payload: dict[str, Any]) -> None:
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


# -- one scenario against the service -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnRecord:
    index: int
    started: float  # wall clock (time.time()) around the call, to match the run logs
    finished: float
    seconds: float  # perf_counter wall time of the call
    prompt_tokens: int
    shifted_entries: int  # audit entries left out by context shifting
    raw_history: int  # raw history messages in the prompt (the current input included)
    summaries: int  # compaction summaries in the prompt


@dataclass(frozen=True, slots=True)
class RunLog:
    trigger: str
    status: str
    passes: int
    message_count: int
    input_tokens: int
    output_tokens: int
    error_code: str | None
    started: float
    completed: float | None


@dataclass
class Scenario:
    name: str
    compaction: bool
    think: float
    turns: list[TurnRecord] = field(default_factory=list)
    logs: list[RunLog] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    #: Seconds each compaction check took in the server (``before_send``: on the request path of every turn;
    #: ``after_turn``: the task started after each reply), see :func:`install_probes`.
    checks: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    rss_mib: float = 0.0

    # -- classification of turns
    def sync_turns(self) -> set[int]:
        out: set[int] = set()
        for log in self.logs:
            if log.trigger == "sync":
                for t in self.turns:
                    if t.started - SLACK <= log.started <= t.finished + SLACK:
                        out.add(t.index)
        return out

    def overlapped_turns(self) -> set[int]:
        out: set[int] = set()
        for log in self.logs:
            if log.trigger != "background":
                continue
            end = log.completed if log.completed is not None else math.inf
            for t in self.turns:
                if log.started < t.finished and end > t.started:
                    out.add(t.index)
        return out

    def queued_turns(self) -> set[int]:
        """Turns after which a background run started (before the next turn began): the turns that queued it."""
        out: set[int] = set()
        for log in self.logs:
            if log.trigger == "background":
                before = [t for t in self.turns if t.finished <= log.started + SLACK]
                if before:
                    out.add(before[-1].index)
        return out

    @property
    def summarizer_calls(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "summarizer"]

    def first_compaction_turn(self) -> int | None:
        return next((t.index for t in self.turns if t.summaries), None)

    def background_delays(self) -> list[float]:
        """Seconds from the end of the turn that queued it to the start of each background run."""
        ends = sorted(t.finished for t in self.turns)
        out = []
        for log in self.logs:
            if log.trigger == "background":
                before = [e for e in ends if e <= log.started + SLACK]
                if before:
                    out.append(max(0.0, log.started - before[-1]))
        return out


#: id(app.state.compactor) -> check name -> seconds of each call (filled by the wrappers of install_probes).
PROBES: dict[int, dict[str, list[float]]] = {}
CHECKS = ("before_send", "after_turn")


def install_probes() -> None:
    """Time ``Compactor.before_send`` (awaited before every turn is sent) and ``Compactor.after_turn`` (the
    after-reply check, run as a task) per app: the benchmark's own wrappers, in this process only."""
    from contextshift.service.compaction import Compactor

    for name in CHECKS:
        original = getattr(Compactor, name)
        if getattr(original, "_bench_probe", False):
            continue

        def probe(original: Any = original, name: str = name) -> Any:
            @functools.wraps(original)
            async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await original(self, *args, **kwargs)
                finally:
                    bucket = PROBES.get(id(self))
                    if bucket is not None:
                        bucket.setdefault(name, []).append(time.perf_counter() - start)

            timed._bench_probe = True  # type: ignore[attr-defined]
            return timed

        setattr(Compactor, name, probe())


def _timestamp(value: Any) -> float | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _get(client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    response = client.get(path, params=params or None)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} answered {response.status_code}: {response.text[:500]}")
    answer: dict[str, Any] = response.json()
    return answer


def all_logs(client: httpx.Client, chat_id: str) -> list[RunLog]:
    rows: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = _get(client, f"{API}/chats/{chat_id}/compaction/logs", limit=100, offset=offset)
        rows.extend(page["logs"])
        if not page["has_more"]:
            break
        offset += len(page["logs"])
    logs = [
        RunLog(
            trigger=r["trigger"],
            status=r["status"],
            passes=int(r["passes"] or 0),
            message_count=int(r["message_count"] or 0),
            input_tokens=int(r["input_tokens"] or 0),
            output_tokens=int(r["output_tokens"] or 0),
            error_code=r["error_code"],
            started=_timestamp(r["started_at"]) or 0.0,
            completed=_timestamp(r["completed_at"]),
        )
        for r in rows
    ]
    return sorted(logs, key=lambda log: log.started)


def settle(client: httpx.Client, chat_id: str, model: ScriptedModel, quiet: float, limit: float = 30.0) -> None:
    """Wait until no compaction run is running or starting: nothing in flight and no new log for ``quiet`` s."""
    deadline = time.monotonic() + limit
    marker: tuple[Any, ...] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        page = _get(client, f"{API}/chats/{chat_id}/compaction/logs", limit=1)["logs"]
        now = (page[0]["id"] if page else None, page[0]["status"] if page else None, len(model.calls))
        busy = model.in_flight > 0 or (page and page[0]["status"] == "running")
        if now != marker or busy:
            marker, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def audit_of(client: httpx.Client, chat_id: str) -> dict[str, Any]:
    audit: dict[str, Any] | None = _get(client, f"{API}/chats/{chat_id}/context-audit")["audit"]
    if audit is None or audit["status"] != "completed":
        raise RuntimeError(f"the turn left no completed audit: {audit and audit['status']}")
    return audit


class Live:
    """One scenario while it runs: a fresh SQLite file, the app and its fake model, one bot and one chat."""

    def __init__(self, name: str, compaction: bool, think: float, cfg: Config, script: list[data.Exchange]) -> None:
        self.scenario = Scenario(name, compaction, think)
        self.cfg = cfg
        self.model = ScriptedModel(
            {e.user: e.reply for e in script}, chat_latency=cfg.chat_latency, summarizer_latency=cfg.summarizer_latency
        )
        self.stack = contextlib.ExitStack()
        self.client: httpx.Client | None = None
        self.chat_id = ""
        self.started = 0.0
        self.probe_key = 0

    def __enter__(self) -> Live:
        self.started = time.perf_counter()
        stack = self.stack
        try:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="contextshift-compaction-bench-")))
            fake = stack.enter_context(Service(self.model))
            app = create_app(f"sqlite:///{folder / 'compaction.db'}", admin_token=BENCH_TOKEN)
            self.probe_key = id(app.state.compactor)
            service = stack.enter_context(Service(app))
            self.client = client = stack.enter_context(
                httpx.Client(base_url=service.base_url, timeout=120, headers=BENCH_HEADERS)
            )
            provider_id = created(
                client,
                "/providers",
                "provider",
                {"name": "scripted", "kind": "openai", "base_url": fake.base_url, "api_key": "sk-bench"},
            )
            model_id = created(
                client,
                "/models",
                "model",
                {
                    "provider_id": provider_id,
                    "name": MODEL_NAME,
                    "type": "chat",
                    "context_window": WINDOW,
                    "max_output_tokens": MAX_OUTPUT,
                },
            )
            bot_id = created(
                client,
                "/bots",
                "bot",
                {
                    "name": f"bench-{self.scenario.name}",
                    "chat_model_id": model_id,
                    "system_prompt": data.SYSTEM_PROMPT,
                    "response_reserve": RESERVE,
                    "compaction_enabled": self.scenario.compaction,
                    "compaction_threshold": 0,
                },
            )
            warmup = created(client, "/chats", "chat", {"bot_id": bot_id})
            for n in range(WARMUP_TURNS):  # imports, compiled queries, the tokenizer: out of the timed chat
                post(client, f"{API}/chats/{warmup}/generate", {"content": f"Warm-up turn {n}.", "stream": False})
            self.chat_id = created(client, "/chats", "chat", {"bot_id": bot_id})
            settle(client, warmup, self.model, quiet=0.2)
            self.model.reset()
            PROBES[self.probe_key] = {}  # from the measured chat on
        except BaseException:
            stack.close()
            raise
        return self

    def turn(self, index: int, exchange: data.Exchange) -> None:
        client = self.client
        assert client is not None
        wall = time.time()
        body = {"content": exchange.user, "stream": False}
        elapsed, answer = post(client, f"{API}/chats/{self.chat_id}/generate", body)
        finished = time.time()
        if answer["message"]["content"] != exchange.reply:
            raise RuntimeError(f"turn {index}: unexpected reply {str(answer['message']['content'])[:80]!r}")
        entries = audit_of(client, self.chat_id)
        self.scenario.turns.append(
            TurnRecord(
                index=index,
                started=wall,
                finished=finished,
                seconds=elapsed,
                prompt_tokens=int(entries["budget"].get("prompt_tokens", 0)),
                shifted_entries=sum(1 for e in entries["entries"] if e["reason"] in SHIFT_REASONS),
                raw_history=sum(1 for e in entries["entries"] if e["included"] and e["source"] in ("history", "input")),
                summaries=sum(1 for e in entries["entries"] if e["included"] and e["source"] == "summary"),
            )
        )

    def finish(self) -> Scenario:
        client = self.client
        assert client is not None
        settle(client, self.chat_id, self.model, quiet=max(0.5, 4 * self.cfg.summarizer_latency))
        scenario = self.scenario
        scenario.logs = all_logs(client, self.chat_id)
        scenario.status = _get(client, f"{API}/chats/{self.chat_id}/status")["status"]
        scenario.calls = self.model.calls
        scenario.checks = PROBES.pop(self.probe_key, {})
        if self.model.unscripted:
            raise RuntimeError(f"{self.model.unscripted} chat requests had no scripted reply")
        return scenario

    def __exit__(self, *_exc: object) -> None:
        self.stack.close()
        self.scenario.seconds = time.perf_counter() - self.started
        self.scenario.rss_mib = peak_rss_mib()


def run_interleaved(
    specs: Sequence[tuple[str, bool, float]], cfg: Config, script: list[data.Exchange]
) -> list[Scenario]:
    """Run the scenarios side by side: turn ``i`` of each in order, then the pause. Load from other processes
    falls on every scenario alike, turn ``i`` of one can be compared with turn ``i`` of another, and every
    chat sees the same gap between its turns (the pause plus the other scenarios' turns)."""
    pause = max(think for _, _, think in specs)
    with contextlib.ExitStack() as stack:
        lives = [stack.enter_context(Live(name, compaction, think, cfg, script)) for name, compaction, think in specs]
        for index, exchange in enumerate(script):
            for live in lives:
                live.turn(index, exchange)
            if pause > 0:
                time.sleep(pause)
        return [live.finish() for live in lives]


# -- the Codex-like baseline (simulated) --------------------------------------------------------------------


@dataclass
class Baseline:
    budget: int
    trigger: int
    calls: list[tuple[int, int]] = field(default_factory=list)  # (input tokens, output tokens) per summarization
    call_turns: list[int] = field(default_factory=list)
    prompts: list[int] = field(default_factory=list)
    shifted: list[int] = field(default_factory=list)  # turns whose prompt was over the budget
    raw_history: list[int] = field(default_factory=list)  # raw history messages in each prompt (input included)


def simulate_baseline(
    script: Sequence[data.Exchange], *, window: int, reserve: int, share: float = BASELINE_SHARE
) -> Baseline:
    """Replay the script: at ``share`` of the window, summarize the whole history (and the last summary) into one."""
    profile = get_tokenizer(MODEL_NAME)
    result = Baseline(budget=window - reserve, trigger=int(window * share))
    system = Message(role="system", content=data.SYSTEM_PROMPT, id="system")
    cap = max_output_tokens(window)
    history: list[Message] = []
    for index, exchange in enumerate(script):
        user = Message(role="user", content=exchange.user, id=f"u{index}")
        prompt = profile.count_messages([system, *history, user])
        if prompt >= result.trigger and history:
            request = build_prompt(history, count=profile.count)  # everything, no input cap (as Codex)
            input_tokens = profile.count_messages(request.messages())
            body = data.transcript_body(request.user)
            text = data.summary_text(body, data.summary_length(profile.count(body), cap), profile.count)
            result.calls.append((input_tokens, profile.count(text)))
            result.call_turns.append(index)
            history = [Message(role="system", content=text, id=f"s{index}", source="summary")]
            prompt = profile.count_messages([system, *history, user])
        kept = list(history)
        if prompt > result.budget:
            result.shifted.append(index)
            while kept and prompt > result.budget:
                kept.pop(0)
                prompt = profile.count_messages([system, *kept, user])
        result.prompts.append(prompt)
        result.raw_history.append(1 + sum(1 for m in kept if m.source != "summary"))
        history += [user, Message(role="assistant", content=exchange.reply, id=f"a{index}")]
    return result


# -- the report ---------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "–"
    if b == 0:
        return "–" if a == 0 else "∞"
    return f"{a / b:.2f}×"


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


LATENCY_HEADERS = (
    "scenario",
    "pause s",
    "turns",
    "median ms",
    "p95 ms",
    "p99 ms",
    "max ms",
    "median ÷ off",
    "paired Δ ms (IQR)",
)


def _paired(s: Scenario, offs: dict[float, Scenario]) -> str:
    """Median (and interquartile range) of turn i on minus turn i off, same pause."""
    if not s.compaction or s.think not in offs:
        return "–"
    base = {t.index: t.seconds for t in offs[s.think].turns}
    diffs = sorted((t.seconds - base[t.index]) * 1000 for t in s.turns if t.index in base)
    if not diffs:
        return "–"
    low, high = percentile(diffs, 0.25), percentile(diffs, 0.75)
    return f"{statistics.median(diffs):+.1f} ({low:+.0f}…{high:+.0f})"


def latency_cells(scenarios: list[Scenario]) -> list[list[str]]:
    offs = {s.think: s for s in scenarios if not s.compaction}
    off = {think: _median([t.seconds for t in s.turns]) for think, s in offs.items()}
    body = []
    for s in scenarios:
        seconds = [t.seconds for t in s.turns]
        median = _median(seconds)
        body.append(
            [
                s.name,
                f"{s.think:g}",
                str(len(s.turns)),
                _ms(median),
                _ms(percentile(seconds, 0.95)),
                _ms(percentile(seconds, 0.99)),
                _ms(max(seconds) if seconds else None),
                _ratio(median, off.get(s.think)) if s.compaction else "1.00×",
                _paired(s, offs),
            ]
        )
    return body


WHERE_HEADERS = (
    "scenario",
    "pre-send check ms",
    "after-turn check ms",
    "turns that queued a bg run",
    "their median ms",
    "turns overlapped by a bg run",
    "their median ms",
    "sync-pass turns",
    "their median ms",
    "other turns median ms",
)


def _count_median(s: Scenario, turns: set[int]) -> tuple[str, str]:
    return str(len(turns)), _ms(_median([t.seconds for t in s.turns if t.index in turns]))


def where_cells(scenarios: list[Scenario]) -> list[list[str]]:
    body = []
    for s in scenarios:
        sync = s.sync_turns()
        overlapped = s.overlapped_turns() - sync
        queued = s.queued_turns() - sync - overlapped
        other = [t.seconds for t in s.turns if t.index not in sync | overlapped | queued]
        body.append(
            [
                s.name,
                _ms(_median(s.checks.get("before_send", []))),
                _ms(_median(s.checks.get("after_turn", []))),
                *_count_median(s, queued),
                *_count_median(s, overlapped),
                *_count_median(s, sync),
                _ms(_median(other)),
            ]
        )
    return body


@dataclass(frozen=True)
class Work:
    """One policy's summarizer work and prompts over the session."""

    policy: str
    calls: int
    on_request_path: int
    wasted: int
    input_tokens: int
    output_tokens: int
    largest_input: int
    shifted_turns: int
    mean_prompt: float
    max_prompt: int
    fewest_raw: int | None  # fewest raw history messages in a prompt after the first compaction

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def work_of(s: Scenario) -> Work:
    calls = s.summarizer_calls
    sync_passes = sum(log.passes for log in s.logs if log.trigger == "sync")
    wasted = sum(1 for log in s.logs if log.status == "failed" and log.passes > 0)
    first = s.first_compaction_turn()
    after = [t.raw_history for t in s.turns if first is not None and t.index >= first]
    prompts = [t.prompt_tokens for t in s.turns]
    return Work(
        policy=f"contextshift, {s.name}" if s.compaction else f"no compaction, {s.name}",
        calls=len(calls),
        on_request_path=sync_passes,
        wasted=wasted,
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        largest_input=max((c.input_tokens for c in calls), default=0),
        shifted_turns=sum(1 for t in s.turns if t.shifted_entries),
        mean_prompt=statistics.fmean(prompts) if prompts else 0.0,
        max_prompt=max(prompts, default=0),
        fewest_raw=min(after) if after else None,
    )


def baseline_work(b: Baseline) -> Work:
    first = b.call_turns[0] if b.call_turns else None
    after = b.raw_history[first:] if first is not None else []
    return Work(
        policy=f"Codex-like baseline ({BASELINE_SHARE:.0%}, summarize everything)",
        calls=len(b.calls),
        on_request_path=len(b.calls),
        wasted=0,
        input_tokens=sum(i for i, _ in b.calls),
        output_tokens=sum(o for _, o in b.calls),
        largest_input=max((i for i, _ in b.calls), default=0),
        shifted_turns=len(b.shifted),
        mean_prompt=statistics.fmean(b.prompts) if b.prompts else 0.0,
        max_prompt=max(b.prompts, default=0),
        fewest_raw=min(after) if after else None,
    )


WORK_HEADERS = (
    "policy",
    "summarizer calls",
    "on the request path",
    "not committed",
    "input tokens",
    "output tokens",
    "total tokens",
    "largest input",
    "turns shifted",
    "mean prompt",
    "max prompt",
    "fewest raw msgs in a prompt",
)


def work_cells(works: list[Work]) -> list[list[str]]:
    return [
        [
            w.policy,
            _n(w.calls),
            _n(w.on_request_path),
            _n(w.wasted),
            _n(w.input_tokens),
            _n(w.output_tokens),
            _n(w.total_tokens),
            _n(w.largest_input),
            _n(w.shifted_turns),
            _n(w.mean_prompt),
            _n(w.max_prompt),
            _n(w.fewest_raw),
        ]
        for w in works
    ]


RATIO_HEADERS = ("measure", "contextshift", "baseline", "contextshift ÷ baseline")


def ratio_cells(ours: Work, base: Work) -> list[list[str]]:
    rows = [
        ("summarizer calls", ours.calls, base.calls),
        ("calls on the request path (a turn waits)", ours.on_request_path, base.on_request_path),
        ("summarizer input tokens", ours.input_tokens, base.input_tokens),
        ("summarizer output tokens", ours.output_tokens, base.output_tokens),
        ("summarizer tokens in all", ours.total_tokens, base.total_tokens),
        ("largest single summarizer input", ours.largest_input, base.largest_input),
        (
            "mean input tokens a call",
            ours.input_tokens / ours.calls if ours.calls else None,
            base.input_tokens / base.calls if base.calls else None,
        ),
        ("turns whose prompt was shifted", ours.shifted_turns, base.shifted_turns),
        ("mean prompt tokens", ours.mean_prompt, base.mean_prompt),
        ("max prompt tokens", ours.max_prompt, base.max_prompt),
        ("fewest raw history messages in a prompt", ours.fewest_raw, base.fewest_raw),
    ]
    return [[name, _n(a), _n(b), _ratio(a, b)] for name, a, b in rows]


def runs_line(s: Scenario) -> str:
    """Runs by trigger and status, passes, error codes, and how soon background runs started."""
    if not s.logs:
        return f"{s.name}: no compaction runs"
    groups: dict[tuple[str, str], int] = {}
    for log in s.logs:
        groups[(log.trigger, log.status)] = groups.get((log.trigger, log.status), 0) + 1
    parts = [f"{trigger} {status} ×{n}" for (trigger, status), n in sorted(groups.items())]
    codes: dict[str, int] = {}
    for log in s.logs:
        if log.error_code:
            codes[log.error_code] = codes.get(log.error_code, 0) + 1
    passes = sum(log.passes for log in s.logs)
    folded = sum(log.message_count for log in s.logs)
    durations = [log.completed - log.started for log in s.logs if log.completed is not None and log.passes]
    delays = s.background_delays()
    text = f"{s.name}: runs {', '.join(parts)}; {passes} passes folded {folded} messages"
    if codes:
        text += "; errors " + ", ".join(f"{c} ×{n}" for c, n in sorted(codes.items()))
    if durations:
        text += f"; a run with passes took {_ms(_median(durations))} ms median ({_ms(max(durations))} max)"
    if delays:
        text += f"; background runs started {_ms(_median(delays))} ms median ({_ms(max(delays))} max) after a turn"
    first = s.first_compaction_turn()
    if first is not None:
        text += f"; first summary in the prompt at turn {first + 1}"
    failed = next((log for log in s.logs if log.status == "failed"), None)
    if failed is not None:
        before = [t for t in s.turns if t.started <= failed.started]
        text += f"; first failed run started during or after turn {before[-1].index + 1 if before else 0}"
    automatic = s.status.get("automatic") or {}
    if automatic and not automatic.get("active"):
        text += f"; at the end automatic compaction was inactive ({automatic.get('reason')})"
    return text


def machine() -> str:
    return ", ".join(
        [
            f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
            f"contextshift {__version__}",
            f"SQLite {sqlite3.sqlite_version}",
            f"uvicorn {uvicorn.__version__}",
            f"httpx {httpx.__version__}",
        ]
    )


def describe(cfg: Config) -> str:
    return (
        f"{cfg.turns} turns, window {WINDOW:,} (prompt budget {WINDOW - RESERVE:,} after a {RESERVE}-token "
        f"reply reserve), fake latency {cfg.chat_latency * 1000:.0f} ms a chat call and "
        f"{cfg.summarizer_latency * 1000:.0f} ms a summarizer call, pause between turns {cfg.think:g} s"
    )


def markdown(
    cfg: Config, scenarios: list[Scenario], base: Baseline, works: list[Work], ours: Work, load: str, command: str
) -> str:
    lines = [
        "# Compaction benchmark: turn latency on against off, summarizer work against a Codex-like baseline",
        "",
        f"`{command}` — {describe(cfg)}. Every scenario is a fresh SQLite file and the app "
        "under uvicorn on a loopback port; the model is a fake OpenAI-compatible endpoint in the same process "
        "(scripted replies; summaries of 15% of the transcript made of its own words, capped by `max_tokens`; "
        "usage counted exactly with o200k). Each turn is one `POST /chats/{id}/generate` (`stream: false`), "
        "wall time of the whole HTTP call; the context audit is read after it, outside the timing.",
        "",
        "## Turn latency",
        "",
        "`off` and `on` ran side by side (turn i of each, then the pause), so *paired Δ* — the median, and the "
        "interquartile range, of turn i on minus turn i off — is the fairest comparison; the back-to-back "
        "scenarios ran one after the other (their Δ compares turns minutes apart). p95/p99 are nearest rank.",
        "",
        markdown_table(LATENCY_HEADERS, latency_cells(scenarios), left=1),
        "",
        "Where the time goes. *Pre-send check*: `Compactor.before_send`, awaited before every turn is sent "
        "(the decision: it reads the chat, bot, model, summaries and the recent window, and runs a synchronous "
        "pass at 75%); *after-turn check*: `Compactor.after_turn`, the task started as each reply is stored "
        "(the 50% decision and the queueing), elapsed time in the server's event loop (timed by the benchmark's "
        "own wrappers). *Turns that queued a bg run*: the turn after which a background run started. *Turns "
        "overlapped by a bg run*: a background run's interval intersects the call (it shares the process and "
        "the database with the turn). *Sync-pass turns*: a `sync` run started inside the call (the turn waited "
        "for it).",
        "",
        markdown_table(WHERE_HEADERS, where_cells(scenarios), left=1),
        "",
        "## Summarizer work and prompts over the session",
        "",
        "Calls and tokens are the fake's own counts (every summarizer request, also one whose summary was then "
        "not committed: *not committed*). *On the request path*: passes a turn had to wait for (contextshift: "
        "synchronous passes; the baseline summarizes inline before the turn). *Turns shifted*: the prompt left "
        "out history to fit the budget (audit entries `context-shift`; baseline: prompt over the budget). "
        "*Fewest raw msgs*: the fewest raw history messages (the current input included) any prompt held "
        "after the first compaction.",
        "",
        markdown_table(WORK_HEADERS, work_cells(works), left=1),
        "",
        f"contextshift (`{ours.policy.split(', ', 1)[1]}`) against the baseline:",
        "",
        markdown_table(RATIO_HEADERS, ratio_cells(ours, baseline_work(base)), left=1),
        "",
        "Compaction runs (from the chat's compaction logs):",
        "",
        *[f"- {runs_line(s)}" for s in scenarios if s.compaction],
        "",
        f"Baseline: summarized at turns {', '.join(str(t + 1) for t in base.call_turns) or 'none'} (trigger "
        f"{base.trigger:,} tokens = {BASELINE_SHARE:.0%} of the window; budget {base.budget:,}). "
        + baseline_note(cfg, base),
        "",
        "## What the run shows",
        "",
        *[f"- {line}" for line in findings(scenarios, ours, baseline_work(base))],
        "",
        f"{machine()}; {load}.",
        "",
    ]
    return "\n".join(lines)


def _paired_median(s: Scenario, off: Scenario) -> float | None:
    base = {t.index: t.seconds for t in off.turns}
    return _median([t.seconds - base[t.index] for t in s.turns if t.index in base])


def findings(scenarios: list[Scenario], ours: Work, base: Work) -> list[str]:
    """Plain sentences from this run's figures (nothing here is asserted)."""
    out: list[str] = []
    by_name = {s.name: s for s in scenarios}
    on, off = by_name.get("on"), by_name.get("off")
    if on is not None and off is not None:
        paired = _paired_median(on, off)
        sync = on.sync_turns()
        overlapped = on.overlapped_turns() - sync
        pre_on, pre_off = _median(on.checks.get("before_send", [])), _median(off.checks.get("before_send", []))
        text = (
            f"With a {on.think:g} s pause between turns, compaction on changed the turn's median by "
            f"{(paired or 0) * 1000:+.1f} ms (paired; median ÷ off "
            f"{_ratio(_median([t.seconds for t in on.turns]), _median([t.seconds for t in off.turns]))}). "
            f"{len(on.queued_turns())} background runs ran between turns; {len(sync)} turns paid a synchronous "
            f"pass and {len(overlapped)} were overlapped by a background run."
        )
        if pre_on is not None and pre_off is not None:
            text += (
                f" What compaction does cost every turn is the pre-send check: {_ms(pre_on)} ms median "
                f"against {_ms(pre_off)} ms with compaction off (database reads of the chat, bot, model, "
                "summaries and recent window before the turn's own load)."
            )
        out.append(text)
    b2b, b2b_off = by_name.get("on, back-to-back"), by_name.get("off, back-to-back")
    if b2b is not None:
        overlapped = b2b.overlapped_turns() - b2b.sync_turns()
        others = [t.seconds for t in b2b.turns if t.index not in overlapped]
        if overlapped:
            out.append(
                f"Back-to-back, {len(overlapped)} turns ran while a background run of the same chat was "
                f"running: median {_ms(_median([t.seconds for t in b2b.turns if t.index in overlapped]))} ms "
                f"against {_ms(_median(others))} ms for the other turns."
            )
        changed = [log for log in b2b.logs if log.error_code == "COMPACTION_HISTORY_CHANGED"]
        inactive = (b2b.status.get("automatic") or {}).get("reason")
        if changed:
            failed = [t for t in b2b.turns if t.started <= changed[0].started]
            at = failed[-1].index + 1 if failed else 0
            shifted = sum(1 for t in b2b.turns if t.shifted_entries)
            text = (
                f"Back-to-back, the next message arrived while a background pass was still running, and the "
                f"pass was dropped (`COMPACTION_HISTORY_CHANGED`, around turn {at}: an edit during a pass "
                "must not commit)."
            )
            if inactive == "cooldown":
                text += (
                    " That abort also armed the failure cooldown, which stops every automatic pass, the 75% "
                    "synchronous backstop included: after it the chat was kept in budget by context shifting "
                    f"alone ({shifted} turns of the session shifted"
                )
                if b2b_off is not None:
                    text += f", against {sum(1 for t in b2b_off.turns if t.shifted_entries)} with compaction off"
                text += ")."
            out.append(text)
    if base.calls:
        out.append(
            f"Summarizer work: contextshift made {_ratio(ours.calls, base.calls)} the baseline's calls and spent "
            f"{_ratio(ours.total_tokens, base.total_tokens)} its tokens (every pass folds the previous summary in "
            f"again), but its largest input was {ours.largest_input:,} tokens against {base.largest_input:,} (the "
            f"whole window, where Codex's own compaction can overflow), {ours.on_request_path} of its calls held "
            f"up a turn against {base.on_request_path} for the baseline, and its prompts stayed smaller at the top "
            f"(max {ours.max_prompt:,} against {base.max_prompt:,}; mean {ours.mean_prompt:,.0f} against "
            f"{base.mean_prompt:,.0f}). Right after a baseline compaction the prompt holds the summary and the "
            f"new input only; contextshift always kept at least {_n(ours.fewest_raw)} raw messages."
        )
    return out


def baseline_note(cfg: Config, base: Baseline) -> str:
    script = data.session(cfg.turns, cfg.seed)
    default = simulate_baseline(script, window=WINDOW, reserve=1024)
    return (
        f"With the default 1,024-token reply reserve (budget {default.budget:,}, below the 90% trigger) the "
        f"same baseline would have been shifted on {len(default.shifted)} turns before it compacted; the "
        f"benchmark's bot uses a {RESERVE}-token reserve so that the baseline's trigger lies inside the budget."
    )


# -- main ---------------------------------------------------------------------------------------------------


def config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)
    return Config(
        quick=quick,
        turns=args.turns or (80 if quick else 300),
        think=args.pause if args.pause is not None else (0.15 if quick else 0.25),
        chat_latency=args.chat_latency if args.chat_latency is not None else (0.02 if quick else 0.03),
        summarizer_latency=(
            args.summarizer_latency if args.summarizer_latency is not None else (0.05 if quick else 0.08)
        ),
        back_to_back=args.back_to_back if args.back_to_back is not None else not quick,
        seed=args.seed,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compaction", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI smoke run: 80 turns, shorter pauses and fake latencies, no back-to-back scenarios",
    )
    parser.add_argument("--turns", type=int, default=None, help="turns of the scripted session (300; --quick 80)")
    parser.add_argument("--pause", type=float, default=None, help="seconds between turns (0.25; --quick 0.15)")
    parser.add_argument(
        "--chat-latency", type=float, default=None, help="fake latency of a chat call in seconds (0.03; --quick 0.02)"
    )
    parser.add_argument(
        "--summarizer-latency",
        type=float,
        default=None,
        help="fake latency of a summarizer call in seconds (0.08; --quick 0.05)",
    )
    parser.add_argument(
        "--back-to-back",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run both scenarios without pauses (default: yes; --quick: no)",
    )
    parser.add_argument("--seed", default="compaction", help="seed of the scripted session")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"Markdown results (default {RESULTS}; --quick writes nothing unless given)",
    )
    args = parser.parse_args(argv)
    cfg = config(args)
    say(f"compaction benchmark ({'quick' if cfg.quick else 'full'}): {describe(cfg)}")
    started = time.perf_counter()
    install_probes()
    script = data.session(cfg.turns, cfg.seed)
    # "off" and "on" side by side, turn by turn; back-to-back scenarios alone (a turn of another chat in
    # between would be a pause).
    plan: list[list[tuple[str, bool, float]]] = [[("off", False, cfg.think), ("on", True, cfg.think)]]
    if cfg.back_to_back:
        plan += [[("off, back-to-back", False, 0.0)], [("on, back-to-back", True, 0.0)]]
    scenarios: list[Scenario] = []
    for specs in plan:
        say(f"  {' and '.join(name for name, _, _ in specs)} …", end=" ")
        batch = run_interleaved(specs, cfg, script)
        scenarios += batch
        say(f"{max(s.seconds for s in batch):.1f} s")
    base = simulate_baseline(script, window=WINDOW, reserve=RESERVE)
    works = [work_of(s) for s in scenarios] + [baseline_work(base)]
    ours = next(w for w, s in zip(works, scenarios, strict=False) if s.compaction and s.think == cfg.think)
    load = load_note()
    say()
    say(text_table(LATENCY_HEADERS, latency_cells(scenarios), left=1))
    say()
    say(text_table(WHERE_HEADERS, where_cells(scenarios), left=1))
    say()
    say(text_table(WORK_HEADERS, work_cells(works), left=1))
    say()
    say(text_table(RATIO_HEADERS, ratio_cells(ours, baseline_work(base)), left=1))
    say()
    for s in scenarios:
        if s.compaction:
            say(runs_line(s))
    say(f"baseline: summarized at turns {', '.join(str(t + 1) for t in base.call_turns) or 'none'}")
    say()
    for line in findings(scenarios, ours, baseline_work(base)):
        say(f"- {line}")
    say(f"peak RSS {peak_rss_mib():,.0f} MiB; {time.perf_counter() - started:.0f} s in all; {load}")
    output: Path | None = args.output if args.output is not None or cfg.quick else RESULTS
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python -m benchmarks.compaction", *(argv if argv is not None else sys.argv[1:])])
        output.write_text(markdown(cfg, scenarios, base, works, ours, load, command), encoding="utf-8")
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
