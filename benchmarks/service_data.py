"""Deterministic chat histories for the service benchmark, produced in chunks (never all in memory at once).

A history alternates user and assistant turns of 10–120 words; about one assistant turn in ten calls a
tool (sometimes two in parallel) and gets a ``tool`` result for each call before it answers. The words mix
common English, a few thousand seeded pseudo-words, names, numbers and identifiers, so practically every
text is distinct (a content-keyed count cache cannot hit across messages, only on a message seen before).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


COMMON = _words(
    "the of and to in is that it for on with as was be this by at from or have an not are but we you "
    "they can will which their has more if one about all would there been so what when who also into "
    "than other some could these only new may them then over such our most after its first two any well "
    "because like make just time how people should very where need know work data system model user file "
    "value error request server config cache token budget message context prompt window memory history "
    "answer question result change update check build test run deploy release version branch commit "
    "issue plan team customer order price report query table index page account service network latency "
    "thread process queue worker batch retry timeout limit policy rule schema field record event signal "
    "story scene character village forest river castle night morning letter journey secret promise "
    "little great small large early late quick slow clear simple careful exact rough strong weak main "
    "please thanks sure right maybe still already really probably actually exactly instead between"
)
NAMES = _words(
    "Alice Bob Carol Dmitri Elena Farah Gustavo Hiro Ingrid Jamal Keiko Lars Mina Nikolai Olu Priya "
    "Quentin Rosa Sven Tamsin Umar Valentina Wen Xavier Yara Zoltan Amsterdam Berlin Chicago Denver Kyoto"
)
TOOLS = ("search_docs", "get_weather", "run_sql", "read_file", "lookup_order", "create_ticket")
_ONSETS = (
    "b",
    "br",
    "c",
    "ch",
    "d",
    "dr",
    "f",
    "fl",
    "g",
    "gr",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "pl",
    "qu",
    "r",
    "s",
    "sh",
    "st",
    "t",
    "th",
    "tr",
    "v",
    "w",
    "z",
)
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "x", "ck")

SYSTEM_PROMPT = (
    "You are Quill, a careful assistant for the Northwind engineering team. Answer in plain language, "
    "cite the document or ticket you used, and say when you are unsure. Use the tools when a question "
    "needs current data. Never invent order numbers, prices or dates. Keep answers under two hundred "
    "words unless the user asks for more."
)


class Words:
    """Seeded sentences of 10–120 words over a mixed vocabulary."""

    def __init__(self, seed: str, rare_words: int = 5000) -> None:
        self.rng = rng = random.Random(seed)
        rare: set[str] = set()
        while len(rare) < rare_words:
            rare.add(
                "".join(
                    rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                    for _ in range(rng.choice((1, 2, 2, 3)))
                )
            )
        self.rare = sorted(rare)
        numbers = [str(rng.randint(2, 99_999)) for _ in range(2000)]
        idents = [f"{rng.choice(self.rare)}_{rng.choice(COMMON)}()" for _ in range(1000)]
        self.pool: list[str] = []
        self.weights: list[float] = []
        total = 0.0
        for items, share in ((COMMON, 0.66), (self.rare, 0.24), (NAMES, 0.05), (numbers, 0.03), (idents, 0.02)):
            for item in items:
                total += share / len(items)
                self.pool.append(item)
                self.weights.append(total)

    def text(self, low: int = 10, high: int = 120) -> str:
        rng = self.rng
        count = rng.randint(low, high)
        words = rng.choices(self.pool, cum_weights=self.weights, k=count)
        sentences = []
        start = 0
        while start < count:
            size = min(count - start, rng.randint(5, 18))
            chunk = words[start : start + size]
            start += size
            if size > 8 and rng.random() < 0.4:
                chunk[rng.randint(2, size - 3)] += ","
            chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
            sentences.append(" ".join(chunk) + rng.choice((".", ".", ".", "?", "!")))
        return " ".join(sentences)


def history(size: int, seed: str, chunk: int = 5000) -> Iterator[list[dict[str, Any]]]:
    """Exactly ``size`` messages (user first, ending on an assistant turn when it can), in chunks."""
    words = Words(f"contextshift-service-bench:{seed}:{size}")
    rng = words.rng
    out: list[dict[str, Any]] = []
    produced = calls = 0

    def add(message: dict[str, Any]) -> None:
        nonlocal produced
        out.append(message)
        produced += 1

    while produced < size:
        add({"role": "user", "content": words.text()})
        room = size - produced
        if room <= 0:
            break
        parallel = 2 if rng.random() < 0.3 else 1
        if rng.random() < 0.1 and room >= parallel + 2:
            tool_calls = []
            for _ in range(parallel):
                calls += 1
                tool = rng.choice(TOOLS)
                tool_calls.append(
                    {
                        "id": f"call_{seed}_{calls:06d}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"query": words.text(3, 12)})},
                    }
                )
            add({"role": "assistant", "content": words.text(3, 20), "tool_calls": tool_calls})
            for call in tool_calls:
                add({"role": "tool", "tool_call_id": call["id"], "content": words.text(20, 120)})
        add({"role": "assistant", "content": words.text()})
        if len(out) >= chunk:
            yield out
            out = []
    if out:
        yield out


def user_inputs(count: int, seed: str) -> list[str]:
    """``count`` user messages of 10–120 words (the drafts of previews and the inputs of generations)."""
    words = Words(f"contextshift-service-bench-input:{seed}", rare_words=1000)
    return [words.text() for _ in range(count)]
