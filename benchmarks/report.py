"""Timing, peak memory and the results table (plain text for the terminal, Markdown for the README)."""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


@dataclass
class Timing:
    """Samples (seconds) of one callable, and the value its last call returned."""

    samples: list[float]
    result: Any

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Move everything alive now (the inputs) out of the collector's sight, so the ``gc.collect()``
    before each timed call costs little; objects are still freed by reference counting."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _timed(fn: Callable[[], Any], setup: Callable[[], None] | None) -> tuple[float, Any]:
    if setup is not None:
        setup()
    gc.collect()
    # As timeit does: no collector pauses inside the timed region (the same for every library).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
    return elapsed, result


def measure(
    fn: Callable[[], Any],
    *,
    max_runs: int = 7,
    setup: Callable[[], None] | None = None,
    warmup: float = 0.5,
    single_shot_after: float = 10.0,
) -> Timing:
    """Time ``fn``: warm-up calls (at least one; more until ``warmup`` seconds or 50 calls), then up to
    ``max_runs`` timed calls (fewer for slow callables: 5 from 0.3 s, 3 from 1 s).

    ``setup`` runs before every call, outside the timed region (e.g. to start from a cold cache). A first
    call slower than ``single_shot_after`` seconds is the only sample (the quadratic peer).
    """
    with frozen_heap():
        first, result = _timed(fn, setup)
        if first >= single_shot_after:
            return Timing([first], result)
        spent, calls, last = first, 1, first
        while spent < warmup and calls < 50:
            last, result = _timed(fn, setup)
            spent += last
            calls += 1
        runs = max_runs if last < 0.3 else min(max_runs, 5) if last < 1.0 else min(max_runs, 3)
        samples = []
        for _ in range(runs):
            elapsed, result = _timed(fn, setup)
            samples.append(elapsed)
        return Timing(samples, result)


def peak_mib(fn: Callable[[], Any], setup: Callable[[], None] | None = None) -> float:
    """Peak traced allocation (MiB) of one call, in a run of its own (tracemalloc slows the call down)."""
    with frozen_heap():
        if setup is not None:
            setup()
        gc.collect()
        tracemalloc.start()
        try:
            fn()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak / MIB


@dataclass
class Row:
    case: str
    library: str
    messages: int
    budget: int
    timing: Timing | None = None
    peak: float | None = None
    kept: int | None = None
    baseline: Row | None = None  # the contextshift row of the same case
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float | None:
        return None if self.timing is None else self.timing.median * 1000

    @property
    def ratio(self) -> float | None:
        """This row's median time divided by contextshift's in the same case (>1: contextshift is faster)."""
        if self.baseline is None or self.timing is None or self.baseline.timing is None:
            return None
        return self.timing.median / self.baseline.timing.median


HEADERS = (
    "case",
    "library",
    "messages",
    "budget",
    "median ms",
    "runs",
    "peak MiB",
    "kept",
    "time ÷ contextshift",
    "note",
)


def _cells(row: Row) -> list[str]:
    ms = row.median_ms
    return [
        row.case,
        row.library,
        f"{row.messages:,}",
        f"{row.budget:,}",
        "–" if ms is None else f"{ms:,.1f}" if ms >= 10 else f"{ms:.2f}",
        "–" if row.timing is None else str(len(row.timing.samples)),
        "–" if row.peak is None else f"{row.peak:,.1f}" if row.peak >= 10 else f"{row.peak:.2f}",
        "–" if row.kept is None else f"{row.kept:,}",
        "–" if row.ratio is None else f"{row.ratio:.2f}×",
        row.note,
    ]


def text_table(rows: Sequence[Row]) -> str:
    body = [list(HEADERS)] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADERS) - 1)]
    numeric = {2, 3, 4, 5, 6, 7, 8}
    out = []
    for n, line in enumerate(body):
        cells = [
            line[i].rjust(widths[i]) if i in numeric and n else line[i].ljust(widths[i])
            for i in range(len(HEADERS) - 1)
        ]
        out.append("  ".join(cells) + ("  " + line[-1] if line[-1] else ""))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(rows: Sequence[Row]) -> str:
    align = ["---", "---", "--:", "--:", "--:", "--:", "--:", "--:", "--:", "---"]
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join(align) + "|"]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in _cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    import langchain_core
    import llama_index.core
    import tiktoken

    from contextshift import __version__

    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; contextshift {__version__}, langchain-core {langchain_core.__version__}, "
        f"llama-index-core {llama_index.core.__version__}, tiktoken {tiktoken.__version__}"
    )


def load_note() -> str:
    """The 1-minute load average, with a warning when other work shares the CPUs (timings get noisy)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return "load average unknown"
    cpus = os.cpu_count() or 1
    note = f"load average {load:.2f} on {cpus} CPUs"
    if load > 0.5 * cpus + 0.5:
        note += " (other processes were busy: timings are noisier than usual)"
    return note


def say(*parts: object, end: str = "\n") -> None:
    print(*parts, end=end, flush=True)


class Harness:
    """What every timing benchmark keeps while it runs (rows, sanity lines, problems, the machine's load) and
    how it times a row and closes a run; ``shifting``, ``integrations`` and ``strategies`` share it."""

    def __init__(self, *, quick: bool, max_runs: int, warmup: float) -> None:
        self.quick, self.max_runs, self.warmup = quick, max_runs, warmup
        self.rows: list[Row] = []
        self.sanity: list[str] = []
        self.problems: list[str] = []
        self.load_before = self.load_after = ""

    def begin(self, title: str) -> float:
        """Say what runs and the machine's load; the start time."""
        say(title)
        self.load_before = load_note()
        say(f"  {self.load_before}")
        return time.perf_counter()

    def row(
        self,
        case: str,
        library: str,
        messages: int,
        budget: int,
        fn: Callable[[], Any],
        *,
        setup: Callable[[], None] | None = None,
        kept: Callable[[Any], int] | None = None,
        baseline: Row | None = None,
        note: str = "",
        memory: bool = True,
        single_shot_after: float | None = None,
    ) -> Row:
        """Time ``fn`` (:func:`measure`), then its peak memory in a run of its own, and keep the row.

        tracemalloc slows allocation-heavy calls several times over: a peer's call slower than 2 s gets no
        memory run (contextshift's always get one, except in a quick run, where no call over 0.3 s does)."""
        say(f"  {case:<28} {library:<34} {messages:>7,} msgs  budget {budget:>7,} ...", end="")
        began = time.perf_counter()
        if single_shot_after is None:  # a first call slower than this is the only sample
            single_shot_after = 10.0 if baseline is None else 5.0
        timing = measure(
            fn, max_runs=self.max_runs, setup=setup, warmup=self.warmup, single_shot_after=single_shot_after
        )
        memory = memory and timing.median < (0.3 if self.quick else 1e9 if baseline is None else 2.0)
        peak = peak_mib(fn, setup) if memory else None
        result = None if kept is None else kept(timing.result)
        row = Row(case, library, messages, budget, timing, peak, kept=result, baseline=baseline, note=note)
        self.rows.append(row)
        ratio = "" if row.ratio is None else f"  ({row.ratio:.2f}× contextshift)"
        say(f" {row.median_ms:,.2f} ms median of {len(timing.samples)}{ratio} [{time.perf_counter() - began:.1f} s]")
        return row

    def page(self, title: str, command: str, machine: str, elapsed: float, prose: Sequence[str], *parts: str) -> str:
        """The Markdown page of a run: the title, the command, the machine and its load, the ``prose`` lines,
        the table of rows, then the other ``parts`` (see :func:`section`)."""
        lines = [
            f"# {title}",
            "",
            f"Generated by `.venv/bin/{command}` (do not edit by hand).",
            "",
            f"Machine: {machine}. Whole run: {elapsed:.0f} s; {self.load_before} at the start, {self.load_after} at "
            "the end.",
            "",
            *prose,
            "",
            markdown_table(self.rows),
            "",
            *parts,
        ]
        return "\n".join(lines)

    def conclude(
        self,
        started: float,
        *,
        ratios: Sequence[str] = (),
        targets: Sequence[tuple[bool, str]] = (),
        markdown: Callable[[float], str] | None = None,
        path: Any = None,
    ) -> int:
        """Print the results (table, ratios, targets, sanity lines, problems), write the Markdown page to
        ``path`` if given, and return the exit status (1 if anything was wrong)."""
        elapsed = time.perf_counter() - started
        self.load_after = load_note()
        say("\nResults\n")
        say(text_table(self.rows))
        if ratios:
            say("\nRatios")
            for line in ratios:
                say(f"  {line}")
        if targets:
            say("\nTargets" + (" (--quick: smaller and fewer runs, so only indicative)" if self.quick else ""))
            for ok, text in targets:
                say(f"  [{'met' if ok else 'NOT MET'}] {text}")
        if self.sanity:
            say("\nCorrectness sanity (not timing)")
            for line in self.sanity:
                say(f"  {line}")
        for problem in self.problems:
            say(f"  PROBLEM: {problem}")
        if path is not None and markdown is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(markdown(elapsed), encoding="utf-8")
            say(f"\nMarkdown written to {path}")
        say(f"\nDone in {time.perf_counter() - started:.0f} s.")
        return 1 if self.problems else 0


def arguments(module: str, doc: str, quick: str, results: str) -> argparse.ArgumentParser:
    """The command line every timing benchmark takes: ``--quick`` (``quick`` says what it does) and
    ``--markdown`` (default: ``results`` for a full run, nowhere for ``--quick``)."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}", description=doc.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument(
        "--markdown",
        type=Path,
        default=None,
        help=f"where to write the Markdown table (default: {results} for a full run, nowhere for --quick)",
    )
    return parser


def section(title: str, items: Sequence[str]) -> str:
    """A Markdown section: its title, then one bullet an item."""
    return "\n".join([f"## {title}", "", *[f"- {item}" for item in items], ""])
