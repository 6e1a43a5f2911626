"""Benchmark: what each strategy keeps of real long conversations (G3b, G4a, S1), on LoCoMo's development half.

Run from the project root:

    .venv/bin/python -m benchmarks.fidelity_real           # full run -> benchmarks/results/fidelity-real.md
    .venv/bin/python -m benchmarks.fidelity_real --quick   # CI smoke: one conversation, a few questions

The data. LoCoMo (Maharana et al., ACL 2024): real multi-session chats of 369-689 turns, each question
annotated with the turns that hold its answer. Only the development half (five conversations) is read, from
``../shared/data/locomo/locomo-dev.json`` beside the project (``--data`` to point elsewhere). Its licence
(CC BY-NC 4.0) allows evaluation only: nothing of it is copied into this repository; the results file
carries aggregate numbers only. When the file is absent the benchmark says so and exits 0.

Each conversation becomes a chat: a system prompt first, then every turn in order, speaker A as ``user``
and speaker B as ``assistant``, each turn's speaker as its author (the message's ``name``), the session's
date before its first turn ("[8 May 2023, 1:56 pm] ..."), a shared photo's caption as text ("... [shares a
photo: a dog on a beach]"). Each question of categories 1-4
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5 is unanswerable from the chat and left out) is the
current input (``source="input"``), shifted on its own.

Budgets: 1/10 and 1/20 of the history's tokens, plus the protected system prompt and question; counter:
contextshift's approximate profile (``get_tokenizer("approximate")``). Strategies: every built-in one
through ``shift_with_strategy``, ``recall`` with MiniLM when the ``embeddings`` extra is installed, and a
naive reference, "BM25 fill": the history's turns best-first by BM25 against the question while they fit.

The metric. An evidence turn is kept when the prompt holds it verbatim (its id, its text unchanged), or
when a message the strategy wrote (a summary, an excerpt) contains its *key sentence*: the turn's longest
sentence (split after ``.``, ``!`` or ``?``), compared case-folded with runs of white space made one space.
A summary that only paraphrases a turn does not keep it. Reported: the share of questions whose evidence
turns are ALL kept, the share with at least one kept, per category; mean tokens used ÷ budget; mean time
per shift (this machine's load is in the results file). Questions whose evidence names a turn the
conversation does not have (an annotation slip) are left out and counted.

The service path. For the first conversation(s) the same chat is stored in SQLite through the service's
repositories and each question is a turn's draft: ``recall_candidates`` (the FTS index) picks the older
candidates, the window is the chat's newest messages, and the prompt the pipeline's strategy builds from
them is compared with the library's on the whole chat. A difference in the evidence kept is reported.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contextshift import Message, shift_with_strategy
from contextshift.core.embedding import Embedder
from contextshift.core.relevance import bm25_scores, terms
from contextshift.core.shifting import ShiftResult
from contextshift.core.tokens import message_costs
from contextshift.tokenizers import get_tokenizer

from .report import load_note, say

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
RESULTS = Path(__file__).resolve().parent / "results" / "fidelity-real.md"
STRATEGIES = ("truncate", "summarize", "vector-recall", "manual", "recall")
MINILM = "recall + MiniLM"
BM25_FILL = "BM25 fill"
BUDGETS = (("1/10", 0.10), ("1/20", 0.05))
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SYSTEM = "You are a helpful assistant. Answer from the conversation so far."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")
#: The --quick run: one conversation, this many questions of each category.
QUICK_QUESTIONS = 3


@dataclass(frozen=True)
class Question:
    """One question of categories 1-4, with the ids of its evidence turns."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Chat:
    """One conversation as a chat: the system prompt and the turns; each turn's text by id; its questions."""

    name: str
    system: Message
    turns: list[Message]
    questions: list[Question]
    skipped: int  # questions whose evidence names a turn the conversation does not have


@dataclass
class Cell:
    """What one strategy kept at one budget for one category (or all), over every question."""

    questions: int = 0
    all_kept: int = 0
    any_kept: int = 0
    used: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, all_kept: bool, any_kept: bool, used: float, seconds: float) -> None:
        self.questions += 1
        self.all_kept += all_kept
        self.any_kept += any_kept
        self.used.append(used)
        self.seconds.append(seconds)

    @property
    def share(self) -> float:
        return self.all_kept / self.questions if self.questions else 0.0

    @property
    def share_any(self) -> float:
        return self.any_kept / self.questions if self.questions else 0.0


def _date(raw: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as "8 May 2023, 1:56 pm"."""
    clock, _, day = raw.partition(" on ")
    return f"{day.replace(',', '')}, {clock}" if day else raw


def load_chats(path: Path) -> list[Chat]:
    """The conversations of a LoCoMo JSON file as chats."""
    out: list[Chat] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        speaker_a = conversation["speaker_a"]
        turns: list[Message] = []
        sessions = sorted(
            (int(key.split("_")[1]), key)
            for key, value in conversation.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        for _, key in sessions:
            date = _date(str(conversation.get(f"{key}_date_time", "")))
            for index, turn in enumerate(conversation[key]):
                text = str(turn.get("text", ""))
                caption = turn.get("blip_caption")
                if caption:
                    text = f"{text} [shares a photo: {caption}]".strip()
                if index == 0 and date:
                    text = f"[{date}] {text}"
                role: Literal["user", "assistant"] = "user" if turn["speaker"] == speaker_a else "assistant"
                speaker = str(turn["speaker"])  # a multi-party chat's author, as the OpenAI format carries it
                turns.append(Message(role=role, content=text, id=str(turn["dia_id"]), name=speaker))
        known = {m.id for m in turns}
        questions: list[Question] = []
        skipped = 0
        for qa in sample["qa"]:
            category = int(qa.get("category", 0))
            if category not in CATEGORIES:
                continue
            evidence = tuple(dict.fromkeys(str(e).strip() for e in qa.get("evidence", [])))
            if not evidence or not all(e in known for e in evidence):
                skipped += 1
                continue
            questions.append(Question(str(qa["question"]), category, evidence))
        system = Message(role="system", content=SYSTEM, id="system")
        out.append(Chat(str(sample.get("sample_id", len(out))), system, turns, questions, skipped))
    return out


def key_sentence(text: str) -> str:
    """A turn's key sentence: its longest sentence, case-folded, white space made single spaces."""
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()] or [text]
    return _SPACE.sub(" ", max(sentences, key=len)).strip().casefold()


def evidence_kept(chat: Chat, kept: Sequence[Message], evidence: Sequence[str]) -> list[bool]:
    """Per evidence turn, whether the prompt keeps it verbatim or quotes its key sentence in a message a
    strategy wrote (a summary or an excerpt: a kept message that is not one of the chat's turns as it was)."""
    original = {m.id: m.text for m in chat.turns}
    verbatim = {m.id for m in kept if m.id in original and m.text == original[m.id]}
    written = " ".join(
        _SPACE.sub(" ", m.text).casefold() for m in kept if m.id not in original or m.text != original[m.id]
    )
    return [e in verbatim or (bool(written) and key_sentence(original[e]) in written) for e in evidence]


Shift = Callable[[list[Message], int], tuple[list[Message], int]]


def strategy_shift(strategy: str, embedder: Embedder | None = None) -> Shift:
    """A shift through ``shift_with_strategy``: (kept messages, tokens)."""
    counter = get_tokenizer("approximate")

    def run(messages: list[Message], budget: int) -> tuple[list[Message], int]:
        result: ShiftResult = shift_with_strategy(messages, counter, budget, strategy=strategy, embedder=embedder)
        return list(result.kept), result.tokens

    return run


def bm25_fill(messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """The naive reference: the system prompt and the question, then the history's turns best-first by BM25
    against the question while they fit (a turn that does not fit is skipped), in chronological order."""
    counter = get_tokenizer("approximate")
    costs, fixed = message_costs(messages, counter, 4)
    system, history, question = messages[0], messages[1:-1], messages[-1]
    used = fixed + costs[0] + costs[-1]
    scores = bm25_scores(terms([question.text])[0], terms([m.text for m in history]))
    chosen: list[int] = []
    for index in sorted(range(len(history)), key=lambda i: (-scores[i], -i)):
        if scores[index] <= 0:
            break
        if used + costs[index + 1] <= budget:
            chosen.append(index)
            used += costs[index + 1]
    return [system, *(history[i] for i in sorted(chosen)), question], used


def history_tokens(chat: Chat) -> tuple[int, int]:
    """(the history's tokens, the system prompt's) with the approximate profile."""
    counter = get_tokenizer("approximate")
    costs, fixed = message_costs([chat.system, *chat.turns], counter, 4)
    return sum(costs[1:]), costs[0] + fixed


def budget_for(chat: Chat, question: Message, fraction: float) -> int:
    """The budget: ``fraction`` of the history's tokens plus the protected system prompt and question."""
    history, system = history_tokens(chat)
    counter = get_tokenizer("approximate")
    question_cost = message_costs([question], counter, 4)[0][0]
    return system + question_cost + max(1, int(history * fraction))


Cells = dict[tuple[str, str, str], Cell]


def run(chats: Sequence[Chat], shifts: dict[str, Shift], questions: int | None = None) -> Cells:
    """Every chat × question × budget × shift: cells keyed (column, budget, category name or "all")."""
    cells: Cells = {}
    for chat in chats:
        for budget_label, fraction in BUDGETS:
            for column, shift in shifts.items():
                for qa in _questions(chat, questions):
                    question = Message(role="user", content=qa.text, id="question", source="input")
                    budget = budget_for(chat, question, fraction)
                    messages = [chat.system, *chat.turns, question]
                    start = time.perf_counter()
                    kept, tokens = shift(messages, budget)
                    seconds = time.perf_counter() - start
                    flags = evidence_kept(chat, kept, qa.evidence)
                    for category in (CATEGORIES[qa.category], "all"):
                        cells.setdefault((column, budget_label, category), Cell()).add(
                            all(flags), any(flags), tokens / budget, seconds
                        )
        say(f"  {chat.name}: {len(_questions(chat, questions))} questions done")
    return cells


def _questions(chat: Chat, per_category: int | None) -> list[Question]:
    if per_category is None:
        return chat.questions
    out: list[Question] = []
    for category in CATEGORIES:
        out.extend([q for q in chat.questions if q.category == category][:per_category])
    return out


def table(cells: Cells, columns: Sequence[str], markdown: bool) -> str:
    """Share of questions with every evidence turn kept (with at least one), per budget and category."""
    head = ["budget", "category", *columns]
    rows: list[list[str]] = []
    for label, _ in BUDGETS:
        for category in [*CATEGORIES.values(), "all"]:
            if (columns[0], label, category) not in cells:
                continue
            count = cells[(columns[0], label, category)].questions
            line = [label, f"{category} ({count})"]
            for column in columns:
                cell = cells[(column, label, category)]
                line.append(f"{cell.share:.0%} ({cell.share_any:.0%})")
            rows.append(line)
    return _grid(head, rows, markdown)


def cost_table(cells: Cells, columns: Sequence[str], markdown: bool) -> str:
    """Mean tokens used ÷ budget and mean (median) milliseconds per shift, over every question."""
    head = ["budget", "measure", *columns]
    rows: list[list[str]] = []
    for label, _ in BUDGETS:
        used = [f"{statistics.mean(cells[(c, label, 'all')].used):.0%}" for c in columns]
        seconds = [cells[(c, label, "all")].seconds for c in columns]
        rows.append([label, "tokens used", *used])
        rows.append(
            [
                label,
                "ms per shift, mean (median)",
                *[f"{statistics.mean(s) * 1000:.1f} ({statistics.median(s) * 1000:.1f})" for s in seconds],
            ]
        )
    return _grid(head, rows, markdown)


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


def targets(cells: Cells, embedded: bool) -> list[str]:
    """The issue's targets, each with what was measured (met or not)."""
    out: list[str] = []

    def check(what: str, key: tuple[str, str, str], goal: float) -> None:
        value = cells[key].share
        out.append(f"- {what}: {value:.0%} (target ≥ {goal:.0%}) {'met' if value >= goal else 'NOT met'}")

    check("recall, every evidence turn kept, 1/10", ("recall", "1/10", "all"), 0.8)
    check("recall, every evidence turn kept, 1/20", ("recall", "1/20", "all"), 0.7)
    check("recall, multi-hop, 1/10", ("recall", "1/10", "multi-hop"), 0.7)
    if embedded:
        check("recall + MiniLM, 1/10", (MINILM, "1/10", "all"), 0.9)
        check("recall + MiniLM, 1/20", (MINILM, "1/20", "all"), 0.8)
    return out


def recall_timing(chat: Chat, size: int = 600, repeats: int = 5) -> float:
    """Median milliseconds of a ``recall`` shift (no embedder) on the first ``size`` turns, over the first
    questions, at 1/10."""
    turns = chat.turns[:size]
    sub = Chat(chat.name, chat.system, turns, [], 0)
    shift = strategy_shift("recall")
    samples: list[float] = []
    for qa in chat.questions[:repeats]:
        question = Message(role="user", content=qa.text, id="question", source="input")
        budget = budget_for(sub, question, 0.10)
        messages = [chat.system, *turns, question]
        shift(messages, budget)  # warm: the analysed-text caches serve every later turn of a chat too
        start = time.perf_counter()
        shift(messages, budget)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def service_prompt(
    repos: Any, chat_id: str, system: Message, question: Message, budget: int, *, full_history: int
) -> tuple[list[Message], set[str]]:
    """What the service's ``recall`` keeps for ``question`` on a stored chat: the recent window worth the
    budget (``recent_window``), the older candidates ``recall_candidates`` hands over (all of them, or the
    full-text index's when ``full_history`` is 0), shifted by the strategy with the same budget; and the ids
    of the stored messages the strategy was handed."""
    from contextshift.service.recall import recall_candidates
    from contextshift.storage import row_to_message

    counter = get_tokenizer("approximate")
    window = await repos.messages.recent_window(chat_id, counter.name, budget, counter.count, store_counts=False)
    rows = window.rows
    if window.has_more:
        found = await recall_candidates(repos, chat_id, rows, question.text, full_history=full_history)
        rows = sorted([*found, *rows], key=lambda r: r.seq)
    messages = [system, *(row_to_message(r) for r in rows), question]
    result = shift_with_strategy(messages, counter, budget, strategy="recall")
    return list(result.kept), {r.id for r in rows}


async def _stored(database: Any, chat: Chat) -> tuple[str, dict[str, str]]:
    """The chat stored through the service's repositories: its id, and each row's id → the turn's id."""
    from contextshift.storage import Repositories

    async with database.session() as session:
        repos = Repositories(session)
        provider = await repos.providers.create(name="local", kind="openai", base_url="http://127.0.0.1:9/v1")
        model = await repos.models.create(provider_id=provider.id, name="local", context_window=32768)
        bot = await repos.bots.create(name="bench", chat_model_id=model.id, context_strategy="recall")
        stored = await repos.chats.create(bot_id=bot.id, title=chat.name)
        rows = await repos.messages.append_many(
            stored.id, [{"role": m.role, "content": m.content, "name": m.name} for m in chat.turns]
        )
    return stored.id, {row.id: turn.id for row, turn in zip(rows, chat.turns, strict=True)}


async def _compare(chats: Sequence[Chat], per_category: int | None, fraction: float) -> list[str]:
    import tempfile

    from contextshift.storage import Database, Repositories

    lines: list[str] = []
    library = strategy_shift("recall")
    with tempfile.TemporaryDirectory() as folder:
        database = Database(f"sqlite+aiosqlite:///{folder}/fidelity-real.db")
        await database.start()
        try:
            for chat in chats:
                chat_id, dia = await _stored(database, chat)
                every = {t.id for t in chat.turns}
                for mode, full in (("whole history", 10_000), ("full-text index", 0)):
                    same = complete = evidence_differ = asked = 0
                    for qa in _questions(chat, per_category):
                        question = Message(role="user", content=qa.text, id="question", source="input")
                        budget = budget_for(chat, question, fraction)
                        kept_library, _ = library([chat.system, *chat.turns, question], budget)
                        async with database.session() as session:
                            kept, handed = await service_prompt(
                                Repositories(session), chat_id, chat.system, question, budget, full_history=full
                            )
                        renamed = [replace_id(m, dia.get(m.id, m.id)) for m in kept]
                        asked += 1
                        same += [m.id for m in renamed] == [m.id for m in kept_library]
                        turns = {dia[i] for i in handed}
                        complete += all(m.id in turns for m in kept_library if m.id in every)
                        if evidence_kept(chat, renamed, qa.evidence) != evidence_kept(chat, kept_library, qa.evidence):
                            evidence_differ += 1
                    lines.append(
                        f"- {chat.name}, {mode}: {same} of {asked} prompts the library's exactly; {complete} of "
                        f"{asked} hand the strategy every message the library keeps; {evidence_differ} keep "
                        "other evidence"
                    )
        finally:
            await database.close()
    return lines


def replace_id(message: Message, new_id: str) -> Message:
    """``message`` with another id (a stored row's id read back as the chat's turn id)."""
    from dataclasses import replace

    return replace(message, id=new_id)


def service_check(chats: Sequence[Chat], per_category: int | None, budget_label: str = "1/10") -> list[str]:
    """The service path against the library on the same chats (see the module docstring): per chat and
    candidate mode, how many prompts are the library's exactly and how many keep other evidence."""
    import asyncio

    return asyncio.run(_compare(chats, per_category, dict(BUDGETS)[budget_label]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity_real", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one conversation, a few questions (CI smoke)")
    parser.add_argument("--data", type=Path, default=DATA, help=f"the LoCoMo JSON (default {DATA})")
    parser.add_argument("--output", type=Path, default=None, help=f"Markdown results (default {RESULTS})")
    parser.add_argument("--no-embeddings", action="store_true", help="leave recall + MiniLM out")
    parser.add_argument("--service", type=int, default=1, help="conversations checked on the service path (1)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        say(f"fidelity_real: {args.data} is absent (LoCoMo's development half, evaluation only): skipped")
        return 0
    say(f"fidelity_real: reading {args.data} (LoCoMo, CC BY-NC 4.0, evaluation only; nothing of it is copied)")
    chats = load_chats(args.data)
    per_category = QUICK_QUESTIONS if args.quick else None
    if args.quick:
        chats = chats[:1]
    shifts: dict[str, Shift] = {s: strategy_shift(s) for s in STRATEGIES}
    columns: list[str] = [*STRATEGIES]
    embedder: Embedder | None = None
    if not args.no_embeddings:
        from contextshift.embeddings import available, load_embedder

        embedder = load_embedder("minilm") if available() else None
    if embedder is not None:
        shifts[MINILM] = strategy_shift("recall", embedder)
        columns.append(MINILM)
    shifts[BM25_FILL] = bm25_fill
    columns.append(BM25_FILL)
    asked = sum(len(_questions(c, per_category)) for c in chats)
    skipped = sum(c.skipped for c in chats)
    sizes = ", ".join(f"{len(c.turns)}" for c in chats)
    say(f"{len(chats)} conversation(s) of {sizes} turns; {asked} questions (categories 1-4)")
    cells = run(chats, shifts, per_category)
    say("\nShare of questions with every evidence turn in the prompt (with at least one):\n")
    say(table(cells, columns, markdown=False))
    say("\nTokens used ÷ budget, and time per shift:\n")
    say(cost_table(cells, columns, markdown=False))
    timing = recall_timing(max(chats, key=lambda c: len(c.turns)))
    say(f"\nrecall (no embeddings) on a 600-message chat: {timing:.1f} ms per shift (median)")
    say("\nTargets:")
    for line in targets(cells, embedder is not None):
        say(line)
    service_lines: list[str] = []
    if args.service > 0:
        say("\nService path (SQLite, FTS-backed recall) against the library:")
        service_lines = service_check(chats[: args.service], per_category)
        for line in service_lines:
            say(line)
    output: Path | None = args.output if args.output is not None or args.quick else RESULTS
    if output is not None:
        command = "python -m benchmarks.fidelity_real" + " " + " ".join(argv if argv is not None else sys.argv[1:])
        embedded = (
            f'`{MINILM}` is `recall` with `load_embedder("minilm")` ({embedder.name}).'
            if embedder is not None
            else "The `embeddings` extra was not installed: `recall` with MiniLM was not measured."
        )
        text = "\n".join(
            [
                "# Fidelity on real conversations (LoCoMo, development half)",
                "",
                f"`{command.strip()}`: {len(chats)} conversation(s) of {sizes} turns, {asked} questions of "
                f"categories 1-4 ({skipped} left out: their evidence names a turn the conversation lacks). "
                "Read from `../shared/data/locomo/` (CC BY-NC 4.0, evaluation only; only aggregate numbers "
                "here). Budgets 1/10 and 1/20 of the history's tokens plus the protected system prompt and "
                f"question; contextshift's approximate profile. {load_note()}.",
                "",
                "An evidence turn is kept when the prompt holds it verbatim, or when a summary or excerpt "
                "contains its key sentence (its longest sentence, case-folded, white space normalised). "
                f"{embedded} `{BM25_FILL}` is the naive reference: the turns best-first by BM25 while they fit.",
                "",
                "Share of questions with every evidence turn in the prompt (with at least one):",
                "",
                table(cells, columns, markdown=True),
                "",
                "Tokens used ÷ budget, and time per shift:",
                "",
                cost_table(cells, columns, markdown=True),
                "",
                f"`recall` without embeddings on a 600-message chat: {timing:.1f} ms per shift (median, 1/10).",
                "",
                "Targets:",
                "",
                *targets(cells, embedder is not None),
                "",
                *(["Service path (SQLite, FTS-backed recall) against the library:", "", *service_lines, ""]),
            ]
        )
        output.write_text(text, encoding="utf-8")
        say(f"\nwrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
