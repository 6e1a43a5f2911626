"""Benchmark: contextshift.integrations.langchain.shift_messages against LangChain's trim_messages.

Run from the project root:

    .venv/bin/python -m benchmarks.integrations          # 1k/10k, writes benchmarks/results/integrations.md
    .venv/bin/python -m benchmarks.integrations --quick  # CI smoke: fewer runs, writes nothing by default

Both sides get the same LangChain messages, built outside the timed region from the deterministic conversation
of ``benchmarks/conversations.py``: a system prompt, user and assistant turns, and about one assistant turn in
eight calling one or two tools, as an ``AIMessage`` with real ``tool_calls`` followed by its ``ToolMessage``s.
Both count with the same LangChain counter:

1. *per-message counter*: ``len(text)//4 + 4`` per message (text: the content and each tool call's name and
   JSON arguments), the callable on one ``BaseMessage`` that trim_messages sums over a list;
2. *approximate*: LangChain's own ``count_tokens_approximately`` (``token_counter="approximate"``), a list
   counter.

trim_messages runs as LangChain's docs advise for chat history (``strategy="last"``, ``include_system=True``,
``start_on="human"``); shift_messages with its defaults (``truncate``; the system prompt and the newest user
message protected). Medians of up to 7 timed runs after a warm-up, the garbage collector paused in timed calls;
peak memory is the tracemalloc peak of one more call, run separately. Timings are printed, never asserted.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextshift import __version__

from . import conversations as conv
from .report import Harness, Row, arguments, say, section
from .shifting import per_message

RESULTS = Path(__file__).resolve().parent / "results" / "integrations.md"
PER_MESSAGE = "per-message counter"
APPROX = "approximate (list counter)"


@dataclass(frozen=True)
class Config:
    quick: bool
    sizes: tuple[int, ...]
    budgets: tuple[int, ...]
    max_runs: int
    warmup: float
    markdown: Path | None

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Config:
        parser = arguments(
            "integrations", __doc__, "CI smoke: 3 runs, a short warm-up", "benchmarks/results/integrations.md"
        )
        args = parser.parse_args(argv)
        if args.quick:
            return cls(True, (1_000, 10_000), (8_000, 100_000), 3, 0.2, args.markdown)
        return cls(False, (1_000, 10_000), (8_000, 100_000), 7, 0.5, args.markdown or RESULTS)


@per_message
def quarter(message: Any) -> int:
    """The shared per-message counter (trim_messages sums it over a list; so does contextshift's adapter): over
    the text contextshift counts, content then each tool call's name and arguments."""
    return len(conv.langchain_text(message)) // 4 + 4


def orphans(messages: Sequence[Any]) -> int:
    """Tool calls without their results and results without their calls."""
    calls = {c["id"] for m in messages for c in getattr(m, "tool_calls", None) or ()}
    results = {m.tool_call_id for m in messages if m.type == "tool"}
    return len(calls ^ results)


def machine() -> str:
    import langchain_core

    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; contextshift {__version__}, langchain-core {langchain_core.__version__}"
    )


class Bench(Harness):
    def __init__(self, cfg: Config) -> None:
        super().__init__(quick=cfg.quick, max_runs=cfg.max_runs, warmup=cfg.warmup)
        self.cfg = cfg

    def case(
        self, name: str, messages: list[Any], budget: int, counter: Any, measure_list: Callable[[Any], int]
    ) -> None:
        from langchain_core.messages import trim_messages

        from contextshift.integrations.langchain import shift_messages

        n = len(messages)
        base = self.row(
            name,
            "contextshift shift_messages",
            n,
            budget,
            lambda: shift_messages(messages, max_tokens=budget, token_counter=counter),
            kept=len,
            single_shot_after=30.0,
        )
        peer = self.row(
            name,
            "langchain trim_messages",
            n,
            budget,
            lambda: trim_messages(
                messages,
                max_tokens=budget,
                token_counter=counter,
                strategy="last",
                include_system=True,
                start_on="human",
            ),
            kept=len,
            baseline=base,
            single_shot_after=30.0,
        )
        ours, theirs = base.timing.result, peer.timing.result  # type: ignore[union-attr]
        ours_tokens, theirs_tokens = measure_list(ours), measure_list(theirs)
        line = (
            f"{name}, {n:,} msgs, budget {budget:,}: shift_messages kept {len(ours):,} ({ours_tokens:,} tokens, "
            f"{orphans(ours)} orphaned tool messages/calls); trim_messages kept {len(theirs):,} "
            f"({theirs_tokens:,} tokens, {orphans(theirs)} orphaned)"
        )
        self.sanity.append(line)
        if ours_tokens > budget:
            self.problems.append(f"shift_messages went over budget: {line}")
        if orphans(ours):
            self.problems.append(f"shift_messages orphaned a tool message: {line}")
        if ours[0] is not messages[0] or ours[-1] is not messages[-1]:
            self.problems.append(f"shift_messages lost the system prompt or the current input: {line}")

    def ratios(self) -> list[str]:
        out = []
        for row in self.rows:
            if row.ratio is not None:
                out.append(
                    f"{row.case}, {row.messages:,} msgs, budget {row.budget:,}: shift_messages takes "
                    f"{1 / row.ratio:.2f}× trim_messages' time; peak memory {mib(row.baseline)} against {mib(row)}"
                )
        return out


def mib(row: Row | None) -> str:
    return "– (no memory run)" if row is None or row.peak is None else f"{row.peak:.1f} MiB"


def markdown(bench: Bench, elapsed: float) -> str:
    return bench.page(
        "contextshift benchmark: the LangChain adapter against trim_messages",
        "python -m benchmarks.integrations",
        machine(),
        elapsed,
        [
            "The same LangChain messages on both sides (a system prompt, user and assistant turns of 10–120 words, "
            "about one assistant turn in eight calling one or two tools with real `tool_calls` and `ToolMessage`s), "
            "counted by the same LangChain counter: *per-message counter* `len(text)//4 + 4` per message (text: "
            "content and tool calls), *approximate* LangChain's `count_tokens_approximately`. trim_messages runs "
            "with `strategy='last', include_system=True, start_on='human'`; shift_messages with its defaults. "
            "shift_messages' time includes converting the messages to contextshift's and back and its final count "
            "of the fitted list by the counter. Median of up to 7 timed runs after a warm-up; peak MiB is "
            "tracemalloc's peak during one more call. `time ÷ contextshift` above 1 means contextshift was faster.",
        ],
        section("Ratios", bench.ratios()),
        section("Kept messages", bench.sanity),
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = Config.from_args(argv)
    from langchain_core.messages.utils import count_tokens_approximately

    bench = Bench(cfg)
    started = bench.begin(f"contextshift integrations benchmark ({'quick' if cfg.quick else 'full'}): {machine()}")
    for n in cfg.sizes:
        messages = conv.to_langchain(conv.generate(n))
        say(f"\n[{n:,} messages]")
        for budget in cfg.budgets:
            bench.case(PER_MESSAGE, messages, budget, quarter, lambda ms: sum(map(quarter, ms)))
            bench.case(APPROX, messages, budget, "approximate", count_tokens_approximately)
    return bench.conclude(
        started, ratios=bench.ratios(), markdown=lambda elapsed: markdown(bench, elapsed), path=cfg.markdown
    )


if __name__ == "__main__":
    sys.exit(main())
