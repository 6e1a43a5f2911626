"""Benchmark: what each strategy keeps of the facts a conversation planted (G3a, G4a), and what compaction reads.

Run from the project root:

    .venv/bin/python -m benchmarks.fidelity           # full run (5 seeds) -> benchmarks/results/fidelity.md
    .venv/bin/python -m benchmarks.fidelity --quick   # CI smoke (1 seed), writes nothing by default

What it does. Generated conversations (seeded, ``random.Random``), 300 history messages each, from five
families (see ``benchmarks/fidelity_data.py``):

* ``planted`` — 16 facts ("the vault code for project Falcon is 48213") among chatter full of names and
  numbers and look-alike distractors (the vault code of a project nobody asks about; the parking code of a
  project that is asked about); the input asks for all 16 codes;
* ``superseded`` — 16 facts, half of them later changed ("… changed to 99120"); only the latest value counts;
* ``tool-results`` — the facts exist only inside tool results (a ``lookup_project`` call and its JSON
  result, some of them long), among results for other projects;
* ``workspaces`` — facts spread over three workspaces (``meta``-free ``workspace`` field), asked all at once;
* ``pairs`` — 16 facts, and 8 inputs each asking about two of them ("compare the vault codes of A and B"),
  each input shifted on its own.

* ``paraphrase`` (only in the embeddings table) — 16 facts, each asked for in other words ("which digits open
  the cabinet I use at the fitness centre?" for the gym locker's combination), 16 inputs shifted on their own.

Every family runs at budgets of ¼ and 1/10 of the history's tokens (plus the protected system prompt and
input) with every built-in strategy, through ``shift_with_strategy`` with contextshift's approximate counter
(4 tokens of framing a message). The metric is the share of facts whose identifying value is in the prompt
that comes out (the kept messages, a summary included); for a superseded fact only the latest value counts.
Tokens used is the prompt's tokens over its budget.

"False rejections" applies compaction's plausibility check (``core/compaction/plausibility.py``) to every
summary the ``summarize`` strategy writes here: they are good summaries (they keep most facts), so the check
must reject none of them.

"Input fidelity" is compaction's: the share of the facts of the covered messages (here: the whole history)
whose value reaches the summarizer's prompt (``build_prompt`` at its normal caps: 2,000 characters a tool
result, 500 an argument). Nothing is timed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contextshift import Message, shift_with_strategy
from contextshift.core.compaction.plausibility import implausibility
from contextshift.core.compaction.rendering import TOOL_ARGS_CAP, TOOL_RESULT_CAP, build_prompt
from contextshift.core.embedding import Embedder
from contextshift.core.tokens import approximate_count, message_costs
from contextshift.embeddings import available, load_embedder

from . import fidelity_data as data
from .report import load_note, say

RESULTS = Path(__file__).resolve().parent / "results" / "fidelity.md"
STRATEGIES = ("truncate", "summarize", "vector-recall", "manual", "recall")
BUDGETS = (("1/4", 0.25), ("1/10", 0.10))
OVERHEAD = 4


@dataclass
class Cell:
    """Facts kept and tokens used of one family × budget × strategy, over every conversation and input."""

    kept: int = 0
    facts: int = 0
    used: list[float] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.kept / self.facts if self.facts else 0.0


def _cost(messages: Sequence[Message]) -> int:
    costs, fixed = message_costs(list(messages), approximate_count, OVERHEAD)
    return sum(costs) + fixed


def run_case(
    case: data.Case, fraction: float, strategy: str, embedder: Embedder | None = None
) -> tuple[int, int, float]:
    """(facts kept, facts asked, tokens ÷ budget) of one conversation and one input."""
    history = _cost(case.history)
    protected = _cost([case.system, case.question])
    budget = protected + max(1, int(history * fraction))
    result = shift_with_strategy(
        [case.system, *case.history, case.question], approximate_count, budget, strategy=strategy, embedder=embedder
    )
    prompt = "\n".join(m.text for m in result.kept)
    kept = sum(1 for value in case.values if value in prompt)
    return kept, len(case.values), result.tokens / budget


def false_rejections(seeds: Sequence[int]) -> tuple[list[str], int]:
    """The ``summarize`` summaries of these seeds that the compaction plausibility check would reject (each
    as ``family seed budget: reason``), and how many summaries were checked."""
    rejected: list[str] = []
    checked = 0
    for family in data.FAMILIES:
        for seed in seeds:
            case = data.generate(family, seed)[0]
            history = _cost(case.history)
            protected = _cost([case.system, case.question])
            for label, fraction in BUDGETS:
                budget = protected + max(1, int(history * fraction))
                result = shift_with_strategy(
                    [case.system, *case.history, case.question], approximate_count, budget, strategy="summarize"
                )
                for block in result.truncated:
                    sources = set(block.source_ids)
                    replaced = [m.text for m in case.history if m.id in sources]
                    reason = implausibility(replaced, block.replacement.text)
                    checked += 1
                    if reason is not None:
                        rejected.append(f"{family} {seed} {label}: {reason}")
    return rejected, checked


def input_fidelity(case: data.Case) -> tuple[int, int, int]:
    """Facts of the history whose value reaches the summarizer's prompt at its normal caps: with the
    pre-pass that keeps a capped result's numbers and names, and with a plain cut at the cap."""
    prompt = build_prompt(case.history).user
    plain = "\n".join(_head_cut(m) for m in case.history)
    values = case.all_values
    return sum(1 for v in values if v in prompt), sum(1 for v in values if v in plain), len(values)


def _head_cut(message: Message) -> str:
    """What a plain cut at the records caps leaves of a message."""
    if message.role == "tool":
        return message.text[:TOOL_RESULT_CAP]
    calls = [call.name + " " + call.arguments[:TOOL_ARGS_CAP] for call in message.tool_calls]
    return "\n".join([str(message.content or ""), *calls])


def run(seeds: Sequence[int]) -> tuple[dict[tuple[str, str, str], Cell], dict[str, Cell]]:
    cells: dict[tuple[str, str, str], Cell] = {}
    fidelity: dict[str, Cell] = {}
    for family in data.FAMILIES:
        for seed in seeds:
            cases = data.generate(family, seed)
            reached, plain, total = input_fidelity(cases[0])
            cell = fidelity.setdefault(family, Cell())
            cell.kept += reached
            cell.facts += total
            cell.used.append(plain)
            for label, fraction in BUDGETS:
                for strategy in STRATEGIES:
                    cell = cells.setdefault((family, label, strategy), Cell())
                    for case in cases:
                        kept, asked, used = run_case(case, fraction, strategy)
                        cell.kept += kept
                        cell.facts += asked
                        cell.used.append(used)
        say(f"  {family}: done")
    return cells, fidelity


#: The embeddings table: (column, strategy, with the embedder).
MEANING_COLUMNS = (
    ("truncate", "truncate", False),
    ("recall", "recall", False),
    ("recall + embeddings", "recall", True),
)


def run_meaning(seeds: Sequence[int], embedder: Embedder) -> dict[tuple[str, str, str], Cell]:
    """What the embedder adds to ``recall``: every family, the ``paraphrase`` one included, with and without."""
    cells: dict[tuple[str, str, str], Cell] = {}
    for family in [*data.FAMILIES, *data.MEANING_FAMILIES]:
        for seed in seeds:
            cases = data.generate(family, seed)
            for label, fraction in BUDGETS:
                for column, strategy, embedded in MEANING_COLUMNS:
                    cell = cells.setdefault((family, label, column), Cell())
                    for case in cases:
                        kept, asked, used = run_case(case, fraction, strategy, embedder if embedded else None)
                        cell.kept += kept
                        cell.facts += asked
                        cell.used.append(used)
        say(f"  {family} (embeddings): done")
    return cells


def meaning_table(cells: dict[tuple[str, str, str], Cell], markdown: bool) -> str:
    head = ["family", "budget", *[c for c, _, _ in MEANING_COLUMNS]]
    rows = [
        [family, label, *[_share(cells[(family, label, c)]) for c, _, _ in MEANING_COLUMNS]]
        for family in [*data.FAMILIES, *data.MEANING_FAMILIES]
        for label, _ in BUDGETS
    ]
    return _grid(head, rows, markdown)


def _share(cell: Cell) -> str:
    return f"{cell.share:.0%} ({statistics.mean(cell.used):.0%})"


def _grid(head: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---", "---"] + ["--:"] * (len(head) - 2)) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _all(cells: dict[tuple[str, str, str], Cell], label: str, strategy: str) -> Cell:
    out = Cell()
    for family in data.FAMILIES:
        cell = cells[(family, label, strategy)]
        out.kept += cell.kept
        out.facts += cell.facts
        out.used.extend(cell.used)
    return out


def table(cells: dict[tuple[str, str, str], Cell], markdown: bool) -> str:
    head = ["family", "budget", *[f"{s}" for s in STRATEGIES]]
    rows: list[list[str]] = []
    for family in [*data.FAMILIES, "all"]:
        for label, _ in BUDGETS:
            line = [family, label]
            for strategy in STRATEGIES:
                cell = _all(cells, label, strategy) if family == "all" else cells[(family, label, strategy)]
                line.append(_share(cell))
            rows.append(line)
    return _grid(head, rows, markdown)


def fidelity_table(fidelity: dict[str, Cell], markdown: bool) -> str:
    rows = [
        [family, f"{cell.share:.0%} ({cell.kept}/{cell.facts})", f"{sum(cell.used) / cell.facts:.0%}"]
        for family, cell in fidelity.items()
    ]
    head = ["family", "input fidelity", "plain cut at the caps"]
    if markdown:
        return "\n".join(
            ["| " + " | ".join(head) + " |", "|---|--:|--:|", *["| " + " | ".join(r) + " |" for r in rows]]
        )
    return "\n".join("  ".join(c.ljust(16) for c in r) for r in [head, *rows])


def targets(cells: dict[tuple[str, str, str], Cell]) -> list[str]:
    """The issue's targets, each with what was measured (met or not)."""
    out = []

    def check(what: str, value: float, goal: float) -> None:
        out.append(f"- {what}: {value:.0%} (target ≥ {goal:.0%}) {'met' if value >= goal else 'NOT met'}")

    check("recall, all families, ¼", _all(cells, "1/4", "recall").share, 0.9)
    check("recall, all families, 1/10", _all(cells, "1/10", "recall").share, 0.8)
    check("recall, superseded, ¼", cells[("superseded", "1/4", "recall")].share, 0.8)
    check("recall, tool-results, ¼", cells[("tool-results", "1/4", "recall")].share, 0.8)
    check("summarize, all families, ¼", _all(cells, "1/4", "summarize").share, 0.6)
    below = [
        f"{family} {label}"
        for family in data.FAMILIES
        for label, _ in BUDGETS
        if cells[(family, label, "summarize")].kept < cells[(family, label, "truncate")].kept
    ]
    out.append(
        "- summarize never below truncate: "
        + ("met (every family, every budget)" if not below else f"NOT met ({', '.join(below)})")
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one seed (CI smoke); writes nothing unless --output")
    parser.add_argument("--seeds", type=int, default=None, help="how many seeds per family (5; --quick 1)")
    parser.add_argument("--output", type=Path, default=None, help=f"Markdown results (default {RESULTS})")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else 1 if args.quick else 5))
    say(f"fidelity: {len(data.FAMILIES)} families × {len(seeds)} seed(s), {data.HISTORY} history messages each")
    cells, fidelity = run(seeds)
    say("\nShare of facts kept (mean tokens used ÷ budget):\n")
    say(table(cells, markdown=False))
    say("\nCompaction input fidelity (facts of the covered messages that reach the summarizer's prompt):\n")
    say(fidelity_table(fidelity, markdown=False))
    rejected, checked = false_rejections(seeds)
    rejections = f"{len(rejected)} of {checked} summaries" + (f" ({'; '.join(rejected)})" if rejected else "")
    say(f"\nPlausibility check on summarize's summaries, false rejections: {rejections}")
    say("\nTargets:")
    for line in targets(cells):
        say(line)
    meaning: list[str] = ["The `embeddings` extra was not installed: what embeddings add was not measured."]
    embedder = load_embedder("minilm") if available() else None
    if embedder is not None:
        say(f"\nWhat embeddings add ({embedder.name}; the paraphrase family asks in other words):\n")
        meaning_cells = run_meaning(seeds, embedder)
        say(meaning_table(meaning_cells, markdown=False))
        meaning = [
            f"What embeddings add: `recall` with the `embeddings` extra ({embedder.name}) against BM25 alone, on "
            "the same conversations, plus the `paraphrase` family (16 facts, each asked for in other words: no "
            "word in common after stop words and stemming; 16 inputs a conversation, each shifted on its own). "
            "Share of facts kept (mean tokens used ÷ budget):",
            "",
            meaning_table(meaning_cells, markdown=True),
        ]
    else:
        say("\nThe embeddings extra is not installed: what embeddings add is not measured")
    output: Path | None = args.output if args.output is not None or args.quick else RESULTS
    if output is not None:
        command = "python -m benchmarks.fidelity" + (" " + " ".join(argv if argv is not None else sys.argv[1:]))
        text = "\n".join(
            [
                "# Fidelity benchmark",
                "",
                f"`{command.strip()}`: {len(data.FAMILIES)} families × {len(seeds)} seed(s), "
                f"{data.HISTORY} history messages each; budgets ¼ and 1/10 of the history's tokens plus the "
                f"protected system prompt and input; contextshift's approximate counter. {load_note()}.",
                "",
                "Share of facts whose identifying value is in the prompt (mean tokens used ÷ budget):",
                "",
                table(cells, markdown=True),
                "",
                "Compaction input fidelity: facts of the covered messages whose value reaches the summarizer's "
                "prompt (normal caps: 2,000 characters a tool result, 500 an argument; a capped result keeps "
                "its pieces with numbers and names), against a plain cut at the caps:",
                "",
                fidelity_table(fidelity, markdown=True),
                "",
                f"Compaction's plausibility check on every summary `summarize` wrote here (good summaries), "
                f"false rejections: {rejections}.",
                "",
                "Targets:",
                "",
                *targets(cells),
                "",
                *meaning,
                "",
            ]
        )
        output.write_text(text, encoding="utf-8")
        say(f"\nwrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
