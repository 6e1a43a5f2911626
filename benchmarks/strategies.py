"""Benchmark: every built-in strategy through the strategy host, against ``shift_context`` (S8, N4).

Run from the project root:

    .venv/bin/python -m benchmarks.strategies           # 1k/10k, writes benchmarks/results/strategies.md
    .venv/bin/python -m benchmarks.strategies --full    # 1k/10k/100k
    .venv/bin/python -m benchmarks.strategies --quick   # CI smoke: 1k/10k, 3 runs, writes nothing by default

Every row shifts the same conversation (``benchmarks/conversations.py``: a system prompt, user/assistant turns
of 10-120 words, about one assistant turn in eight calling tools) as ``Message`` objects built outside the
timed region, with the same counter (``len(text)//4`` plus 4 a message) and budget (8,000 tokens):
``shift_context`` itself, then ``shift_with_strategy`` with each built-in strategy. ``summarize`` caches the
analysis of each message's sentences by text (a chat shifts the same history turn after turn), so it gets two
rows: warm (repeated calls, as a chat's turns are) and cold (every cache emptied before each call).

``shift_context``, ``truncate``, ``vector-recall``, ``manual`` and warm ``summarize`` are timed in turns (21
rounds, one call of each a round) in this process's CPU time (``time.process_time``), so the other jobs of
the shared machine do not count and a change in its load falls on them alike; the slow rows (cold
``summarize``, ``recall``) get medians of up to 7 timed runs of wall time after a warm-up (fewer for slow
calls). The garbage collector is paused inside timed calls;
peak memory is tracemalloc's peak of one more call, in a run of its own. Ratios are taken within
one run (the machine is shared: absolute times move with its load, ratios much less). Timings are printed and
written, never asserted.
"""

from __future__ import annotations

import functools
import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from contextshift import Message, ShiftResult, __version__, shift_context, shift_with_strategy

from . import conversations as conv
from .report import Harness, Row, Timing, arguments, frozen_heap, measure, peak_mib, say, section

RESULTS = Path(__file__).resolve().parent / "results" / "strategies.md"
STRATEGIES = ("truncate", "summarize", "vector-recall", "manual", "recall")
#: The strategies timed in turns with ``shift_context``, in CPU time (each call takes milliseconds).
FAST = ("truncate", "vector-recall", "manual", "summarize")
CPU_NOTE = "CPU time, in turns"
WALL_NOTE = "wall time, alone"
BUDGET = 8_000
BASELINE = "shift_context"
COLD = "summarize (cold caches)"


@dataclass(frozen=True)
class Config:
    quick: bool
    sizes: tuple[int, ...]
    max_runs: int
    warmup: float
    rounds: int  # turns of the interleaved fast rows
    markdown: Path | None

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Config:
        parser = arguments(
            "strategies", __doc__, "CI smoke: 1k and 10k messages, 3 runs", "benchmarks/results/strategies.md"
        )
        parser.add_argument("--full", action="store_true", help="also 100k messages")
        args = parser.parse_args(argv)
        sizes = (1_000, 10_000, 100_000) if args.full and not args.quick else (1_000, 10_000)
        return cls(
            quick=args.quick,
            sizes=sizes,
            max_runs=3 if args.quick else 7,
            warmup=0.2 if args.quick else 0.5,
            rounds=5 if args.quick else 21,
            markdown=args.markdown if args.quick else (args.markdown or RESULTS),
        )


def quarter(text: str) -> int:
    """The counter every row uses (``per_message_overhead=4`` adds the framing)."""
    return len(text) // 4


def empty_caches() -> None:
    """Empty the caches a shift fills by message text, so the next call starts cold."""
    from contextshift.core import relevance, summary

    summary.clear_caches()
    relevance._analysed.cache_clear()


def machine() -> str:
    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; contextshift {__version__}"
    )


class Bench(Harness):
    def __init__(self, cfg: Config) -> None:
        super().__init__(quick=cfg.quick, max_runs=cfg.max_runs, warmup=cfg.warmup)
        self.cfg = cfg

    def timed(
        self,
        case: str,
        messages: list[Message],
        call: Callable[[], ShiftResult],
        baseline: Row | None,
        setup: Callable[[], None] | None = None,
    ) -> Row:
        # A warm row: one call first fills the caches (measure() takes a first call slower than 10 s as its
        # only sample, which would then be a cold one).
        if setup is None:
            call()
        timing = measure(call, max_runs=self.cfg.max_runs, setup=setup, warmup=self.cfg.warmup)
        return self.record(case, messages, call, timing, baseline, setup)

    def record(
        self,
        case: str,
        messages: list[Message],
        call: Callable[[], ShiftResult],
        timing: Timing,
        baseline: Row | None,
        setup: Callable[[], None] | None = None,
    ) -> Row:
        result: ShiftResult = timing.result
        # tracemalloc slows a call several-fold: a call over 5 s gets no memory run.
        peak = peak_mib(call, setup) if timing.median < 5 else None
        note = CPU_NOTE if case == BASELINE or case in FAST else WALL_NOTE
        row = Row(case, "contextshift", len(messages), BUDGET, timing, peak, len(result.kept), baseline, note)
        if result.tokens > BUDGET:
            self.problems.append(f"{case} at {len(messages):,}: {result.tokens} tokens over the budget {BUDGET}")
        ran = result.strategy
        if case not in (BASELINE, COLD) and ran != case:
            self.problems.append(f"{case} at {len(messages):,}: {ran} ran instead ({result.diagnostics[:1]})")
        self.rows.append(row)
        say(f"  {case:<24} {len(messages):>7,}  {row.median_ms:>10.2f} ms  peak {peak or 0:>7.1f} MiB")
        return row

    def interleaved(self, messages: list[Message], calls: dict[str, Callable[[], ShiftResult]]) -> list[Row]:
        """Rows for fast calls timed in turns (a, b, c, a, b, c, ...) in this process's CPU time, so that
        the shared machine's other jobs do not count and a change in its load falls on all of them alike."""
        samples: dict[str, list[float]] = {case: [] for case in calls}
        results: dict[str, ShiftResult] = {}
        with frozen_heap():
            for case, call in calls.items():  # warm-up
                results[case] = call()
            for _ in range(self.cfg.rounds):
                for case, call in calls.items():
                    gc.collect()
                    gc.disable()
                    try:
                        start = time.process_time()
                        result = call()
                        samples[case].append(time.process_time() - start)
                    finally:
                        gc.enable()
                    results[case] = result  # the previous result is freed here, outside the timed region
        rows: list[Row] = []
        for case, call in calls.items():
            timing = Timing(samples[case], results[case])
            baseline = rows[0] if rows else None
            rows.append(self.record(case, messages, call, timing, baseline))
        return rows

    def size(self, n: int) -> None:
        messages = conv.to_messages(conv.generate(n))
        fast = {BASELINE: lambda: shift_context(messages, quarter, BUDGET)}
        for name in FAST:
            fast[name] = functools.partial(shift_with_strategy, messages, quarter, BUDGET, strategy=name)
        base = self.interleaved(messages, fast)[0]
        self.timed(
            COLD,
            messages,
            lambda: shift_with_strategy(messages, quarter, BUDGET, strategy="summarize"),
            base,
            setup=empty_caches,
        )
        for name in STRATEGIES:
            if name not in FAST:
                self.timed(
                    name,
                    messages,
                    functools.partial(shift_with_strategy, messages, quarter, BUDGET, strategy=name),
                    base,
                )

    def median(self, case: str, n: int) -> float | None:
        for row in self.rows:
            if row.case == case and row.messages == n and row.timing is not None:
                return row.timing.median
        return None

    def ratios(self) -> list[str]:
        """Each strategy's time over the host path's ``truncate`` at the same size."""
        out = []
        for n in self.cfg.sizes:
            truncate = self.median("truncate", n)
            if truncate is None:
                continue
            parts = []
            for case in (*STRATEGIES[1:], COLD):
                mine = self.median(case, n)
                if mine is not None:
                    parts.append(f"{case} {mine / truncate:.1f}×")
            out.append(f"{n:,} messages, time ÷ host `truncate`: " + ", ".join(parts))
        return out

    def targets(self) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        n = 10_000
        base, truncate = self.median(BASELINE, n), self.median("truncate", n)
        if base is None or truncate is None:
            return out
        out.append((truncate <= 2 * base, f"host `truncate` ≤ 2× `shift_context` at 10k: {truncate / base:.2f}×"))
        for case, limit in (("summarize", 10), (COLD, 10), ("recall", 5)):
            mine = self.median(case, n)
            if mine is not None:
                out.append(
                    (mine <= limit * truncate, f"{case} ≤ {limit}× host `truncate` at 10k: {mine / truncate:.1f}×")
                )
        for case in ("summarize", COLD, "recall"):
            small, large = self.median(case, 1_000), self.median(case, 10_000)
            if small and large:
                per = (large / 10_000) / (small / 1_000)
                out.append((per <= 1.5, f"{case} linear: time per message at 10k ÷ at 1k = {per:.2f} (target ≤ 1.5)"))
        return out


def markdown(bench: Bench, targets: list[tuple[bool, str]], elapsed: float) -> str:
    return bench.page(
        "contextshift benchmark: strategies through the host",
        "python -m benchmarks.strategies",
        machine(),
        elapsed,
        [
            "The conversation of `benchmarks/conversations.py` as `Message` objects, counter `len(text)//4` plus 4 a "
            f"message, budget {BUDGET:,}. `shift_context` is the baseline; every other row is "
            "`shift_with_strategy(..., strategy=<case>)`. `summarize (cold caches)` empties the caches filled by "
            "message text before each call; the `summarize` row is a chat's next turn over the same history. "
            "`shift_context`, `truncate`, `vector-recall`, `manual` and `summarize` are timed in turns (a call of each "
            "a round, medians of the rounds) in CPU time (`time.process_time`), so the shared machine's other jobs do "
            "not count; the others get the median wall time of up to 7 timed runs after a warm-up (the note says "
            "which). Garbage collector paused in timed calls; peak MiB is "
            "tracemalloc's peak of one more call. `time ÷ contextshift` is the time over `shift_context`'s.",
        ],
        section("Ratios", bench.ratios()),
        section("Targets (issue 26)", [f"{'met' if ok else '**not met**'}: {text}" for ok, text in targets]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = Config.from_args(argv)
    bench = Bench(cfg)
    started = bench.begin(f"contextshift strategies benchmark ({'quick' if cfg.quick else 'full'}): {machine()}")
    for n in cfg.sizes:
        t = time.perf_counter()
        bench.size(n)
        say(f" ({n:,} messages: {time.perf_counter() - t:.1f} s)")
    targets = bench.targets()
    return bench.conclude(
        started,
        ratios=bench.ratios(),
        targets=targets,
        markdown=lambda elapsed: markdown(bench, targets, elapsed),
        path=cfg.markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
