"""A local extractive summary of dropped history (G3): no model call, deterministic.

The history is cut into sentences. Each sentence is scored for what a reader would miss: names (capitalized
words inside a sentence), numbers, decisions and commitments, questions, and words that are rare in the
dropped history (a repeated phrase scores once). The best sentences that fit the target are kept and
printed in chronological order, one line each, ``- role: sentence``. A long sentence is cut at a word
boundary, never inside a word. A line that mostly repeats a better one is left out. Shrinking drops
the least informative lines first.

Linear in the dropped history (S8), and incremental: what a sentence is worth on its own is worked out once
per message text (cached), and a history's sentences, scores and BM25 postings are kept between calls
(:class:`_History`) and extended when the history grows, as a chat's next turn drops the same history plus a few
messages. Scores, orders, the shape cap and the filling are numpy work over the history's columns; only the
sentences holding a rare query word (whose value changes as lines are chosen) go through a heap, and sentences
are compared only through the lists of the sentences holding each word, never pair by pair.
"""

from __future__ import annotations

import heapq
import math
import operator
import re
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter as Tally
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

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


def shape_of(sentence: str) -> str:
    """The sentence with its names and numbers blanked: sentences that differ only in those share a shape."""
    return " ".join(_SHAPE_NUMBER.sub("#", _SHAPE_NAME.sub("N", sentence)).lower().split())


@lru_cache(maxsize=1 << 16)
def _stems(text: str) -> tuple[str, ...]:
    """A sentence's words as BM25 sees them (cached by sentence: the summary of a long chat has more
    sentences than ``relevance`` keeps analyses of)."""
    from .relevance import terms  # loads bm25s: on first use, not on import (N4)

    return tuple(terms([text.replace("_", " ")])[0])


class _History:
    """What the summary of one dropped history needs that does not depend on the query, built once and
    extended when the history grows (a chat's next turn drops the same history plus a few messages).

    One row per distinct sentence with text (a *unit*), in chronological order, in flat columns: its
    content words as ids into ``vocabulary`` (sorted, so rarity sums them in one order: S7) and what it is
    worth apart from rarity. Rarity (a word's document frequency over the distinct sentences) changes as the
    history grows, so scores are recomputed from the columns with numpy, never per sentence in Python.
    """

    def __init__(self) -> None:
        self.signature: list[tuple[str, str | None, str]] = []  # (role, workspace, text) of each message
        self.messages: list[Message] = []  # the messages themselves: the same objects need no comparing
        self.seen: set[str] = set()  # the keys of the distinct sentences
        self.sentences = 0  # every sentence, repeated ones too: the next unit's order
        self.vocabulary: dict[str, int] = {}
        self.frequency_ids = array("i")  # the content word ids of every distinct sentence (for rarity)
        self.content_ids = array("i")  # the content word ids of every unit, unit after unit
        self.owners = array("i")  # the unit each of ``content_ids`` belongs to
        self.orders = array("q")
        self.lengths = array("d")
        self.names = array("d")
        self.numbers = array("d")
        self.bonus = array("b")  # bit 1: a decision, bit 2: a question, bit 4: short
        self.roles: list[str] = []
        self.workspaces: list[str | None] = []
        self.texts: list[str] = []
        self.terms: list[frozenset[str]] = []
        self.shapes: dict[str, int] = {}  # each shape's id
        self.shape_ids = array("i")
        self.workspace_names: set[str] = set()
        self._scored: _Scored | None = None
        self._index: _StemIndex | None = None  # built on the first query
        #: For (unit, word): the later units holding the word that restate the unit if they hold its query
        #: words, whether that is final, and how many units held the word then (if not, it holds while as many do).
        self.restatements: dict[tuple[int, str], tuple[tuple[int, ...], bool, int]] = {}
        self._costs: dict[tuple[Callable[[str], int], bool], array[int]] = {}

    def __len__(self) -> int:
        return len(self.texts)

    def absorb(self, messages: Sequence[Message], signature: Sequence[tuple[str, str | None, str]]) -> None:
        """Add ``messages`` (the history's newest, after what it holds) to it."""
        vocabulary, seen = self.vocabulary, self.seen
        for message in messages:
            if message.workspace:
                self.workspace_names.add(message.workspace)
            for sentence in _analysed(message.text):
                key = sentence.key
                self.sentences += 1
                if not key or key in seen:
                    continue
                seen.add(key)
                ids = [vocabulary.setdefault(word, len(vocabulary)) for word in sentence.content]
                self.frequency_ids.extend(ids)
                if sentence.text:
                    self._add_unit(message, sentence, ids)
        self.signature.extend(signature)
        self.messages.extend(messages)
        self._scored = None
        if self._index is not None:
            self._index.extend(self.texts)

    def stem_index(self) -> _StemIndex:
        if self._index is None:
            self._index = _StemIndex()
            self._index.extend(self.texts)
        return self._index

    def costs(self, count: Callable[[str], int], with_workspace: bool) -> Any:
        """What each unit's line costs after the header (``count`` of the header and the line), kept for the
        last two counters: a counter is a pure function of the text."""
        import numpy as np

        key = (count, with_workspace)
        known = self._costs.pop(key, None)
        if known is None:
            known = array("q")
            while len(self._costs) > 1:
                del self._costs[next(iter(self._costs))]
        self._costs[key] = known
        lead = SUMMARY_HEADER + "\n"  # as _render joins them
        known.extend(count(lead + self.line(unit, with_workspace)) for unit in range(len(known), len(self)))
        return _column(known, np.int64) - count(SUMMARY_HEADER)

    def _add_unit(self, message: Message, sentence: _Sentence, ids: list[int]) -> None:
        unit = len(self.texts)
        self.content_ids.extend(ids)
        self.owners.extend([unit] * len(ids))
        self.orders.append(self.sentences - 1)
        self.lengths.append(sentence.length)
        self.names.append(sentence.names)
        self.numbers.append(sentence.numbers)
        self.bonus.append(sentence.decision | sentence.question << 1 | sentence.short << 2)
        self.roles.append(message.role)
        self.workspaces.append(message.workspace)
        self.texts.append(sentence.text)
        self.terms.append(sentence.terms)
        self.shape_ids.append(self.shapes.setdefault(sentence.shape, len(self.shapes)))

    def scored(self) -> _Scored:
        """Each unit's score, worked out from the columns (the rarity of words changes as the history grows)."""
        if self._scored is None:
            import numpy as np  # on first use (N4)

            units = len(self)
            frequency = np.bincount(_column(self.frequency_ids, np.int32), minlength=len(self.vocabulary))
            distinct = max(1, len(self.seen))
            weight = np.array([math.log(1 + distinct / df) if df else 0.0 for df in frequency.tolist()])
            ids = _column(self.content_ids, np.int32)
            # Summed word by word in each unit's (sorted) word order, as ``sum`` would: the same floats.
            rarity = np.bincount(_column(self.owners, np.int32), weights=weight[ids], minlength=units)
            score = rarity / _column(self.lengths, np.float64) + _column(self.names, np.float64)
            score += _column(self.numbers, np.float64)
            bonus = _column(self.bonus, np.int8)
            score += np.where(bonus & 1, 2.0, 0.0)
            score += np.where(bonus & 2, 1.5, 0.0)
            score -= np.where(bonus & 4, 1.0, 0.0)
            orders = _column(self.orders, np.int64)
            top = (float(score.max()) if units else 1.0) or 1.0
            self._scored = _Scored(score, top, orders, np.lexsort((-orders, -score)))
        return self._scored

    def line(self, unit: int, with_workspace: bool, text: str | None = None) -> str:
        workspace = self.workspaces[unit]
        where = f"[{workspace}] " if with_workspace and workspace else ""
        return f"- {where}{self.roles[unit]}: {self.texts[unit] if text is None else text}"


class _Scored(NamedTuple):
    score: Any  # each unit's score (numpy)
    top: float  # the best score (1.0 if none is positive)
    orders: Any  # each unit's chronological position (numpy)
    by_score: Any  # the units best first, the later of two equal ones first (numpy)


def _column(values: array[Any], dtype: Any) -> Any:
    """A numpy copy of an array column (a copy: the column keeps growing)."""
    import numpy as np

    return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype=dtype)


class _StemIndex:
    """The units' words as BM25 sees them, and for each word the units holding it (ascending) and how often.

    Each unit's distinct words are kept as ids in one flat column (a set of them is made when a restatement
    is looked for): a set per unit would hold more memory than the rest of the history together."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self.ids = array("i")  # each unit's distinct word ids, unit after unit
        self.starts = array("q", [0])  # where each unit's ids start in ``ids`` (and where the last ends)
        self.lengths = array("q")
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        self.questions: list[bool] = []
        self._lengths: tuple[int, Any, Any] | None = None  # (units, lengths column, its mean) for ``scores``

    def extend(self, texts: Sequence[str]) -> None:
        postings, vocabulary = self.postings, self.vocabulary
        for unit in range(len(self.lengths), len(texts)):
            text = texts[unit]
            stems = _stems(text)
            self.lengths.append(len(stems))
            self.questions.append(text.rstrip().endswith("?"))
            tally = Tally(stems)
            self.ids.extend([vocabulary.setdefault(stem, len(vocabulary)) for stem in tally])
            self.starts.append(len(self.ids))
            for stem, times in tally.items():
                posting = postings.get(stem)
                if posting is None:
                    posting = postings[stem] = (array("i"), array("i"))
                posting[0].append(unit)
                posting[1].append(times)

    def words(self, unit: int) -> frozenset[int]:
        """The ids of a unit's distinct words."""
        return frozenset(self.ids[self.starts[unit] : self.starts[unit + 1]])

    def scores(self, term: str, length_weight: float) -> tuple[Any, Any]:
        """The units holding ``term`` and its BM25 score in each: :func:`relevance.bm25_term_matrix`'s row
        for it (bm25s' arithmetic, to the bit), from the term's own units instead of every unit's words."""
        import numpy as np

        from .relevance import BM25_K1

        posting = self.postings.get(term)
        if posting is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        units = _column(posting[0], np.int32)
        counts = _column(posting[1], np.int32).astype(np.float32)
        if self._lengths is None or self._lengths[0] != len(self.lengths):  # once per size, not once per word
            column = _column(self.lengths, np.int64)
            self._lengths = (len(column), column, column.mean())
        _, lengths, mean = self._lengths
        documents, df = len(lengths), len(units)
        idf = np.float32(math.log(1 + (documents - df + 0.5) / (df + 0.5)))
        norm = BM25_K1 * ((1 - length_weight) + length_weight * lengths[units] / mean)
        row = (idf * (counts / (norm + counts))).astype(np.float32)
        return units, row


#: The histories summarized last, newest last: a chat's next turn finds its own and extends it.
_HISTORIES: list[_History] = []
_KEPT_HISTORIES = 4
_LOCK = threading.Lock()


def _history(messages: Sequence[Message]) -> _History:
    """The history of ``messages``: one summarized before (the same messages, or their first ones), extended
    by the rest, or a new one. The caller holds ``_LOCK``."""
    found = _known(messages)
    if found is None:
        found = _History()
        found.absorb(messages, [(m.role, m.workspace, m.text) for m in messages])
    _HISTORIES.append(found)
    del _HISTORIES[:-_KEPT_HISTORIES]
    return found


def _known(messages: Sequence[Message]) -> _History | None:
    """The kept history that ``messages`` are or begin with (taken out of the list), extended to them."""
    signature: list[tuple[str, str | None, str]] | None = None
    for position in range(len(_HISTORIES) - 1, -1, -1):
        known = _HISTORIES[position]
        size = len(known.messages)
        if size > len(messages):
            continue
        if not all(map(operator.is_, known.messages, messages[:size])):
            if signature is None:
                signature = [(m.role, m.workspace, m.text) for m in messages]
            if known.signature != signature[:size]:
                continue
            known.messages = list(messages[:size])  # these objects, next time
        del _HISTORIES[position]
        if size < len(messages):
            rest = messages[size:]
            known.absorb(rest, signature[size:] if signature else [(m.role, m.workspace, m.text) for m in rest])
        return known
    return None


def clear_caches() -> None:
    """Forget every analysis kept between calls (the next summary starts cold)."""
    with _LOCK:
        _HISTORIES.clear()
    _analysed.cache_clear()
    _stems.cache_clear()


def _restatements(unit: int, rarest: Sequence[int], index: _StemIndex) -> tuple[tuple[int, ...], bool]:
    """The later sentences that restate sentence ``unit`` with a change if they hold every query word it
    matched: each adds a word, drops one, and shares at least ``SAME_STATEMENT`` of their words, and is not
    a question; and whether the answer is final (all ``RESTATEMENT_REACH`` sentences were looked at, so a
    sentence the history gains later cannot change it).

    ``rarest`` lists the sentences holding its rarest matched query word, ascending; only the next
    ``RESTATEMENT_REACH`` of them are looked at (comparing each sentence with every later one holding a
    common word was quadratic: 80 s at 10k messages). A fact's restatement names the fact's subject, a rare
    word, so it is among the next few sentences that hold it; a word in hundreds of sentences names no one
    fact. Sizes are compared first: two sets share at most the smaller's size out of at least the larger's,
    so most candidates cost no set operation (with a little slack, so rounding never excludes a pair).
    """
    words_of, questions = index.words, index.questions
    mine = words_of(unit)
    size = len(mine)
    if not size:
        return (), True
    start = bisect_right(rarest, unit)
    low, high = SAME_STATEMENT * size - 1e-9, size / SAME_STATEMENT + 1e-9
    window = rarest[start : start + RESTATEMENT_REACH]
    out = []
    for other in window:
        theirs = words_of(other)
        count = len(theirs)
        if not low <= count <= high or questions[other]:
            continue
        shared = len(mine & theirs)  # it adds a word, drops one, and shares enough (a Jaccard share)
        if count > shared and size > shared and shared / (size + count - shared) >= SAME_STATEMENT:
            out.append(other)
    return tuple(out), len(window) == RESTATEMENT_REACH


class _Query(NamedTuple):
    """What a query matches in a history (numpy arrays over the units, and per word)."""

    words: list[str]  # the query's distinct search words, sorted
    postings: dict[str, tuple[Any, Any]]  # each matched word: the units holding it and its BM25 score there
    frequency: dict[str, int]  # how many units hold each word
    total: Any  # each unit's BM25 score: its words' scores summed in the query's word order
    held: Any  # whether a unit holds a query word
    best: float
    rare: list[str]


def _query(history: _History, query: str) -> _Query | None:
    import numpy as np  # on first use (N4); bm25s, which the relevance module loads, needs it anyway

    from .recall import query_words  # the same query analysis as the recall strategy

    words = sorted(set(query_words(query)))
    if not words:
        return None
    index = history.stem_index()
    units = len(history)
    total = np.zeros(units)
    held = np.zeros(units, dtype=bool)
    postings: dict[str, tuple[Any, Any]] = {}
    frequency: dict[str, int] = {}
    for term in words:
        holding, scores = index.scores(term, 0.3)
        frequency[term] = len(holding)
        if len(holding):
            postings[term] = (holding, scores.astype(np.float64))
            total[holding] += postings[term][1]
            held[holding] = True
    if not postings:
        return None
    best = float(total[held].max())
    if best <= 0:
        return None
    rare = [t for t in words if 0 < frequency[t] <= max(2, 0.03 * units)]
    return _Query(words, postings, frequency, total, held, best, rare)


def _dropped(history: _History, found: _Query) -> Any:
    """Whether a later sentence restates each unit with a change (the later one wins)."""
    import numpy as np

    index, memo = history.stem_index(), history.restatements
    if len(memo) > 1 << 20:
        memo.clear()
    by_rarity = sorted(found.postings, key=lambda t: (found.frequency[t], t))
    rarest = np.full(len(history), -1)
    for k, term in enumerate(by_rarity):
        holding = found.postings[term][0]
        rarest[holding[rarest[holding] < 0]] = k
    wanted = frozenset(index.vocabulary[w] for w in found.postings)  # the query words some unit holds
    dropped = np.zeros(len(history), dtype=bool)
    matched = np.flatnonzero(found.held)
    for unit, k in zip(matched.tolist(), rarest[matched].tolist(), strict=True):
        term = by_rarity[k]
        key = (unit, term)
        holding = index.postings[term][0]
        known = memo.get(key)
        if known is not None and (known[1] or known[2] == len(holding)):
            candidates = known[0]
        else:
            candidates, final = _restatements(unit, holding, index)
            memo[key] = (candidates, final, len(holding))
        if candidates:
            mine = index.words(unit) & wanted
            if any(mine <= index.words(other) for other in candidates):
                dropped[unit] = True
    return dropped


def _by_relevance(history: _History, query: str) -> Any:
    """Units in the order a query-aware summary takes them (None: the query matches nothing).

    Each sentence is scored with BM25 against the query. A sentence a later one restates with a change
    is left out (the later one wins). Greedy by value: information plus ``RELEVANCE_WEIGHT`` × relevance,
    where the rarest query word a chosen sentence holds counts ``COVERED`` as much afterwards and a
    sentence only counts as relevant while it holds a rare query word not covered yet; sentences that are
    not relevant keep at most ``PER_SHAPE`` of each shape.

    Only the sentences holding a rare query word change value as lines are chosen: they go through a heap,
    and the rest, whose values are worked out at once with numpy, are merged in by value. Skipping a line
    changes no value, so the shape cap is applied to the merged order afterwards.
    """
    import numpy as np

    found = _query(history, query)
    if found is None:
        return None
    score, top, orders, _ = history.scored()
    dropped = _dropped(history, found)
    rare = set(found.rare)
    dynamic = np.zeros(len(history), dtype=bool)
    for term in found.rare:
        dynamic[found.postings[term][0]] = True
    dynamic &= ~dropped
    static = np.flatnonzero(~dropped & ~dynamic)
    # With rare words, a sentence holding none is not relevant; without, no weight ever changes.
    relevance = np.zeros(len(static)) if rare else found.total[static] / found.best
    value = score[static] / top + RELEVANCE_WEIGHT * relevance
    by_value = _by_value(history, static, value, bool(rare))
    merged, relevant = _merge(
        history,
        found,
        np.flatnonzero(dynamic).tolist(),
        (static[by_value], -value[by_value], -orders[static][by_value], relevance[by_value] >= RELEVANT),
    )
    ranked = _shape_capped(history, merged, relevant)
    return ranked if len(ranked) else None


def _by_value(history: _History, static: Any, value: Any, scored_order: bool) -> Any:
    """The positions in ``static`` (ascending units) best ``value`` first, the later of two equal ones first.

    With ``scored_order`` every value is the unit's score over the best score: the history's own order by
    score is then theirs, read in O(n), unless two scores round to one value out of order (checked; then,
    as without ``scored_order``, they are sorted)."""
    import numpy as np

    orders = history.scored().orders[static]
    if scored_order and len(static) > 1:
        by_score = history.scored().by_score
        keep = np.zeros(len(history), dtype=bool)
        keep[static] = True
        candidate = np.searchsorted(static, by_score[keep[by_score]])
        v, o = value[candidate], orders[candidate]
        if bool(np.all((v[:-1] > v[1:]) | ((v[:-1] == v[1:]) & (o[:-1] > o[1:])))):
            return candidate
    return np.lexsort((-orders, -value))


def _merge(history: _History, found: _Query, dynamic: list[int], static: tuple[Any, Any, Any, Any]) -> tuple[Any, Any]:
    """The greedy order: the ``dynamic`` units through a heap whose values change as lines are chosen, and
    the ``static`` ones (units, negated values and orders ascending, whether relevant) merged in; with
    whether each was relevant when it was taken.

    A unit's value is worked out again when it reaches the top of the heap only if a weight changed since it
    was last worked out (``epoch``): the same arithmetic on the same weights gives the same float. The
    static units are not copied piece by piece: each dynamic unit taken is inserted at the static position
    reached when it was taken, in one ``np.insert`` at the end."""
    import numpy as np

    score, top, orders, _ = history.scored()
    units, values, negated_orders, relevant_static = static
    rare = set(found.rare)
    matched = _matched(history, found, dynamic)
    weight = dict.fromkeys(found.words, 1.0)

    def relevance(unit: int) -> float:
        m = matched[unit]
        if not any(weight[t] == 1.0 for t in m if t in rare):
            return 0.0
        return sum(weight[t] * v for t, v in m.items()) / found.best

    epoch = 0  # how many times a weight changed
    first, first_relevance = _initial_worth(history, found, dynamic)
    known: dict[int, tuple[int, float, float]] = {  # unit: (epoch, value, relevance) when last worked out
        u: (0, v, r) for u, v, r in zip(dynamic, first, first_relevance, strict=True)
    }
    heap = [(-v, -o, u) for u, v, o in zip(dynamic, first, orders[dynamic].tolist(), strict=True)]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    at: list[int] = []  # the static position each dynamic unit taken is inserted at
    taken: list[int] = []
    taken_relevant: list[bool] = []
    position, end = 0, len(units)
    value_list, order_list = values.tolist(), negated_orders.tolist()
    value_list.append(math.inf)  # past the last static unit: a value below any (negated: above)
    while heap:
        negated, order, unit = pop(heap)
        before = bisect_left(value_list, negated, position, end)  # the static units ahead of the heap's best
        tie = bisect_right(value_list, negated, before, end)
        if tie > before:
            before = bisect_left(order_list, order, before, tie)
        if before > position:
            position = before
        when, current, unit_relevance = known[unit]
        if when != epoch:
            unit_relevance = relevance(unit)
            current = float(score[unit]) / top + RELEVANCE_WEIGHT * unit_relevance
            known[unit] = (epoch, current, unit_relevance)
        following = -value_list[position]
        if heap and -heap[0][0] > following:
            following = -heap[0][0]
        if current < following - 1e-12:
            push(heap, (-current, order, unit))
            continue
        relevant = unit_relevance >= RELEVANT
        at.append(position)
        taken.append(unit)
        taken_relevant.append(relevant)
        if relevant:
            rare_here = [t for t in matched[unit] if t in rare]
            if rare_here:
                weight[min(rare_here, key=lambda t: (found.frequency[t], t))] *= COVERED
                epoch += 1
    merged = np.insert(units.astype(np.int64), at, np.array(taken, dtype=np.int64))
    return merged, np.insert(relevant_static.astype(bool), at, np.array(taken_relevant, dtype=bool))


def _matched(history: _History, found: _Query, dynamic: list[int]) -> dict[int, dict[str, float]]:
    """For each ``dynamic`` unit, the query words it holds (in the query's word order) and their scores."""
    import numpy as np

    matched: dict[int, dict[str, float]] = {}
    mask = np.zeros(len(history), dtype=bool)
    mask[dynamic] = True
    for term in found.words:
        if term in found.postings:
            holding, scores = found.postings[term]
            keep = mask[holding]
            for unit, s in zip(holding[keep].tolist(), scores[keep].tolist(), strict=True):
                matched.setdefault(unit, {})[term] = s
    return matched


def _initial_worth(history: _History, found: _Query, dynamic: list[int]) -> tuple[list[float], list[float]]:
    """Each ``dynamic`` unit's value and relevance while every weight is 1, worked out at once: the same
    floats as ``_merge``'s ``relevance`` and ``worth`` (each such unit holds a rare word of weight 1, and
    its scores are added in the query's word order, starting from 0, as ``sum`` adds them)."""
    import numpy as np

    score, top, _, _ = history.scored()
    index = np.full(len(history), -1, dtype=np.int64)
    index[dynamic] = np.arange(len(dynamic))
    total = np.zeros(len(dynamic))
    for term in found.words:
        if term in found.postings:
            holding, scores = found.postings[term]
            slot = index[holding]
            keep = slot >= 0
            total[slot[keep]] += 1.0 * scores[keep]
    relevance = total / found.best
    value = score[dynamic] / top + RELEVANCE_WEIGHT * relevance
    return value.tolist(), relevance.tolist()


def _shape_capped(history: _History, merged: Any, relevant: Any) -> Any:
    """``merged`` without the lines that are not relevant beyond the first ``PER_SHAPE`` of their shape."""
    import numpy as np

    loose = np.flatnonzero(~relevant)
    shapes = _column(history.shape_ids, np.int32)[merged[loose]]
    if len(history.shapes) <= 1 << 16:  # a stable sort of 16-bit keys is a radix sort: O(n), the same order
        shapes = shapes.astype(np.uint16)
    by_shape = np.argsort(shapes, kind="stable")  # by shape, then by position
    grouped = shapes[by_shape]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    nth = np.arange(len(grouped)) - np.repeat(starts, np.diff(np.r_[starts, len(grouped)]))
    keep = np.ones(len(merged), dtype=bool)
    keep[loose[by_shape]] = nth < PER_SHAPE
    return merged[keep]


def _near_duplicate(mine: frozenset[str], chosen: Sequence[frozenset[str]], holding: Mapping[str, list[int]]) -> bool:
    """Whether a line with the words ``mine`` shares more than ``NEAR_DUPLICATE`` of them with a chosen
    line; only the chosen lines that share a word with it are looked at (``holding``: the chosen lines
    holding each word)."""
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
    return any(n / (size + len(chosen[c]) - n) > NEAR_DUPLICATE for c, n in shared.items())


def _render(lines: Sequence[tuple[int, str]]) -> str:
    """The summary: the header, then the lines ``(order, line)`` in chronological order."""
    return "\n".join([SUMMARY_HEADER, *(line for _, line in sorted(lines))])


def extractive_summary(
    messages: Sequence[Message], count: Callable[[str], int], target_tokens: int, query: str = ""
) -> str | None:
    """The most informative sentences of ``messages`` that fit ``target_tokens``; None if nothing fits.

    With a ``query`` (the current input and the newest turns), sentences relevant to it come first.
    """
    with _LOCK:
        history = _history(messages)
        if not len(history):
            return None
        header = count(SUMMARY_HEADER)
        if header >= target_tokens:
            return None
        ranked = _by_relevance(history, query) if query.strip() else None
        if ranked is None:
            ranked = history.scored().by_score
        return _fill(history, ranked, count, target_tokens, header)


#: How many of the lines that fit are looked at before those that fit are found again.
_BATCH = 64


def _fill(history: _History, ranked: Any, count: Callable[[str], int], target: int, header: int) -> str | None:
    """The summary of the ``ranked`` units that fits ``target``: the best that fit and say something new.

    A line is taken if it fits what is left and is no near duplicate of one taken. What is left only
    shrinks, so the lines that fit are found with numpy a batch at a time, never looked at one by one.
    """
    import numpy as np

    with_workspace = len(history.workspace_names) > 1
    costs = history.costs(count, with_workspace)[ranked]
    chosen: list[tuple[int, str]] = []  # (order, line)
    words: list[frozenset[str]] = []
    rank: list[int] = []
    holding: dict[str, list[int]] = {}  # the chosen lines holding each word
    used = header
    terms, orders = history.terms, history.orders
    position, end = 0, len(ranked)
    while position < end:
        fitting = np.flatnonzero(costs[position:] <= target - used)[:_BATCH] + position
        if not len(fitting):
            break
        for at, unit, cost in zip(fitting.tolist(), ranked[fitting].tolist(), costs[fitting].tolist(), strict=True):
            if used + cost > target:
                continue
            mine = terms[unit]
            if _near_duplicate(mine, words, holding):
                continue  # says again what a better line already says
            for word in mine:
                holding.setdefault(word, []).append(len(chosen))
            chosen.append((orders[unit], history.line(unit, with_workspace)))
            words.append(mine)
            rank.append(at)
            used += cost
        position = int(fitting[-1]) + 1
    if not chosen:
        return _best_prefix(history, int(ranked[0]), count, target, with_workspace)
    text = _render(chosen)
    while count(text) > target and len(chosen) > 1:  # line sums can undercount a whole text
        least = max(range(len(chosen)), key=rank.__getitem__)  # the least preferred line
        del chosen[least], rank[least]
        text = _render(chosen)
    return text if count(text) <= target else None


def _best_prefix(
    history: _History, best: int, count: Callable[[str], int], target: int, with_workspace: bool
) -> str | None:
    """The longest word prefix of the best sentence that fits, or None."""
    words = history.texts[best].rstrip(ELLIPSIS).split(" ")
    order = history.orders[best]

    def render(size: int) -> str:
        return _render([(order, history.line(best, with_workspace, " ".join(words[:size]) + ELLIPSIS))])

    low, high = 0, len(words)
    while low < high:
        mid = (low + high + 1) // 2
        if count(render(mid)) <= target:
            low = mid
        else:
            high = mid - 1
    return None if low == 0 else render(low)
