"""Benchmark: contextshift.shift_context against LangChain's trim_messages and LlamaIndex's ChatMemoryBuffer.

Run from the project root:

    .venv/bin/python -m benchmarks.shifting           # full run (1k/10k/100k), writes benchmarks/results/shifting.md
    .venv/bin/python -m benchmarks.shifting --quick   # CI smoke: 1k/10k, 3 runs, writes nothing by default

Cases (every library gets the same deterministic conversation; see ``benchmarks/conversations.py``):

1. *same counter*: every side charges a message ``len(text)//4 + 4`` (contextshift:
   ``lambda s: len(s)//4`` with ``per_message_overhead=4``; LangChain: a per-message counter; LlamaIndex:
   ``tokenizer_fn=lambda s: [0]*(len(s)//4)`` over its joined history, which has no per-message overhead).
   contextshift gets its own ``Message`` objects, as the peers get theirs (all built outside the timed
   region); at 10k a second row passes the OpenAI dicts, conversion included, and a third the same objects
   without ids (as ``Message.user(...)`` and the other factories make them), which get their ids in the call.
   LlamaIndex's ``get()`` is quadratic: a larger size is skipped when its extrapolated time is over a cap.
2. *exact o200k, one call, cold*: ``get_tokenizer("gpt-4o")``'s profile (a fresh one per run, so its count
   cache starts empty) against ``trim_messages`` with a per-message tiktoken o200k counter.
3. *exact o200k, growing*: a conversation that grows by one user/assistant pair per turn, with a shift
   on every turn; the total time of all turns. Here contextshift's content-keyed count cache pays off.
4. *approximate profile (info)*: contextshift's script-aware estimate against ``token_counter="approximate"``.

Medians of up to 7 timed runs after a warm-up (fewer for slow calls), the garbage collector paused inside
timed calls (as timeit does); peak memory is the tracemalloc peak of one more call, in a run of its own.
Timings are printed, never asserted.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextshift import ApproximateProfile, Message, ShiftResult, get_tokenizer, shift_context
from contextshift.tokenizers import TiktokenProfile

from . import conversations as conv
from .report import Harness, Row, arguments, machine, say, section

RESULTS = Path(__file__).resolve().parent / "results" / "shifting.md"
SAME = "same counter"
EXACT_ONE = "exact o200k, one call, cold"
GROWING = "exact o200k, growing"
APPROX = "approx profile (info)"


@dataclass(frozen=True)
class Config:
    quick: bool
    sizes: tuple[int, ...]
    budgets: tuple[int, ...]
    max_runs: int
    warmup: float  # seconds of warm-up calls before timing (at most 50 calls)
    llama_cap: float  # skip a larger LlamaIndex size whose predicted get() time is above this (seconds)
    exact_sizes: tuple[int, ...]
    growing_start: int
    growing_turns: int
    growing_budgets: tuple[int, ...]
    markdown: Path | None

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Config:
        parser = arguments(
            "shifting", __doc__, "CI smoke: 1k and 10k messages, 3 runs", "benchmarks/results/shifting.md"
        )
        args = parser.parse_args(argv)
        if args.quick:
            return cls(
                quick=True,
                sizes=(1_000, 10_000),
                budgets=(8_000, 100_000),
                max_runs=3,
                warmup=0.2,
                llama_cap=5.0,
                exact_sizes=(1_000,),
                growing_start=1_000,
                growing_turns=10,
                growing_budgets=(8_000,),
                markdown=args.markdown,
            )
        return cls(
            quick=False,
            sizes=(1_000, 10_000, 100_000),
            budgets=(8_000, 100_000),
            max_runs=7,
            warmup=0.5,
            llama_cap=60.0,
            exact_sizes=(1_000, 10_000, 100_000),
            growing_start=2_000,
            growing_turns=50,
            growing_budgets=(8_000,),
            markdown=args.markdown or RESULTS,
        )


# -- counters -------------------------------------------------------------------------------------------


def quarter(text: str) -> int:
    """contextshift's side of the shared counter (the library adds ``per_message_overhead=4``)."""
    return len(text) // 4


def per_message(count: Callable[[Any], int]) -> Callable[[Any], int]:
    """Mark ``count`` as a per-message counter for trim_messages, which then sums it over a list.

    trim_messages checks that the first parameter is annotated with the ``BaseMessage`` class itself (not
    the string this module's ``from __future__ import annotations`` would leave there).
    """
    from langchain_core.messages import BaseMessage

    first = next(iter(inspect.signature(count).parameters))
    count.__annotations__[first] = BaseMessage
    return count


@per_message
def lc_quarter(message: Any) -> int:
    """LangChain's side of the shared counter: ``len(text)//4 + 4`` per message, over the text contextshift
    counts (content, then each tool call's name and arguments)."""
    return len(conv.langchain_text(message)) // 4 + 4


def llama_quarter(text: str) -> list[int]:
    return [0] * (len(text) // 4)


def tiktoken_o200k() -> Any:
    """tiktoken's o200k_base, offline: from the vocabulary cache llama-index bundles."""
    try:  # find_spec of a submodule imports its parent package, and raises when that is missing
        spec = importlib.util.find_spec("llama_index.core")
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        raise SystemExit("llama-index-core is not installed (pip install -e '.[bench]')")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(spec.origin).parent / "_static" / "tiktoken_cache"))
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


# -- the conversations ----------------------------------------------------------------------------------


class Corpus:
    """One conversation in every library's shape (built lazily, never inside a timed region)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.dicts = conv.generate(size)
        self.messages: list[Message] = conv.to_messages(self.dicts)
        self._langchain: list[Any] | None = None
        self._llama: list[Any] | None = None

    @property
    def langchain(self) -> list[Any]:
        if self._langchain is None:
            self._langchain = conv.to_langchain(self.dicts)
        return self._langchain

    @property
    def llama(self) -> list[Any]:
        if self._llama is None:
            self._llama = conv.to_llamaindex(self.dicts)
        return self._llama

    def drop_llama(self) -> None:
        self._llama = None


def trim(messages: list[Any], budget: int, counter: Any) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(
        messages, max_tokens=budget, token_counter=counter, strategy="last", include_system=True, start_on="human"
    )


# -- the cases ------------------------------------------------------------------------------------------


class Bench(Harness):
    def __init__(self, cfg: Config) -> None:
        super().__init__(quick=cfg.quick, max_runs=cfg.max_runs, warmup=cfg.warmup)
        self.cfg = cfg
        # (messages, seconds): the slower median get() at the largest size so far. A larger size is skipped
        # when its quadratic extrapolation from there is over the cap.
        self.llama_last: tuple[int, float] | None = None

    def skipped(self, case: str, library: str, messages: int, budget: int, note: str) -> None:
        self.rows.append(Row(case, library, messages, budget, note=note))
        say(f"  {case:<28} {library:<34} {messages:>7,} msgs  budget {budget:>7,} ... {note}")

    # 1. the same per-message counter everywhere

    def same_counter(self, corpus: Corpus) -> None:
        for budget in self.cfg.budgets:
            self.same_counter_budget(corpus, budget)

    def same_counter_budget(self, corpus: Corpus, budget: int) -> None:
        n, messages, dicts, lc_messages = corpus.size, corpus.messages, corpus.dicts, corpus.langchain
        base = self.row(
            SAME,
            "contextshift.shift_context",
            n,
            budget,
            lambda: shift_context(messages, quarter, budget, per_message_overhead=4),
            kept=lambda r: len(r.kept),
        )
        result: ShiftResult = base.timing.result  # type: ignore[union-attr]
        lc = self.row(
            SAME,
            "langchain trim_messages",
            n,
            budget,
            lambda: trim(lc_messages, budget, lc_quarter),
            kept=len,
            baseline=base,
        )
        if n == 10_000:
            # Dicts in on both sides: each library's own conversion is part of the timed call.
            from langchain_core.messages import convert_to_messages

            lc_dicts = conv.to_langchain_dicts(dicts)
            # Message objects without ids, as the factories make them: each gets its msg-<index> id in the call.
            id_less = [dataclasses.replace(m, id="") for m in messages]
            self.row(
                SAME,
                "contextshift, id-less objects",
                n,
                budget,
                lambda: shift_context(id_less, quarter, budget, per_message_overhead=4),
                kept=lambda r: len(r.kept),
                note="ids given in the call (msg-<index>)",
            )
            on_dicts = self.row(
                SAME,
                "contextshift, OpenAI dicts in",
                n,
                budget,
                lambda: shift_context(dicts, quarter, budget, per_message_overhead=4),
                kept=lambda r: len(r.kept),
                note="incl. dict → Message conversion",
            )
            self.row(
                SAME,
                "langchain, dicts in",
                n,
                budget,
                lambda: trim(convert_to_messages(lc_dicts), budget, lc_quarter),
                kept=len,
                baseline=on_dicts,
                note="convert_to_messages + trim_messages",
            )
        lc_kept = lc.timing.result  # type: ignore[union-attr]
        lc_tokens = sum(lc_quarter(m) for m in lc_kept)
        self.check(result, budget, f"{SAME}, {n:,} msgs")
        line = (
            f"{SAME}, {n:,} msgs, budget {budget:,}: contextshift kept {len(result.kept):,} "
            f"({result.tokens:,} tokens, {len(result.excluded):,} excluded); "
            f"trim_messages kept {len(lc_kept):,} ({lc_tokens:,} tokens)"
        )
        if lc_tokens > budget:
            self.problems.append(f"trim_messages went over budget: {line}")
        self.llama(corpus, budget, base, line)

    def llama(self, corpus: Corpus, budget: int, base: Row, line: str) -> None:
        n = corpus.size
        name = "llama-index ChatMemoryBuffer.get"
        if self.llama_last is not None and n > self.llama_last[0]:
            prev_n, prev_s = self.llama_last
            predicted = prev_s * (n / prev_n) ** 2
            if predicted > self.cfg.llama_cap:
                note = f"skipped (quadratic: {prev_s:.1f} s at {prev_n // 1000}k, ~{predicted:,.0f} s predicted)"
                self.skipped(SAME, name, n, budget, note)
                self.sanity.append(line + "; llama-index skipped")
                return
        from llama_index.core.memory import ChatMemoryBuffer

        system, history = corpus.llama[0], corpus.llama[1:]
        # The system prompt stays outside the buffer (as a llama-index app keeps it) and is charged up front.
        system_cost = len(str(system.content)) // 4 + 4
        memory = ChatMemoryBuffer.from_defaults(
            chat_history=history, token_limit=budget - system_cost, tokenizer_fn=llama_quarter
        )
        start = time.perf_counter()
        row = self.row(
            SAME,
            name,
            n,
            budget,
            memory.get,
            kept=lambda r: len(r) + 1,
            baseline=base,
            note="no per-message overhead in its count",
            single_shot_after=3.0,
        )
        total = time.perf_counter() - start
        typical = row.timing.median  # type: ignore[union-attr]
        if self.llama_last is None or n > self.llama_last[0] or typical > self.llama_last[1]:
            self.llama_last = (n, typical)
        say(f"    (llama-index {n:,} msgs took {total:.1f} s in all)")
        self.sanity.append(line + f"; llama-index kept {row.kept:,} (system prompt included)")

    # 2. exact o200k, one cold call

    def exact_one(self, corpus: Corpus, encoding: Any) -> None:
        n, budget, lc_messages = corpus.size, 8_000, corpus.langchain
        holder: dict[str, TiktokenProfile] = {}

        def fresh() -> None:
            holder["p"] = TiktokenProfile("o200k_base")

        @per_message
        def tk(message: Any) -> int:
            return len(encoding.encode(conv.langchain_text(message))) + 3

        base = self.row(
            EXACT_ONE,
            "contextshift + get_tokenizer('gpt-4o')",
            n,
            budget,
            lambda: shift_context(corpus.messages, holder["p"], budget),
            setup=fresh,
            kept=lambda r: len(r.kept),
            note="fresh profile per run: empty cache; toktok batches on all cores",
        )
        self.check(base.timing.result, budget, f"{EXACT_ONE}, {n:,} msgs")  # type: ignore[union-attr]
        self.row(
            EXACT_ONE,
            "langchain trim_messages + tiktoken",
            n,
            budget,
            lambda: trim(lc_messages, budget, tk),
            kept=len,
            baseline=base,
        )

    # 3. exact o200k over a growing conversation

    def growing(self, encoding: Any) -> None:
        cfg = self.cfg
        start_n, turns = cfg.growing_start, cfg.growing_turns
        corpus = Corpus(start_n)
        extra_dicts = conv.more_turns(start_n, turns)
        extra = conv.to_messages(extra_dicts)
        extra_lc = conv.to_langchain(extra_dicts)
        lc_base = corpus.langchain
        holder: dict[str, TiktokenProfile] = {}
        final = start_n + 2 * turns
        label = f"{turns} turns, {start_n:,}→{final:,} msgs"
        profile = get_tokenizer("gpt-4o")
        if not isinstance(profile, TiktokenProfile) or profile.encoding != "o200k_base":
            self.problems.append(f"get_tokenizer('gpt-4o') is {profile!r}, not the o200k profile")

        def fresh() -> None:
            holder["p"] = TiktokenProfile("o200k_base")

        @per_message
        def tk(message: Any) -> int:
            return len(encoding.encode(conv.langchain_text(message))) + 3

        @functools.lru_cache(maxsize=1 << 16)
        def encoded(text: str) -> int:
            return len(encoding.encode(text))

        @per_message
        def tk_cached(message: Any) -> int:  # what an app would write: tiktoken behind an lru_cache
            return encoded(conv.langchain_text(message)) + 3

        for budget in cfg.growing_budgets:

            def run_cs(budget: int = budget) -> ShiftResult:
                convo = list(corpus.messages)
                result = None
                for turn in range(turns):
                    convo.extend(extra[2 * turn : 2 * turn + 2])
                    result = shift_context(convo, holder["p"], budget)
                assert result is not None
                return result

            def run_lc(budget: int = budget, counter: Any = tk) -> list[Any]:
                convo = list(lc_base)
                result: list[Any] = []
                for turn in range(turns):
                    convo.extend(extra_lc[2 * turn : 2 * turn + 2])
                    result = trim(convo, budget, counter)
                return result

            base = self.row(
                GROWING,
                "contextshift + get_tokenizer('gpt-4o')",
                final,
                budget,
                run_cs,
                setup=fresh,
                kept=lambda r: len(r.kept),
                note=f"{label}; total of all turns, cache starts empty",
            )
            result: ShiftResult = base.timing.result  # type: ignore[union-attr]
            self.check(result, budget, f"{GROWING}, budget {budget:,}")
            lc = self.row(
                GROWING,
                "langchain trim_messages + tiktoken",
                final,
                budget,
                run_lc,
                kept=len,
                baseline=base,
                note=label,
            )
            self.row(
                GROWING,
                "langchain trim_messages + tiktoken in lru_cache",
                final,
                budget,
                functools.partial(run_lc, budget, tk_cached),
                setup=encoded.cache_clear,
                kept=len,
                baseline=base,
                note=f"{label}; counts cached by text, cache starts empty",
            )
            hits, misses = holder["p"].cache.hits, holder["p"].cache.misses
            self.sanity.append(
                f"{GROWING}, budget {budget:,}: last turn contextshift kept {len(result.kept):,} "
                f"({result.tokens:,} tokens), trim_messages kept {lc.kept:,}; contextshift count cache "
                f"over the last run: {hits:,} hits, {misses:,} misses"
            )

        # Exactness: the profile's counts are tiktoken's.
        sample = [m.text for m in corpus.messages[::7]] + [m.text for m in extra]
        counter = TiktokenProfile("o200k_base")
        mismatched = sum(counter.count(t) != len(encoding.encode(t)) for t in sample)
        self.sanity.append(
            f"o200k exactness: contextshift's counts equal tiktoken's on {len(sample) - mismatched:,}"
            f" of {len(sample):,} message texts"
        )
        if mismatched:
            self.problems.append(f"{mismatched} o200k counts differ from tiktoken's")

    # 4. the approximate profile, for information

    def approx(self, corpus: Corpus) -> None:
        n, budget, lc_messages = corpus.size, 8_000, corpus.langchain
        holder: dict[str, ApproximateProfile] = {}

        def fresh() -> None:
            holder["p"] = ApproximateProfile()

        if get_tokenizer("unknown-model").name != "approximate":
            self.problems.append("get_tokenizer('unknown-model') is not the approximate profile")
        base = self.row(
            APPROX,
            "contextshift + get_tokenizer('unknown')",
            n,
            budget,
            lambda: shift_context(corpus.messages, holder["p"], budget),
            setup=fresh,
            kept=lambda r: len(r.kept),
            note="script-aware estimate, empty cache",
        )
        self.check(base.timing.result, budget, f"{APPROX}, {n:,} msgs")  # type: ignore[union-attr]
        self.row(
            APPROX,
            "langchain trim_messages 'approximate'",
            n,
            budget,
            lambda: trim(lc_messages, budget, "approximate"),
            kept=len,
            baseline=base,
            note="a different estimate: not the same counter",
        )

    def check(self, result: ShiftResult, budget: int, where: str) -> None:
        if result.tokens > budget:
            self.problems.append(f"{where}: contextshift reported {result.tokens:,} tokens > budget {budget:,}")
        kept = {m.id for m in result.kept}
        if len(kept) + len(result.excluded) != len(result.reasons):
            self.problems.append(f"{where}: kept + excluded do not cover every input")

    # -- targets ----------------------------------------------------------------------------------------

    def find(self, case: str, library: str, messages: int, budget: int) -> Row | None:
        for row in self.rows:
            if (row.case, row.library, row.messages, row.budget) == (case, library, messages, budget):
                return row
        return None

    def targets(self) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        for budget in self.cfg.budgets:
            lc = self.find(SAME, "langchain trim_messages", 10_000, budget)
            if lc is not None and lc.ratio is not None:
                ratio = 1 / lc.ratio
                out.append(
                    (
                        ratio <= 0.5,
                        f"same counter, 10k msgs, budget {budget:,}: shift_context takes "
                        f"{ratio:.2f}× trim_messages' time (target ≤ 0.5×, issue #12)",
                    )
                )
            on_dicts = self.find(SAME, "langchain, dicts in", 10_000, budget)
            if on_dicts is not None and on_dicts.ratio is not None:
                ratio = 1 / on_dicts.ratio
                out.append(
                    (
                        ratio <= 0.3,
                        f"same counter, dicts in on both sides, 10k msgs, budget {budget:,}: "
                        f"shift_context takes {ratio:.2f}× convert_to_messages + trim_messages' "
                        "time (target ≤ 0.3×, issue #12)",
                    )
                )
        for budget in self.cfg.growing_budgets:
            lc = self.find(
                GROWING,
                "langchain trim_messages + tiktoken",
                self.cfg.growing_start + 2 * self.cfg.growing_turns,
                budget,
            )
            if lc is not None and lc.ratio is not None:
                out.append(
                    (
                        lc.ratio >= 10,
                        f"exact o200k, growing conversation, budget {budget:,}: "
                        f"contextshift {lc.ratio:.1f}× faster than trim_messages + tiktoken"
                        " (target ≥ 10×)",
                    )
                )
        small, large = self.cfg.sizes[0], self.cfg.sizes[-1]
        for budget in self.cfg.budgets:
            per = {}
            for n in self.cfg.sizes:
                row = self.find(SAME, "contextshift.shift_context", n, budget)
                if row is not None and row.timing is not None:
                    per[n] = row.timing.median / n
            if small in per and large in per:
                exponent = math.log(per[large] * large / (per[small] * small)) / math.log(large / small)
                steps = ", ".join(f"{per[n] * 1e6:.2f} µs/msg at {n // 1000}k" for n in sorted(per))
                out.append(
                    (
                        exponent <= 1.1,
                        f"linear growth, budget {budget:,}: {steps}; per-message time "
                        f"{large // 1000}k/{small // 1000}k = {per[large] / per[small]:.2f}×,"
                        f" time ∝ n^{exponent:.2f} (target: exponent ≤ 1.10)",
                    )
                )
        return out


def markdown(bench: Bench, targets: list[tuple[bool, str]], elapsed: float) -> str:
    return bench.page(
        "contextshift benchmark: context shifting",
        "python -m benchmarks.shifting",
        machine(),
        elapsed,
        [
            "Conversations: a system prompt, then alternating user/assistant turns of 10–120 words (about 440 "
            "characters a message), with about one assistant turn in eight calling one or two tools. contextshift "
            "and LangChain get the same messages with their tool calls and results (LangChain: `AIMessage.tool_calls` "
            "and `ToolMessage`s); both count the same text per message: the content, then each tool call's name and "
            "arguments (LangChain's counter serializes the parsed arguments back, which gives the same characters). "
            "llama-index's memory buffer counts plain text only, so it gets the messages with tools flattened into "
            "that same text. *same counter*: `len(text)//4 + 4` per message everywhere (llama-index: "
            "`len(joined history)//4`, no per-message overhead). *exact o200k*: contextshift's "
            "`get_tokenizer('gpt-4o')` profile (toktok, 3 tokens a message + 3 priming) against a per-message "
            "tiktoken o200k counter (+3). *growing*: one user/assistant pair appended per turn and a shift on every "
            "turn; the time is the total over all turns; the peer runs twice, counting every message each turn and "
            "with tiktoken behind an `lru_cache` keyed on the text (its cache emptied before each run, as "
            "contextshift's profile starts empty).",
            "",
            "Median of up to 7 timed runs after a warm-up (fewer for slow calls; the `runs` column), garbage "
            "collector paused in timed calls. Peak MiB is tracemalloc's peak during one more call, run "
            "separately (a peer call slower than 2 s gets no memory run: tracemalloc would slow it several-fold, "
            "and the column shows –). `time ÷ contextshift` above 1 means contextshift was faster.",
        ],
        section("Targets", [f"{'met' if ok else '**not met**'}: {text}" for ok, text in targets]),
        section("Kept messages (same counter and budget)", bench.sanity),
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = Config.from_args(argv)
    bench = Bench(cfg)
    started = bench.begin(f"contextshift shifting benchmark ({'quick' if cfg.quick else 'full'}): {machine()}")
    encoding = tiktoken_o200k()

    corpora: dict[int, Corpus] = {}

    def one() -> None:
        for n in cfg.sizes:
            t = time.perf_counter()
            corpora[n] = Corpus(n)
            say(f" {n:,} messages generated in {time.perf_counter() - t:.1f} s")
            bench.same_counter(corpora[n])
            corpora[n].drop_llama()

    def two() -> None:
        for n in cfg.exact_sizes:
            bench.exact_one(corpora[n], encoding)

    sections: list[tuple[str, Callable[[], None]]] = [
        ("[1] same per-message counter: len(text)//4 + 4", one),
        ("[2] exact o200k counter, one call on a cold cache", two),
        ("[3] exact o200k counter, repeated calls over a growing conversation", lambda: bench.growing(encoding)),
        ("[4] approximate profile (information only: the two estimates differ)", lambda: bench.approx(corpora[10_000])),
    ]
    for title, run in sections:
        say(f"\n{title}")
        t = time.perf_counter()
        run()
        say(f" ({time.perf_counter() - t:.1f} s)")
    if not bench.problems:
        bench.sanity.append("contextshift's reported tokens were within budget in every case")
    targets = bench.targets()
    return bench.conclude(
        started, targets=targets, markdown=lambda elapsed: markdown(bench, targets, elapsed), path=cfg.markdown
    )


if __name__ == "__main__":
    sys.exit(main())
