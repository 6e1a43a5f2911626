"""A local extractive summary of dropped history (G3): no model call, deterministic.

The history is cut into sentences. Each sentence is scored for what a reader would miss: names (capitalized
words inside a sentence), numbers, decisions and commitments, questions, and words that are rare in the
dropped history (a repeated phrase scores once). The best sentences that fit the target are kept and
printed in chronological order, one line each, ``- role: sentence``. A long sentence is cut at a word
boundary, never inside a word. A line that mostly repeats a better one is left out. Shrinking drops
the least informative lines first.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .messages import Message
from .vocabulary import SUMMARY_HEADER

MAX_SENTENCE_CHARS = 240
ELLIPSIS = "…"
#: Lines sharing more than this share of their content words with a chosen line are left out.
NEAR_DUPLICATE = 0.5
#: With a query, how much relevance (0..1, relative to the best sentence) weighs against information.
RELEVANCE_WEIGHT = 12.0
#: A sentence this relevant (or more) is about the query: exempt from the shape cap.
RELEVANT = 0.3
#: Sentences that differ only in names and numbers are one kind of line: at most this many of a kind.
PER_SHAPE = 2
#: What the rarest query word a chosen line holds is worth to the lines chosen after it.
COVERED = 0.2
#: A later sentence restates an earlier one (which is then left out) when they share this share of words.
SAME_STATEMENT = 0.4
_SHAPE_NAME = re.compile(r"(?<!^)(?<![.!?] )\b[A-Z][\w'’-]*")
_SHAPE_NUMBER = re.compile(r"\d[\d.,:/-]*")

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_NUMBER = re.compile(r"\d")
_DECISION = re.compile(
    r"\b(decid\w*|agree\w*|will|won't|must|plan\w*|promis\w*|cho(?:se|ose|sen)|need\w*|should|deadline|"
    r"confirm\w*|remember|always|never|important|goal|deal|settled|booked|ordered|paid|owe\w*)\b",
    re.IGNORECASE,
)
_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why
    with you your yours yourself yourselves yes ok okay oh also like get got one would let lets
    """.split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class _Unit:
    order: int  # chronological position
    role: str
    workspace: str | None
    text: str
    score: float
    terms: frozenset[str] = frozenset()
    shape: str = ""


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _cut_at_word(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, ending on a whole word, with an ellipsis if cut."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 1)]
    space = cut.rfind(" ")
    if space > 0:
        cut = cut[:space]
    elif len(text) > limit:  # a single word longer than the limit: keep none of it rather than half
        return ""
    return cut.rstrip(" ,;:-") + ELLIPSIS


def _sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE_END.split(text):
        piece = " ".join(piece.split())
        if piece:
            out.append(piece)
    return out


def _units(messages: Sequence[Message]) -> list[_Unit]:
    raw: list[tuple[int, Message, str]] = []
    for message in messages:
        for sentence in _sentences(message.text):
            raw.append((len(raw), message, sentence))
    seen: set[str] = set()
    distinct: list[tuple[int, Message, str]] = []
    for order, message, sentence in raw:
        key = " ".join(w.lower() for w in _WORD.findall(sentence))
        if key and key not in seen:
            seen.add(key)
            distinct.append((order, message, sentence))
    document_frequency: Tally[str] = Tally()
    tokenized = []
    for _, _, sentence in distinct:
        words = _WORD.findall(sentence)
        content = {w.lower() for w in words if len(w) > 2 and w.lower() not in _STOPWORDS}
        document_frequency.update(content)
        tokenized.append((words, content))
    total = max(1, len(distinct))
    units = []
    for (order, message, sentence), (words, content) in zip(distinct, tokenized, strict=True):
        rarity = sum(math.log(1 + total / document_frequency[w]) for w in sorted(content))  # one order: S7
        rarity /= 1 + math.log(1 + len(words))
        names = sum(1 for w in words[1:] if w[:1].isupper() and not w.isupper()) + sum(
            1 for w in words if w.isupper() and len(w) > 1
        )
        numbers = len(_NUMBER.findall(sentence))
        score = rarity + 1.5 * min(names, 3) + 1.0 * min(numbers, 4)
        if _DECISION.search(sentence):
            score += 2.0
        if sentence.rstrip().endswith("?"):
            score += 1.5
        if len(words) < 3:
            score -= 1.0
        units.append(
            _Unit(
                order=order,
                role=message.role,
                workspace=message.workspace,
                text=_cut_at_word(sentence, MAX_SENTENCE_CHARS),
                score=score,
                terms=frozenset(content),
                shape=shape_of(sentence),
            )
        )
    return [u for u in units if u.text]


def shape_of(sentence: str) -> str:
    """The sentence with its names and numbers blanked: sentences that differ only in those share a shape."""
    return " ".join(_SHAPE_NUMBER.sub("#", _SHAPE_NAME.sub("N", sentence)).lower().split())


def _render(units: Sequence[_Unit], with_workspace: bool) -> str:
    lines = [SUMMARY_HEADER]
    for unit in sorted(units, key=lambda u: u.order):
        where = f"[{unit.workspace}] " if with_workspace and unit.workspace else ""
        lines.append(f"- {where}{unit.role}: {unit.text}")
    return "\n".join(lines)


def _by_relevance(units: list[_Unit], query: str, count: Callable[[str], int]) -> list[_Unit] | None:
    """Units in the order a query-aware summary takes them (None: the query matches nothing).

    Each sentence is scored with BM25 against the query. A sentence a later one restates with a change
    is left out (the later one wins). Greedy by value: information plus ``RELEVANCE_WEIGHT`` × relevance,
    where the rarest query word a chosen sentence holds counts ``COVERED`` as much afterwards and a
    sentence only counts as relevant while it holds a rare query word not covered yet; sentences that are
    not relevant keep at most ``PER_SHAPE`` of each shape.
    """
    from .recall import query_words  # the same query analysis as the recall strategy
    from .relevance import bm25_term_scores, terms  # loads bm25s: on first use, not on import (N4)

    words = sorted(set(query_words(query)))
    if not words:
        return None
    stems = terms([u.text.replace("_", " ") for u in units])
    by_term = bm25_term_scores(words, stems, length_weight=0.3)
    matched = [{t: v[i] for t, v in by_term.items() if v[i] > 0} for i in range(len(units))]
    totals = [sum(m.values()) for m in matched]
    best = max(totals, default=0.0)
    if best <= 0:
        return None
    frequency = {t: sum(1 for x in v if x > 0) for t, v in by_term.items()}
    rare = {t for t, df in frequency.items() if 0 < df <= max(2, 0.03 * len(units))}
    words_of = [frozenset(w) for w in stems]
    containing: dict[str, list[int]] = {}
    for index, m in enumerate(matched):
        for term in m:
            containing.setdefault(term, []).append(index)
    dropped: set[int] = set()
    for index, m in enumerate(matched):
        if not m:
            continue
        rarest = min(m, key=lambda t: (frequency[t], t))
        mine = words_of[index]
        for other in containing[rarest]:
            theirs = words_of[other]
            if units[other].order <= units[index].order or units[other].text.rstrip().endswith("?"):
                continue
            if set(m) <= theirs and theirs - mine and mine - theirs and _overlap(mine, theirs) >= SAME_STATEMENT:
                dropped.add(index)
                break
    weight = dict.fromkeys(words, 1.0)
    top = max((u.score for u in units), default=1.0) or 1.0

    def relevance(index: int) -> float:
        m = matched[index]
        if not m or (rare and not any(weight[t] == 1.0 for t in m if t in rare)):
            return 0.0
        return sum(weight[t] * v for t, v in m.items()) / best

    def value(index: int) -> float:
        return units[index].score / top + RELEVANCE_WEIGHT * relevance(index)

    heap = [(-value(i), -units[i].order, i) for i in range(len(units)) if i not in dropped]
    heapq.heapify(heap)
    ordered: list[_Unit] = []
    shapes: Tally[str] = Tally()
    while heap:
        _, order, index = heapq.heappop(heap)
        current = value(index)
        if heap and current < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-current, order, index))
            continue
        unit = units[index]
        relevant = relevance(index) >= RELEVANT
        if not relevant:
            if shapes[unit.shape] >= PER_SHAPE:
                continue  # one more line of a kind already shown
            shapes[unit.shape] += 1
        ordered.append(unit)
        rare_here = [t for t in matched[index] if t in rare]
        if relevant and rare_here:
            weight[min(rare_here, key=lambda t: (frequency[t], t))] *= COVERED
    return ordered


def extractive_summary(
    messages: Sequence[Message], count: Callable[[str], int], target_tokens: int, query: str = ""
) -> str | None:
    """The most informative sentences of ``messages`` that fit ``target_tokens``; None if nothing fits.

    With a ``query`` (the current input and the newest turns), sentences relevant to it come first.
    """
    units = _units(messages)
    if not units:
        return None
    with_workspace = len({m.workspace for m in messages if m.workspace}) > 1
    header = count(SUMMARY_HEADER)
    if header >= target_tokens:
        return None
    ranked = (_by_relevance(units, query, count) if query.strip() else None) or sorted(
        units, key=lambda u: (-u.score, -u.order)
    )
    rank = {u.order: position for position, u in enumerate(ranked)}
    chosen: list[_Unit] = []
    used = header
    for unit in ranked:
        if any(_overlap(unit.terms, other.terms) > NEAR_DUPLICATE for other in chosen):
            continue  # says again what a better line already says
        cost = count(_render([unit], with_workspace)) - header
        if used + cost <= target_tokens:
            chosen.append(unit)
            used += cost
    if not chosen:
        best = ranked[0]
        words = best.text.rstrip(ELLIPSIS).split(" ")
        low, high = 0, len(words)
        while low < high:  # the longest word prefix of the best sentence that fits
            mid = (low + high + 1) // 2
            trial = _Unit(best.order, best.role, best.workspace, " ".join(words[:mid]) + ELLIPSIS, best.score)
            if count(_render([trial], with_workspace)) <= target_tokens:
                low = mid
            else:
                high = mid - 1
        if low == 0:
            return None
        chosen = [_Unit(best.order, best.role, best.workspace, " ".join(words[:low]) + ELLIPSIS, best.score)]
    text = _render(chosen, with_workspace)
    while count(text) > target_tokens and len(chosen) > 1:  # line sums can undercount a whole text
        chosen.remove(max(chosen, key=lambda u: rank.get(u.order, 0)))  # the least preferred line
        text = _render(chosen, with_workspace)
    return text if count(text) <= target_tokens else None
