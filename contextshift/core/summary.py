"""A local extractive summary of dropped history (G3): no model call, deterministic.

The history is cut into sentences. Each sentence is scored for what a reader would miss: names (capitalized
words inside a sentence), numbers, decisions and commitments, questions, and words that are rare in the
dropped history (a repeated phrase scores once). The best sentences that fit the target are kept and
printed in chronological order, one line each, ``- role: sentence``. A long sentence is cut at a word
boundary, never inside a word. A line that mostly repeats a better one is left out. Shrinking drops
the least informative lines first.

Linear in the dropped history (S8): what a sentence is worth on its own is worked out once per message
text (and cached, since a chat shifts the same history turn after turn), a word's rarity once per word,
and sentences are compared only through lists of the sentences holding each word, never pair by pair.
"""

from __future__ import annotations

import heapq
import math
import re
from bisect import bisect_right
from collections import Counter as Tally
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import NamedTuple

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
#: How many of the next sentences holding a sentence's rarest query word are looked at for a restatement.
RESTATEMENT_REACH = 64
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


class _Unit(NamedTuple):
    """One distinct sentence of the dropped history, scored (a named tuple: tens of thousands are made per
    call on a long chat, and a tuple is made several times faster than a frozen dataclass)."""

    order: int  # chronological position
    role: str
    workspace: str | None
    text: str
    score: float
    terms: frozenset[str] = frozenset()
    shape: str = ""


class _Sentence(NamedTuple):
    """What a sentence is worth apart from the rest of the history: worked out once per message text."""

    key: str  # its words, lower-cased: two sentences with one key are one sentence
    text: str  # cut at a word boundary ("" when nothing survives the cut)
    content: tuple[str, ...]  # its distinct content words, sorted (rarity sums them in one order: S7)
    terms: frozenset[str]
    length: float  # 1 + log(1 + words): what rarity is divided by
    names: float
    numbers: float
    decision: bool
    question: bool
    short: bool
    shape: str


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


@lru_cache(maxsize=1 << 14)
def _analysed(text: str) -> tuple[_Sentence, ...]:
    """Every sentence of a message's text with what can be known of it alone. Cached by text: a chat shifts
    the same history turn after turn, and on a long chat this analysis was most of a summary's cost."""
    out = []
    for sentence in _sentences(text):
        words = _WORD.findall(sentence)
        content = {w.lower() for w in words if len(w) > 2 and w.lower() not in _STOPWORDS}
        names = sum(1 for w in words[1:] if w[:1].isupper() and not w.isupper()) + sum(
            1 for w in words if w.isupper() and len(w) > 1
        )
        out.append(
            _Sentence(
                key=" ".join(w.lower() for w in words),
                text=_cut_at_word(sentence, MAX_SENTENCE_CHARS),
                content=tuple(sorted(content)),
                terms=frozenset(content),
                length=1 + math.log(1 + len(words)),
                names=1.5 * min(names, 3),
                numbers=1.0 * min(len(_NUMBER.findall(sentence)), 4),
                decision=_DECISION.search(sentence) is not None,
                question=sentence.rstrip().endswith("?"),
                short=len(words) < 3,
                shape=shape_of(sentence),
            )
        )
    return tuple(out)


def _units(messages: Sequence[Message]) -> list[_Unit]:
    """The distinct sentences of ``messages`` (the first of repeated ones), scored, in chronological order.

    Linear in the sentences: each message's sentences are analysed once (:func:`_analysed`), and a word's
    rarity is worked out once per word rather than once per sentence that holds it.
    """
    seen: set[str] = set()
    distinct: list[tuple[int, Message, _Sentence]] = []
    order = 0
    for message in messages:
        for sentence in _analysed(message.text):
            key = sentence.key
            if key and key not in seen:
                seen.add(key)
                distinct.append((order, message, sentence))
            order += 1
    document_frequency: Tally[str] = Tally()
    for _, _, sentence in distinct:
        document_frequency.update(sentence.terms)
    total = max(1, len(distinct))
    weight = {w: math.log(1 + total / df) for w, df in document_frequency.items()}
    worth = weight.__getitem__
    units = []
    for order, message, sentence in distinct:
        if not sentence.text:
            continue
        score = sum(map(worth, sentence.content)) / sentence.length + sentence.names + sentence.numbers
        if sentence.decision:
            score += 2.0
        if sentence.question:
            score += 1.5
        if sentence.short:
            score -= 1.0
        units.append(
            _Unit(order, message.role, message.workspace, sentence.text, score, sentence.terms, sentence.shape)
        )
    return units


def shape_of(sentence: str) -> str:
    """The sentence with its names and numbers blanked: sentences that differ only in those share a shape."""
    return " ".join(_SHAPE_NUMBER.sub("#", _SHAPE_NAME.sub("N", sentence)).lower().split())


def _line(unit: _Unit, with_workspace: bool) -> str:
    where = f"[{unit.workspace}] " if with_workspace and unit.workspace else ""
    return f"- {where}{unit.role}: {unit.text}"


def _render(units: Sequence[_Unit], with_workspace: bool) -> str:
    lines = [SUMMARY_HEADER]
    for unit in sorted(units, key=lambda u: u.order):
        lines.append(_line(unit, with_workspace))
    return "\n".join(lines)


@lru_cache(maxsize=1 << 16)
def _stems(text: str) -> tuple[str, ...]:
    """A sentence's words as BM25 sees them (cached by sentence: the summary of a long chat has more
    sentences than ``relevance`` keeps analyses of)."""
    from .relevance import terms  # loads bm25s: on first use, not on import (N4)

    return tuple(terms([text.replace("_", " ")])[0])


def _restated(
    index: int,
    matched: frozenset[str],
    rarest: Sequence[int],
    words_of: Mapping[int, frozenset[str]],
    questions: set[int],
) -> bool:
    """Whether a later sentence restates sentence ``index`` with a change: it holds every query word the
    sentence matched, adds a word and drops one, and shares at least ``SAME_STATEMENT`` of their words.

    ``rarest`` lists the sentences holding its rarest matched query word, ascending; only the next
    ``RESTATEMENT_REACH`` of them are looked at (comparing each sentence with every later one holding a
    common word was quadratic: 80 s at 10k messages). A fact's restatement names the fact's subject, a rare
    word, so it is among the next few sentences that hold it; a word in hundreds of sentences names no one
    fact. Sizes are compared first: two sets share at most the smaller's size out of at least the larger's,
    so most candidates cost no set operation (with a little slack, so rounding never excludes a pair).
    """
    mine = words_of[index]
    size = len(mine)
    if not size:
        return False
    start = bisect_right(rarest, index)
    low, high = SAME_STATEMENT * size - 1e-9, size / SAME_STATEMENT + 1e-9
    for other in rarest[start : start + RESTATEMENT_REACH]:
        theirs = words_of[other]
        count = len(theirs)
        if not low <= count <= high or other in questions or not matched <= theirs:
            continue
        shared = len(mine & theirs)  # it adds a word, drops one, and shares enough (_overlap's share)
        if count > shared and size > shared and shared / (size + count - shared) >= SAME_STATEMENT:
            return True
    return False


def _by_relevance(units: list[_Unit], query: str, count: Callable[[str], int]) -> list[_Unit] | None:
    """Units in the order a query-aware summary takes them (None: the query matches nothing).

    Each sentence is scored with BM25 against the query. A sentence a later one restates with a change
    is left out (the later one wins). Greedy by value: information plus ``RELEVANCE_WEIGHT`` × relevance,
    where the rarest query word a chosen sentence holds counts ``COVERED`` as much afterwards and a
    sentence only counts as relevant while it holds a rare query word not covered yet; sentences that are
    not relevant keep at most ``PER_SHAPE`` of each shape.

    Only the sentences that hold a query word are compared with each other (through the lists of sentences
    holding each word); the rest cost one heap entry each.
    """
    import numpy as np  # on first use (N4); bm25s, which the relevance module loads, needs it anyway

    from .recall import query_words  # the same query analysis as the recall strategy
    from .relevance import bm25_term_matrix

    words = sorted(set(query_words(query)))
    if not words:
        return None
    stems = [_stems(u.text) for u in units]
    matrix = bm25_term_matrix(words, stems, length_weight=0.3)
    # Each sentence's matched query words and their scores, in the query's word order (their sum is taken
    # in that order), for the sentences that match at all.
    matched: dict[int, dict[str, float]] = {}
    frequency: dict[str, int] = {}
    containing: dict[str, list[int]] = {}
    for term, row in zip(dict.fromkeys(words), matrix, strict=True):
        where = np.flatnonzero(row > 0)
        frequency[term] = len(where)
        for index, score in zip(where.tolist(), row[where].tolist(), strict=True):
            matched.setdefault(index, {})[term] = score
    if not matched:
        return None
    matched = dict(sorted(matched.items()))
    best = max(sum(m.values()) for m in matched.values())
    if best <= 0:
        return None
    rare = {t for t, df in frequency.items() if 0 < df <= max(2, 0.03 * len(units))}
    for index, m in matched.items():
        for term in m:
            containing.setdefault(term, []).append(index)
    words_of = {i: frozenset(stems[i]) for i in matched}
    questions = {i for i in matched if units[i].text.rstrip().endswith("?")}
    dropped: set[int] = set()
    for index, m in matched.items():
        rarest = min(m, key=lambda t: (frequency[t], t))
        if _restated(index, frozenset(m), containing[rarest], words_of, questions):
            dropped.add(index)
    weight = dict.fromkeys(words, 1.0)
    top = max((u.score for u in units), default=1.0) or 1.0
    nothing: dict[str, float] = {}

    def relevance(index: int) -> float:
        m = matched.get(index, nothing)
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
        rare_here = [t for t in matched.get(index, nothing) if t in rare]
        if relevant and rare_here:
            weight[min(rare_here, key=lambda t: (frequency[t], t))] *= COVERED
    return ordered


def _near_duplicate(unit: _Unit, chosen: Sequence[_Unit], holding: Mapping[str, list[int]]) -> bool:
    """Whether ``unit`` shares more than ``NEAR_DUPLICATE`` of its words with a chosen line; only the chosen
    lines that share a word with it are looked at (``holding``: the chosen lines holding each word)."""
    mine = unit.terms
    if not mine:
        return False
    shared: dict[int, int] = {}  # a plain dict: a Counter costs more to make than this loop on a few lines
    get = shared.get
    for word in mine:
        lines = holding.get(word)
        if lines:
            for line in lines:
                shared[line] = get(line, 0) + 1
    size = len(mine)
    return any(n / (size + len(chosen[c].terms) - n) > NEAR_DUPLICATE for c, n in shared.items())


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
    holding: dict[str, list[int]] = {}  # the chosen lines holding each word
    used = header
    lead = SUMMARY_HEADER + "\n"  # a line's cost is what it adds to the header (as _render joins them)
    for unit in ranked:
        # Both tests must pass and neither has side effects: the cheaper one first (once the summary is
        # nearly full, most lines no longer fit, and then their words need not be compared).
        cost = count(lead + _line(unit, with_workspace)) - header
        if used + cost > target_tokens:
            continue
        if _near_duplicate(unit, chosen, holding):
            continue  # says again what a better line already says
        for word in unit.terms:
            holding.setdefault(word, []).append(len(chosen))
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
