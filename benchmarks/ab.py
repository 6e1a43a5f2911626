"""Same-run A/B of a benchmark: this checkout's library (*head*) against another commit's (*base*).

Run from the project root, with a second worktree at the commit before (``git worktree add ../base REV``):

    .venv/bin/python -m benchmarks.ab ../base --pairs 5 -- benchmarks.endpoint --quick --calls 20
    .venv/bin/python -m benchmarks.ab ../base --pairs 5 -- benchmarks.service --quick --backend sqlite
    .venv/bin/python -m benchmarks.ab ../base --pairs 5 -- benchmarks.shifting --quick

What it adds to timing the two commands whole: both sides run **the same benchmark code** (this checkout's
``benchmarks/`` and ``tests/``) over each side's ``contextshift`` (two temporary folders of symbolic links, each
the working directory and the only ``PYTHONPATH`` of its side, so the servers the benchmark starts import that
side's package too); the runs alternate head, base, head, … after one warm-up of each, so that load from other
processes falls on both alike; and besides each run's CPU seconds (user + system of the benchmark and every
process it waited for) and wall seconds, it reads **the benchmark's own per-operation figures** from its output
(``figures``). For every figure it prints the paired ratio head ÷ base: the geometric mean of the pairs with a
95 % confidence interval (Student's t on the logarithms), and the median pair. A ratio above 1 is head slower.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Two-sided 95 % quantiles of Student's t by degrees of freedom (the normal's 1.96 beyond the table).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
T95.update({11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042})

_ENDPOINT = re.compile(
    r"^\s*(?P<n>\d+) messages .*?endpoint\s+(?P<endpoint>[\d.]+) ms, added\s+(?P<added>-?[\d.]+) ms, "
    r"service CPU\s+(?P<cpu>[\d.]+) ms/call"
)
_SERVICE = re.compile(
    r"^(?P<backend>sqlite|postgresql)\s+(?P<op>(?:preview|generate)(?:, recall)?)\s+(?P<n>[\d,]+)\s+"
    r"(?P<cold>[\d.,]+)\s+(?P<warm>[\d.,]+)\s+[\d.,]+\s+\d+\s+\d+\s+[\d,]+\s+[\d,]+\s+(?P<cpu>[\d.,]+)"
)
_TURN_CPU = re.compile(
    r"^(?P<backend>sqlite|postgresql), (?P<n>[\d,]+) stored messages, \d+ turns: CPU per turn median "
    r"(?P<median>[\d.]+) ms, mean (?P<mean>[\d.]+) ms"
)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def figures(module: str, output: str) -> dict[str, float]:
    """The per-operation figures a benchmark printed, by name (milliseconds). Known: endpoint, service,
    turn_cpu, shifting (its contextshift rows); any other module gives none."""
    found: dict[str, float] = {}
    for line in output.splitlines():
        if module.endswith("endpoint") and (m := _ENDPOINT.match(line)):
            found[f"endpoint ms @{m['n']}"] = _number(m["endpoint"])
            found[f"added ms @{m['n']}"] = _number(m["added"])
            found[f"service CPU ms/call @{m['n']}"] = _number(m["cpu"])
        elif module.endswith("service") and (m := _SERVICE.match(line)):
            at = f"{m['backend']} {m['op']} @{m['n']}"
            found[f"{at} warm median ms"] = _number(m["warm"])
            found[f"{at} server CPU ms"] = _number(m["cpu"])
        elif module.endswith("turn_cpu") and (m := _TURN_CPU.match(line)):
            found[f"{m['backend']} CPU ms per turn @{m['n']} (median)"] = _number(m["median"])
            found[f"{m['backend']} CPU ms per turn @{m['n']} (mean)"] = _number(m["mean"])
        elif module.endswith("shifting") and " contextshift" in line:
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) >= 6 and cells[1].startswith("contextshift") and cells[4].replace(",", "") != "–":
                found[f"{cells[0]} | {cells[1]} | {cells[2]} msgs | {cells[3]}"] = _number(cells[4])
    return found


@dataclass(frozen=True)
class Ratio:
    """Paired ratios head ÷ base of one figure: geometric mean, its 95 % interval, median pair, pairs."""

    mean: float
    low: float
    high: float
    median: float
    pairs: int


def paired(head: Sequence[float], base: Sequence[float]) -> Ratio | None:
    """The ratio of two equally long series taken pair by pair (one pair: no interval, low = high = mean).
    Pairs with a figure at or below zero are left out; none left: ``None``."""
    ratios = [h / b for h, b in zip(head, base, strict=True) if b > 0 and h > 0]
    if not ratios:
        return None
    logs = [math.log(r) for r in ratios]
    centre = statistics.fmean(logs)
    if len(logs) < 2:
        return Ratio(math.exp(centre), math.exp(centre), math.exp(centre), statistics.median(ratios), len(ratios))
    df = len(logs) - 1
    t = T95.get(df) or next((T95[k] for k in sorted(T95) if k >= df), 1.96)
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return Ratio(
        math.exp(centre), math.exp(centre - half), math.exp(centre + half), statistics.median(ratios), len(logs)
    )


def mixed_tree(folder: Path, library: Path) -> Path:
    """A folder where ``contextshift`` is ``library``'s and ``benchmarks``/``tests`` are this checkout's."""
    folder.mkdir()
    (folder / "contextshift").symlink_to(library / "contextshift")
    (folder / "benchmarks").symlink_to(ROOT / "benchmarks")
    (folder / "tests").symlink_to(ROOT / "tests")
    return folder


@dataclass
class Run:
    cpu: float
    wall: float
    figures: dict[str, float]


def run_once(tree: Path, command: Sequence[str], module: str) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tree.name}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(cpu, wall, figures(module, done.stdout + done.stderr))


def report(head: list[Run], base: list[Run]) -> str:
    rows = [("whole process CPU s", [r.cpu for r in head], [r.cpu for r in base])]
    rows.append(("whole process wall s", [r.wall for r in head], [r.wall for r in base]))
    for name in head[0].figures:
        if all(name in r.figures for r in head + base):
            rows.append((name, [r.figures[name] for r in head], [r.figures[name] for r in base]))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'figure':<{width}}  head median  base median  head÷base (95% CI)   median pair  pairs"]
    for name, h, b in rows:
        r = paired(h, b)
        if r is None:
            continue
        lines.append(
            f"{name:<{width}}  {statistics.median(h):>11.4g}  {statistics.median(b):>11.4g}  "
            f"{r.mean:.3f} ({r.low:.3f}–{r.high:.3f})  {r.median:>11.3f}  {r.pairs:>5}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="a checkout of the commit to compare against")
    parser.add_argument("--pairs", type=int, default=5, help="counted head/base pairs after one warm-up each")
    parser.add_argument("command", nargs="+", help="the benchmark module and its options, after --")
    args = parser.parse_args(argv)
    module = args.command[0]
    with tempfile.TemporaryDirectory(prefix="ab-") as folder:
        trees = {
            "head": mixed_tree(Path(folder) / "head", ROOT),
            "base": mixed_tree(Path(folder) / "base", args.base.resolve()),
        }
        runs: dict[str, list[Run]] = {"head": [], "base": []}
        for turn in range(args.pairs + 1):
            for side, tree in trees.items():
                result = run_once(tree, args.command, module)
                print(f"  {'warm-up' if turn == 0 else f'pair {turn}'} {side}: {result.cpu:.2f} s CPU", flush=True)
                if turn:
                    runs[side].append(result)
    print(report(runs["head"], runs["base"]))


if __name__ == "__main__":
    main()
