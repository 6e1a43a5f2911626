"""The ``recall`` strategy (G4a): shift like ``truncate``, then bring back what the current input needs.

1. The prompt is shifted exactly as ``truncate`` shifts it (oldest unprotected tool groups leave first).
2. Every unprotected tool group is one document: the words of its messages (tool calls and results
   included), lower-cased, stop words dropped, stemmed. BM25 (``bm25s``) scores each document against the
   current input; a group's relevance is its score relative to the best-scoring group of the prompt.
3. An excluded group that a later group (not a question) states again with something changed is
   *superseded*: they share most of their words and every word of the query the earlier one matched, as
   "the code for Falcon is 1234" and later "the code for Falcon changed to 5678". Its relevance is cut to
   a quarter, so the later statement wins.
4. Excluded groups come back most relevant first, whole, while they fit. How much of the budget they may
   take adapts to their relevance: a group comes back only while everything recalled so far, itself
   included, takes at most ``MAX_RECALL_SHARE`` × its relevance of the room left beside the protected
   context. A few strongly relevant groups may take up to three quarters; weakly relevant ones only a
   little; nothing below ``MIN_RELEVANCE`` comes back.
5. The rest of the budget goes to the newest turns: the prompt is shifted again, oldest first, with the
   recalled groups held in place. Recalled messages keep their ids, stand in chronological order and
   have the reason ``recalled``.

When no excluded group shares a word with the input, the result is exactly ``truncate``'s.

In the service the excluded history is not all loaded: the database's full-text index picks the candidate
messages older than the recent window, and they are passed in as the oldest part of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from .messages import Message
from .relevance import bm25_scores, terms
from .shifting import RECALLED, Outcome, Prompt, ShiftResult, build_result, shift_prompt

if TYPE_CHECKING:
    from .strategies import StrategyRequest

#: Groups less relevant than this (relative to the best group of the prompt) never come back.
MIN_RELEVANCE = 0.2
#: The largest share of the room beside the protected context that recalled history may take.
MAX_RECALL_SHARE = 0.75
#: What a superseded statement's relevance is multiplied by.
SUPERSEDED_FACTOR = 0.25
#: A later group restates an earlier one when they share at least this share of their words.
SAME_STATEMENT = 0.4
#: At most this many excluded groups are considered, most relevant first.
MAX_CANDIDATES = 256


def current_input(messages: Sequence[Message]) -> str:
    """The text recall searches for: the current input, else the last user message."""
    for message in reversed(messages):
        if message.source == "input":
            return message.text
    for message in reversed(messages):
        if message.role == "user":
            return message.text
    return ""


#: Words of a question that say nothing about what it asks for (left out of the query, as stop words are).
QUESTION_WORDS = "what which who whom whose when where why how tell please remind know again anyone anything"


@cache
def _question_stems() -> frozenset[str]:
    return frozenset(terms([QUESTION_WORDS])[0])


def query_words(text: str) -> list[str]:
    """The distinct search words of ``text`` (stemmed, no stop words), in order of first appearance.

    The service turns them into a full-text query; the index stems them its own way.
    """
    if not text.strip():
        return []
    noise = _question_stems()
    return [w for w in dict.fromkeys(terms([text])[0]) if w not in noise]


def _excluded_note(count: int) -> list[str]:
    return [f"context shift excluded {count} message(s)"] if count else []


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


class _Scores:
    """BM25 relevance of every unprotected group of a prompt to the query."""

    def __init__(self, prompt: Prompt, query: str) -> None:
        self.query = frozenset(query_words(query))
        self.numbers = [n for n, g in enumerate(prompt.groups) if not g.protected]
        documents = ["\n".join(prompt.messages[p].text for p in prompt.groups[n].members) for n in self.numbers]
        analysed = terms(documents)
        self.words = {n: frozenset(d) for n, d in zip(self.numbers, analysed, strict=True)}
        raw = bm25_scores(sorted(self.query), analysed) if self.query else [0.0] * len(self.numbers)
        best = max(raw, default=0.0)
        self.relevance = {n: (score / best if best > 0 else 0.0) for n, score in zip(self.numbers, raw, strict=True)}
        self.frequency: dict[str, int] = {}
        for n in self.numbers:
            for word in self.words[n] & self.query:
                self.frequency[word] = self.frequency.get(word, 0) + 1
        self.questions = {n for n, text in zip(self.numbers, documents, strict=True) if text.rstrip().endswith("?")}
        self.containing: dict[str, list[int]] = {}
        for n in self.numbers:
            for word in self.words[n] & self.query:
                self.containing.setdefault(word, []).append(n)

    def superseded(self, number: int, first: list[int]) -> bool:
        """Whether a later group states the same thing again, with the same words of the query."""
        matched = self.words[number] & self.query
        if not matched:
            return False
        rarest = min(matched, key=lambda w: (self.frequency[w], w))
        mine = self.words[number]
        for other in self.containing.get(rarest, ()):
            if first[other] <= first[number]:
                continue
            theirs = self.words[other]
            if other in self.questions or not matched <= theirs or not (theirs - mine) or not (mine - theirs):
                continue  # a question, or nothing stated differently
            if _jaccard(mine, theirs) >= SAME_STATEMENT:
                return True
        return False


def recall(request: StrategyRequest) -> ShiftResult:
    """Shift like ``truncate``, then bring back the excluded tool groups the current input needs (G4a)."""
    prompt = Prompt(request.messages, request.count_tokens, request.per_message_overhead)
    budget = request.budget
    outcome = shift_prompt(prompt, budget)
    truncated = build_result(
        prompt, outcome, budget, strategy="recall", diagnostics=_excluded_note(len(outcome.removed))
    )
    if not outcome.removed:
        return truncated
    query = current_input(prompt.messages)
    if not query_words(query):
        return truncated
    chosen = _choose(prompt, outcome, query, budget)
    if not chosen:
        return truncated
    while chosen:
        held = set(chosen)
        order = [n for n in range(len(prompt.groups)) if n not in held]
        second = shift_prompt(prompt, budget, order=order)
        if second.tokens <= budget:
            break
        chosen.pop()  # the least relevant one (a counter whose whole-prompt count is not the sum)
    else:
        return truncated
    recalled = [p for n in sorted(chosen, key=lambda n: prompt.groups[n].first) for p in prompt.groups[n].members]
    result = build_result(prompt, second, budget, strategy="recall", diagnostics=_excluded_note(len(second.removed)))
    for position in recalled:
        result.reasons[prompt.messages[position].id] = RECALLED
    tokens = sum(prompt.costs[p] for p in recalled)
    result.diagnostics.append(
        f"recall brought back {len(recalled)} message(s) ({tokens} tokens) relevant to the current input"
    )
    return result


def _choose(prompt: Prompt, outcome: Outcome, query: str, budget: int) -> list[int]:
    """The excluded groups to bring back, most relevant first."""
    scores = _Scores(prompt, query)
    gone = set(outcome.removed)
    excluded = [n for n in scores.numbers if prompt.groups[n].first in gone]
    firsts = [g.first for g in prompt.groups]
    ranked = sorted(
        (n for n in excluded if scores.relevance[n] > 0),
        key=lambda n: (-scores.relevance[n], -firsts[n]),
    )[:MAX_CANDIDATES]
    relevance = {n: scores.relevance[n] * (SUPERSEDED_FACTOR if scores.superseded(n, firsts) else 1.0) for n in ranked}
    ranked.sort(key=lambda n: (-relevance[n], -firsts[n]))
    protected = sum(prompt.group_costs[n] for n, g in enumerate(prompt.groups) if g.protected)
    room = budget - prompt.fixed - protected
    chosen: list[int] = []
    used = 0
    for number in ranked:
        share = relevance[number]
        if share < MIN_RELEVANCE:
            break
        cost = prompt.group_costs[number]
        if used + cost <= room * MAX_RECALL_SHARE * share:
            chosen.append(number)
            used += cost
    return chosen


__all__ = ["MAX_RECALL_SHARE", "MIN_RELEVANCE", "current_input", "query_words", "recall"]
