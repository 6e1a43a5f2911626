"""The ``recall`` strategy (G4a): shift like ``truncate``, then bring back what the current input needs.

1. The prompt is shifted exactly as ``truncate`` shifts it (oldest unprotected tool groups leave first).
2. Every unprotected tool group is cut into sentences; BM25 (``bm25s``' formula) scores each sentence
   against the current input (words lower-cased, stop words and question words dropped, stemmed), and a
   group is worth its best sentence, relative to the best group of the prompt. With an embedder, a group is
   also as similar in meaning as its most similar sentence.
3. An excluded statement is *superseded* by a later one (not a question) about the same subject: the later
   one holds every query word the earlier matched, most of its words, and all of its names (words written
   with a capital past the sentence's first word, or in capitals; when it has none, all its words but the
   values). "The gate code for warehouse NORTH is 5521" is superseded by "the gate code for warehouse NORTH
   changed to 8080", never by "the gate code for warehouse SOUTH is 7730". It counts a quarter, and never
   comes back by the fill step or beside another turn. A question counts half, unless it brings its
   answer (step 5): the two together hold what it asked.
4. Coverage: groups are chosen greedily by marginal value: a sentence counts while it holds a rare word of
   the query (a name, a code) not covered yet, so a question about sixteen projects brings back a statement
   about each rather than every mention of the first.
5. Fill: then the other matching groups, most relevant first (with an embedder: every excluded group
   ranked by its words and by its whole text's meaning, the two rankings fused by reciprocal rank), all
   the room the share allows. A look-alike (the query's common words without any of
   its rare ones, when the history holds them) is left out. Each group chosen brings the turns that make
   it readable: a turn that asks (any of its sentences ends with "?", as in "Congrats! How did the kids
   take it? [shares a photo: ...]") its answer, the next turn; a short turn (at most ``SHORT_TURN`` words)
   the turn before it; for a question about time ("when", "how long", "what year" ...), the first ``DATED_HITS``
   groups chosen bring the nearest earlier turn that carries a date ("[8 May 2023, 1:56 pm] ...").
6. The kept groups that match compete in steps 4-5 like the excluded ones (a matching newest turn is held
   in place rather than displaced by a less relevant older one), but for the newest turn, which always
   stays: it is the input's immediate context.
7. The rest of the budget goes to the newest turns: the prompt is shifted again, oldest first, with the
   chosen groups held in place. Recalled messages keep their ids, stand in chronological order and have
   the reason ``recalled``. A group with long tool results may come back as its excerpt (each result cut
   to its pieces that hold a query word, after a marker), as copies with new ids declared as replacements
   of the originals (``summarized``).

The share of the room recall takes follows the evidence. The room is the budget less the protected context
and the newest turn. A group comes back only while everything chosen, itself included, takes at most
``share`` of the room, where ``share`` is:

* ``FOLLOW_UP_SHARE`` (0.25) when the input is a follow-up to the last turns: at most ``FOLLOW_UP_WORDS``
  words, opening with "yes", "no", "ok", "and", "then" ... or pointing back ("it", "that", "the second
  one"). "And the second one?" with 200 tokens of room: recall may take 50, the newest turns keep 150,
  whatever recall finds;
* else ``MAX_RECALL_SHARE`` (0.9) × min(1, best excluded score ÷ best score among the kept turns): when the
  history holds stronger matches than the newest turns, as a question about the past does, recalled history
  may take 90% of the room (180 of 200 tokens; the newest turns keep 20 beside the newest turn itself);
  when the newest turns match four times better (2.0 against 8.0), 0.9 ÷ 4 = 22.5% (45 tokens).

Within it, the groups come back most relevant first, each while the share allows: with 180 tokens of
share, a group at 0.3 of the best comes back when the better ones left room for it. Weak matches are not
given a smaller share (the newest turns that match compete for it like the excluded ones, so a weak match
never displaces a stronger newest turn); only a discounted group (a superseded statement, a question without
its answer) may use no more than its worth ÷ ``STRONG`` (0.5) of it: a superseded statement worth 0.25 only
half (90 of 180 tokens), so it comes back only while the room is to spare. Nothing below ``MIN_RELEVANCE``
(0.2) comes back. When no excluded group shares a word with the input, the result is exactly
``truncate``'s.

In the service, a chat with at most 1,000 messages before the recent window hands them all to the strategy
(the prompt is the library's); past that the database's full-text index picks the candidate messages older
than the recent window, with the turns beside them, and they are passed in as the oldest part of the
history.
"""

from __future__ import annotations

import heapq
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from functools import cache, lru_cache
from typing import NamedTuple

from .embedding import Embedder, similarities
from .groups import build_groups
from .messages import Message, link_ids
from .relevance import bm25_from_counts, terms
from .request import StrategyRequest
from .shifting import Prompt, Removal, ShiftResult, Truncation, build_result, excluded_note, shift_prompt
from .vocabulary import RECALLED, SUMMARIZED

#: Groups less relevant than this (relative to the best group of the prompt) never come back.
MIN_RELEVANCE = 0.2
#: The largest share of the room beside the protected context that recalled history may take: the newest
#: turns always keep the rest.
MAX_RECALL_SHARE = 0.9
#: The share recall may take when the input is a follow-up to the last turns: they keep three quarters.
FOLLOW_UP_SHARE = 0.25
#: An input of at most this many words can be a follow-up.
FOLLOW_UP_WORDS = 8
#: First words of a follow-up: an answer or a continuation of the last turns.
_OPENERS = frozenset(
    ["yes", "yeah", "yep", "no", "nope", "ok", "okay", "sure", "and", "also", "then", "so", "thanks", "great", "fine"]
)
#: Words that point back at the last turns.
_POINTERS = frozenset(["it", "that", "this", "those", "these", "them", "one", "ones", "same"])
#: A discounted group (a superseded statement, a question without its answer) may take only its worth ÷
#: ``STRONG`` of the share: one worth a quarter of the best, half of it.
STRONG = 0.5
#: A turn of at most this many words is a short answer: it comes back with the turn before it.
SHORT_TURN = 6
#: For a question about time, this many of the groups chosen first bring the nearest earlier dated turn,
#: looked for at most this many groups back.
DATED_HITS = 3
DATE_LOOKBACK = 200
#: With an embedder: an excluded group at least this similar in meaning (cosine) to the input is ranked by
#: meaning in the fill step, fused with the ranking by words.
FUSED_FLOOR = 0.1
#: Reciprocal rank fusion's constant (the usual 60): how little the first ranks stand out.
RRF_K = 60
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: A date: "8 May 2023", "May 8, 2023", "2023-05-08".
DATE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)? {_MONTH}\.?,? \d{{4}}|{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}"
    r"|\d{4}-\d{2}-\d{2})\b",
    re.IGNORECASE,
)
#: A question about time.
TEMPORAL = re.compile(
    r"\b(?:when|what (?:year|month|day|date|time)|which (?:year|month|day|date)|how long|how many "
    r"(?:days|weeks|months|years))\b",
    re.IGNORECASE,
)
#: What a superseded statement's relevance is multiplied by.
SUPERSEDED_FACTOR = 0.25
#: A later group restates an earlier one when they share at least this share of their words.
SAME_STATEMENT = 0.4
_RAW_WORD = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
#: BM25's ``b`` for sentences: a long sentence (a tool result's record) is scaled down only a little.
LENGTH_WEIGHT = 0.3
#: What a query word a chosen group contains is worth to the groups chosen after it.
COVERED = 0.2
#: A query word is rare when at most this many sentences, or this share of them, hold it.
RARE_SENTENCES = 2
RARE_SHARE = 0.03
#: What a question's relevance is multiplied by (it asks for the information rather than holding it).
QUESTION_FACTOR = 0.5
#: At most this many excluded groups are considered, most relevant first.
MAX_CANDIDATES = 256
#: A tool result is cut to its excerpt only when the excerpt is at most this share of it.
EXCERPT_SHARE = 0.5
#: The pieces a tool result is cut into for its excerpt: sentences, lines and JSON fields.
_PIECE = re.compile(r"(?<=[.!?;])\s+|\n+|,\s*(?=\")")
#: With an embedder: a group whose text is less similar in meaning than this (cosine) to the input never
#: comes back by meaning. all-MiniLM-L6-v2 gives a paraphrase of the input about 0.35-0.75 and chatter
#: about 0.1-0.3 (``benchmarks/fidelity_data.py``'s ``paraphrase`` family).
SEMANTIC_FLOOR = 0.3
#: With an embedder: at most this many excluded groups, the most similar in meaning, may come back by
#: meaning alone (BM25 brings back the groups that share the input's words, however many).
SEMANTIC_TOP = 3
#: What a group's similarity relative to the most similar one is worth beside BM25's relevance (in 0..1).
SEMANTIC_WEIGHT = 0.8
#: The diagnostic that names the kept groups recall held in place (see :func:`held_note`); the ids follow
#: ": ", separated by ", ".
HELD_NOTE = "recall held"
#: What an excerpted tool result starts with.
EXCERPT_MARK = "[excerpt: cut by recall to the parts the current input asks about, {kept} of {total} characters]"


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


def search_words(text: str, limit: int = 32) -> list[str]:
    """The words of ``text`` a full-text index should look for: lower-cased, not stemmed (the index stems
    them its own way), without stop words and question words; at most ``limit``."""
    out: list[str] = []
    noise = _question_stems()
    for word in _RAW_WORD.findall(text.lower()):
        if word in out:
            continue
        stems = terms([word])[0]
        if stems and stems[0] not in noise:
            out.append(word)
            if len(out) >= limit:
                break
    return out


def _calls_and_results(message: Message) -> tuple[set[str], set[str], bool]:
    """The tool-call ids a message makes, the ones it answers, and whether it is a tool result with no id."""
    calls = {call.id for call in message.tool_calls}
    results: set[str] = set()
    if message.role == "tool":
        results.update(link_ids(message))
    if isinstance(message.content, tuple):
        for part in message.content:
            kind, ident = (
                part.get("type"),
                part.get("id") if part.get("type") == "tool_use" else part.get("tool_use_id"),
            )
            if isinstance(ident, str) and ident:
                (calls if kind == "tool_use" else results).add(ident)
    return calls, results, message.role == "tool" and not results


def whole_groups(messages: Sequence[Message], wanted: frozenset[str] | set[str]) -> list[Message]:
    """The messages of every complete tool group that holds one of the ``wanted`` ids, in order.

    A group is complete when each call in it has its result and each result its call (an id-less tool
    result needs its assistant message): a candidate set read from storage may have cut a group short.
    """
    keep: list[int] = []
    for group in build_groups(messages):
        members = [messages[p] for p in group.members]
        if not any(m.id in wanted for m in members):
            continue
        calls: set[str] = set()
        results: set[str] = set()
        idless = False
        for member in members:
            made, answered, bare = _calls_and_results(member)
            calls |= made
            results |= answered
            idless |= bare
        if calls != results or (idless and not any(m.role == "assistant" for m in members)):
            continue
        keep.extend(group.members)
    return [messages[p] for p in sorted(keep)]


@lru_cache(maxsize=1 << 14)
def _names(sentence: str) -> frozenset[str]:
    """The names a sentence holds, as BM25 sees them: words capitalised past its first word, all-capital
    words ("Falcon", "NORTH"); a value ("48213", "A7F3") is not a name."""
    words = _RAW_WORD.findall(sentence)
    found = [
        w for at, w in enumerate(words) if w.isalpha() and ((at > 0 and w[0].isupper()) or (len(w) > 1 and w.isupper()))
    ]
    return frozenset(t for found_terms in terms(found) for t in found_terms) if found else frozenset()


@lru_cache(maxsize=1 << 14)
def _numbers(sentence: str) -> frozenset[str]:
    """The words of a sentence that hold a digit (values: codes, amounts, dates), as BM25 sees them."""
    found = [w for w in _RAW_WORD.findall(sentence) if any(c.isdigit() for c in w)]
    return frozenset(t for found_terms in terms(found) for t in found_terms) if found else frozenset()


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    union = len(a) + len(b) - shared
    return shared / union if union else 0.0


@lru_cache(maxsize=1 << 14)
def _sentences(document: str) -> tuple[str, ...]:
    """A group's text cut into sentences (``_`` read as a space), blank ones left out; the last 16k groups'
    are kept, since a turn splits the same history as the turn before."""
    return tuple(s for s in _SENTENCE.split(document.replace("_", " ")) if s.strip())


class _Document(NamedTuple):
    """A group's text analysed once (the last 16k are kept: a turn scores the same history as the last)."""

    sentences: tuple[str, ...]
    #: Each sentence's words as BM25 sees them, how many, and per word the sentences (and counts) it is in.
    words: tuple[frozenset[str], ...]
    lengths: tuple[int, ...]
    postings: dict[str, tuple[tuple[int, int], ...]]


@lru_cache(maxsize=1 << 14)
def _document(document: str) -> _Document:
    sentences = _sentences(document)
    analysed = terms(list(sentences))
    postings: dict[str, dict[int, int]] = {}
    for at, words in enumerate(analysed):
        for word in words:
            seen = postings.setdefault(word, {})
            seen[at] = seen.get(at, 0) + 1
    return _Document(
        sentences,
        tuple(frozenset(words) for words in analysed),
        tuple(len(words) for words in analysed),
        {word: tuple(seen.items()) for word, seen in postings.items()},
    )


class _Scores:
    """BM25 scores of every unprotected group of a prompt, term by term of the query."""

    def __init__(self, prompt: Prompt, query: str) -> None:
        self.query = frozenset(query_words(query))
        groups, messages = prompt.groups, prompt.messages
        self.numbers = [n for n, g in enumerate(groups) if not g.protected]
        documents = ["\n".join(messages[p].text for p in groups[n].members) for n in self.numbers]
        # Sentences are scored, not whole groups: a fact is a sentence that holds the query's words together.
        # Each group's text is analysed once (``_document``): a shift looks up the query's words in it, it
        # does not read every sentence.
        words = sorted(self.query)
        row = {t: k for k, t in enumerate(words)}
        lengths: list[int] = []
        cells: list[tuple[int, int, int]] = []  # (query word, sentence, count)
        #: The groups that hold a word of the query: their analysis and their first sentence's index.
        found: dict[int, tuple[_Document, int]] = {}
        for n, document in zip(self.numbers, documents, strict=True):
            known = _document(document)
            offset = len(lengths)
            lengths.extend(known.lengths)
            postings = known.postings
            hits = [(row[t], at, c) for t in words if t in postings for at, c in postings[t]]
            if not hits:
                continue
            found[n] = (known, offset)
            cells.extend((k, offset + at, c) for k, at, c in hits)
        import numpy as np  # lazily: ``import contextshift`` stays light

        counts = np.zeros((len(words), len(lengths)), dtype=np.float32)
        for k, at, c in cells:
            counts[k, at] += c
        matrix = bm25_from_counts(counts, np.array(lengths, dtype=np.int64), length_weight=LENGTH_WEIGHT)
        owner_of = {offset + at: n for n, (known, offset) in found.items() for at in range(len(known.lengths))}
        # The query's rare words (few sentences hold them: names, codes) say what it is about; a
        # sentence is worth recalling while it holds one that no chosen sentence held.
        limit = max(RARE_SENTENCES, RARE_SHARE * len(lengths))
        positive = matrix > 0
        self.sentence_frequency = {t: int(df) for t, df in zip(words, positive.sum(axis=1), strict=True)}
        self.rare = frozenset(t for t, df in self.sentence_frequency.items() if 0 < df <= limit)
        #: Per group, each of its sentences' scores by query word, and its words (only sentences that match;
        #: a group with none has an empty list, made when first asked for).
        self.term_scores: defaultdict[int, list[dict[str, float]]] = defaultdict(list)
        self.sentence_words: defaultdict[int, list[frozenset[str]]] = defaultdict(list)
        self.sentence_text: defaultdict[int, list[str]] = defaultdict(list)
        # Only the (sentence, query word) pairs that score, sentence by sentence, words in query order.
        sentence_of, word_of = np.nonzero(positive.T)
        values = matrix.T[sentence_of, word_of].tolist()
        matched: dict[str, float] = {}
        for at, (index, k) in enumerate(zip(sentence_of.tolist(), word_of.tolist(), strict=True)):
            matched[words[k]] = values[at]
            if at + 1 == len(values) or sentence_of[at + 1] != index:  # the sentence's last scoring word
                owner = owner_of[index]
                known, offset = found[owner]
                self.term_scores[owner].append(matched)
                self.sentence_words[owner].append(known.words[index - offset])
                self.sentence_text[owner].append(known.sentences[index - offset])
                matched = {}
        matching = sorted(self.term_scores)
        #: Per group, each matching sentence's score (the sum over its query words).
        self.sums = {n: [sum(m.values()) for m in self.term_scores[n]] for n in matching}
        totals = {n: max(self.sums[n]) for n in matching}
        best = max(totals.values(), default=0.0)
        #: A group's score relative to the best group of the prompt, in 0..1 (0 when it matches nothing).
        self.relevance: defaultdict[int, float] = defaultdict(float)
        self.relevance.update({n: (totals[n] / best if best > 0 else 0.0) for n in matching})
        self.best = best
        self.questions = {n for n, text in zip(self.numbers, documents, strict=True) if text.rstrip().endswith("?")}
        self._superseded: dict[int, bool] = {}
        self.frequency: dict[str, int] = {}
        self.containing: dict[str, list[int]] = {}
        for n in matching:  # the query's words each group holds (in some sentence)
            for word in sorted({t for matched in self.term_scores[n] for t in matched}):
                self.frequency[word] = self.frequency.get(word, 0) + 1
                self.containing.setdefault(word, []).append(n)

    def superseded(self, number: int, first: list[int]) -> bool:
        """Whether a later sentence (not a question) states the group's best sentence again, changed (``first``
        is the same for every call on one prompt: the answer is kept)."""
        known = self._superseded.get(number)
        if known is None:
            known = self._superseded[number] = self._supersedes(number, first)
        return known

    def _supersedes(self, number: int, first: list[int]) -> bool:
        if not self.term_scores[number]:
            return False
        sums = self.sums[number]
        best = sums.index(max(sums))  # the first best sentence
        matched = frozenset(self.term_scores[number][best])
        mine = self.sentence_words[number][best]
        subject = _names(self.sentence_text[number][best]) or (mine - _numbers(self.sentence_text[number][best]))
        rarest = min(matched, key=lambda w: (self.frequency.get(w, 0), w))
        for other in self.containing.get(rarest, ()):
            if first[other] <= first[number] or other in self.questions:
                continue
            for theirs in self.sentence_words[other]:
                if not matched <= theirs or theirs <= mine or mine <= theirs:
                    continue  # not about the same, or nothing stated differently
                if not subject <= theirs:
                    continue  # about another subject: a look-alike ("warehouse SOUTH" after "warehouse NORTH")
                if _jaccard(mine, theirs) >= SAME_STATEMENT:
                    return True
        return False


def _excerpt(prompt: Prompt, number: int, query: frozenset[str]) -> list[Message] | None:
    """A group with its tool results cut to the pieces that hold a word of the query, or None.

    Every member gets a copy with a new id (``<id>~excerpt``): the call unchanged, each long tool result
    cut to its sentences, lines and JSON fields that match the query, joined by " … " after a marker that
    says it was cut. Tool-call ids stay, so the call and its results stay together. None when no result
    gets at most ``EXCERPT_SHARE`` of its size.
    """
    members = [prompt.messages[p] for p in prompt.groups[number].members]
    out: list[Message] = []
    cut = False
    for message in members:
        new_id = message.id + "~excerpt"
        while new_id in prompt.position:
            new_id += "~"
        content = message.content
        if message.role == "tool" and isinstance(content, str) and content:
            pieces = [piece for piece in _PIECE.split(content) if piece.strip()]
            analysed = terms([piece.replace("_", " ") for piece in pieces])
            kept = [piece for piece, words in zip(pieces, analysed, strict=True) if query.intersection(words)]
            size = sum(len(piece) for piece in kept)
            if kept and size <= EXCERPT_SHARE * len(content):
                mark = EXCERPT_MARK.format(kept=size, total=len(content))
                out.append(replace(message, id=new_id, content=mark + " " + " … ".join(kept)))
                cut = True
                continue
        out.append(replace(message, id=new_id))
    return out if cut else None


def recall(request: StrategyRequest) -> ShiftResult:
    """Shift like ``truncate``, then bring back the excluded tool groups the current input needs (G4a)."""
    prompt = Prompt(request.messages, request.count_tokens, request.per_message_overhead)
    budget = request.budget
    outcome = shift_prompt(prompt, budget)
    truncated = build_result(
        prompt, outcome, budget, strategy="recall", diagnostics=excluded_note(len(outcome.removed))
    )
    if not outcome.removed:
        return truncated
    query = current_input(prompt.messages)
    embedder = request.embedder
    if not query_words(query) and (embedder is None or not query.strip()):
        return truncated
    chosen, excerpts = _choose(prompt, outcome, query, budget, embedder)
    if not chosen:
        return truncated
    while chosen:
        held = set(chosen)
        cut = {n: excerpts[n] for n in chosen if n in excerpts}
        shown = prompt
        if cut:  # the excerpted groups stand in their place, member for member (the same groups)
            messages = list(prompt.messages)
            for n, copies in cut.items():
                for position, copy in zip(prompt.groups[n].members, copies, strict=True):
                    messages[position] = copy
            shown = Prompt(messages, request.count_tokens, request.per_message_overhead)
        order = [n for n in range(len(shown.groups)) if n not in held]
        second = shift_prompt(shown, budget, order=order)
        if second.tokens <= budget:
            break
        chosen.pop()  # the least relevant one (a counter whose whole-prompt count is not the sum)
    else:
        return truncated
    removed = set(outcome.removed)  # a kept group chosen is held in place, not recalled
    recalled = [
        p
        for n in sorted(chosen, key=lambda n: prompt.groups[n].first)
        for p in prompt.groups[n].members
        if prompt.groups[n].first in removed
    ]
    replaced = {p: shown.messages[p] for n in cut for p in prompt.groups[n].members}
    result = build_result(shown, second, budget, strategy="recall", diagnostics=excluded_note(len(second.removed)))
    reasons = result.reasons  # the new result's own dict, completed before the result is handed out
    for position, copy in replaced.items():  # declared as replacements of the originals, which they stand for
        del reasons[copy.id]
        reasons[prompt.messages[position].id] = SUMMARIZED
    for position in recalled:
        if position not in replaced:
            reasons[prompt.messages[position].id] = RECALLED
    stand_ins = [
        Truncation(copy, [prompt.messages[p].id], prompt.cost(p), shown.cost(p)) for p, copy in replaced.items()
    ]
    tokens = sum(map(shown.cost, recalled))
    diagnostics = [
        *result.diagnostics,
        f"recall brought back {len(recalled)} message(s) ({tokens} tokens) relevant to the current input"
        + (f" (BM25 and {embedder.name} embeddings)" if embedder is not None else ""),
    ]
    diagnostics.extend(held_note(prompt, [n for n in chosen if prompt.groups[n].first not in removed]))
    if cut:
        diagnostics.append(
            f"recall cut the tool results of {len(cut)} tool group(s) ({len(replaced)} message(s)) to their excerpt "
            "relevant to the current input; the copies stand in for the originals"
        )
    return replace(result, truncated=[*result.truncated, *stand_ins], diagnostics=diagnostics)


def held_note(prompt: Prompt, held: Sequence[int]) -> list[str]:
    """The diagnostic naming the groups recall chose that the first shift had kept (none if none). They are
    held in place, not recalled: their reason stays ``fit``, yet the second shift may leave out newer groups
    before them to make room for what recall brought back."""
    if not held:
        return []
    ids = [prompt.messages[p].id for n in sorted(held) for p in prompt.groups[n].members]
    return [f"{HELD_NOTE} {len(held)} group(s) kept in place as relevant to the current input: {', '.join(ids)}"]


def _similarities(
    prompt: Prompt, numbers: Sequence[int], query: str, embedder: Embedder
) -> tuple[dict[int, float], dict[int, float]]:
    """Each group's similarity in meaning to ``query``: that of its most similar sentence (as BM25 scores
    sentences, so a fact is not diluted by the chatter around it), and that of its whole text (on LoCoMo
    the whole turn ranks evidence better: a turn's sentences lean on each other)."""
    owners: list[int] = []
    sentences: list[str] = []
    wholes: list[str] = []
    for n in numbers:
        text = "\n".join(prompt.messages[p].text for p in prompt.groups[n].members)
        wholes.append(text)
        for sentence in _SENTENCE.split(text):
            if sentence.strip():
                owners.append(n)
                sentences.append(sentence.strip())
    scored = similarities(embedder, query, [*sentences, *wholes])
    best: dict[int, float] = {}
    for owner, similarity in zip(owners, scored, strict=False):
        best[owner] = max(best.get(owner, similarity), similarity)
    whole = dict(zip(numbers, scored[len(sentences) :], strict=True))
    return best, whole


def _semantic(similar: dict[int, float]) -> dict[int, float]:
    """The ``SEMANTIC_TOP`` groups most similar in meaning (at least ``SEMANTIC_FLOOR``), each with its
    similarity relative to the most similar one."""
    scored = sorted(((s, n) for n, s in similar.items() if s >= SEMANTIC_FLOOR), key=lambda item: (-item[0], -item[1]))[
        :SEMANTIC_TOP
    ]
    return {n: s / scored[0][0] for s, n in scored}


def _fused(by_words: dict[int, float], by_meaning: dict[int, float]) -> dict[int, float]:
    """Reciprocal rank fusion of the two rankings (a group's ``1/(RRF_K + rank)`` summed over the rankings
    it is in), relative to the best group."""
    fused: dict[int, float] = {}
    for ranking in (by_words, by_meaning):
        ranked = sorted(ranking, key=lambda n: (-ranking[n], -n))
        for rank, n in enumerate(ranked, start=1):
            fused[n] = fused.get(n, 0.0) + 1.0 / (RRF_K + rank)
    best = max(fused.values(), default=0.0)
    return {n: v / best for n, v in fused.items()} if best > 0 else {}


def follow_up(text: str) -> bool:
    """Whether an input reads as a follow-up to the last turns: at most ``FOLLOW_UP_WORDS`` words, opening
    with an answer or a continuation ("yes, do that", "and the second one?") or pointing back with a
    pronoun ("what does it return?")."""
    words = _RAW_WORD.findall(text.lower())
    if not words or len(words) > FOLLOW_UP_WORDS:
        return False
    return words[0] in _OPENERS or any(w in _POINTERS for w in words)


def recall_share(query: str, best_excluded: float, best_recent: float) -> float:
    """The share of the room beside the protected context that recalled history may take (see the module
    docstring): ``FOLLOW_UP_SHARE`` for a follow-up; else ``MAX_RECALL_SHARE`` scaled down by how much
    better the newest turns match the input than the best excluded group."""
    if follow_up(query):
        return FOLLOW_UP_SHARE
    if best_recent <= best_excluded or best_recent <= 0:
        return MAX_RECALL_SHARE
    return MAX_RECALL_SHARE * best_excluded / best_recent


def _holds_rare(scores: _Scores, number: int) -> bool:
    """Whether a group holds one of the query's rare words, or the query has none."""
    return not scores.rare or any(t in scores.rare for matched in scores.term_scores[number] for t in matched)


#: A question mark that ends a sentence: "... how was it? [shares a photo: ...]" asks something.
_ASKS = re.compile(r"\?+(?=[\s\"')\]]|$)")


def _asks(text: str) -> bool:
    """Whether a turn asks something: one of its sentences ends with a question mark (not only its last:
    "Congrats! How did the kids take it? [shares a photo: ...]" asks)."""
    return _ASKS.search(text) is not None


@lru_cache(maxsize=1 << 14)
def _dated(text: str) -> bool:
    return DATE.search(text) is not None


def _choose(
    prompt: Prompt, outcome: Removal, query: str, budget: int, embedder: Embedder | None = None
) -> tuple[list[int], dict[int, list[Message]]]:
    """The excluded groups to bring back, in the order they were chosen (most useful first), and the ones
    that come back excerpted (their tool results cut to what the query matches), with their copies.

    First, coverage (:meth:`_Choice.cover`): sentences are scored, and a group is worth its best sentence.
    Greedy by marginal value: the rarest word of the query a chosen sentence holds (what it is about: a
    name, a code) counts ``COVERED`` as much afterwards, and a sentence is only worth choosing while it
    holds a rare word of the query (few sentences hold it) not covered yet, or covered only without a query
    word this sentence holds (a look-alike "parking code for Falcon" does not cover Falcon's vault code). So
    a question about sixteen projects brings back one statement about each rather than every mention of the
    first. A superseded statement and a question without its answer count less.

    Then, fill (:meth:`_Choice.fill`): the other matching groups, most relevant first (by words and meaning
    fused, with an embedder), while the share allows. Each group chosen brings its neighbour when it asks
    (the next turn: its answer) or is a short turn (the one before: what it answers); for a question about
    time, the first ``DATED_HITS`` groups chosen bring the nearest earlier turn that carries a date.

    A group comes back only while everything recalled, itself included, takes at most the share (see
    :func:`recall_share`) of the room (a discounted group: × its worth over ``STRONG``, at most 1). A
    group with long tool results is chosen at its excerpt's cost; once all are chosen, excerpted groups
    come back whole instead, most useful first, while the share allows.

    With an embedder, the ``SEMANTIC_TOP`` excluded groups most similar in meaning to the input (above
    ``SEMANTIC_FLOOR``) are candidates in the coverage step too, worth ``SEMANTIC_WEIGHT`` × their
    similarity relative to the most similar one where that is more than BM25 makes them worth.
    """
    choice = _Choice(prompt, outcome, query, embedder)
    if choice.scores.best <= 0 and not choice.meaning:
        return [], {}
    choice.share_room(budget)
    choice.cover()
    choice.fill()
    choice.unexcerpt()
    return choice.chosen, {n: choice.excerpts[n] for n in choice.chosen if n in choice.excerpts}


class _Choice:
    """One shift's choice of the excluded groups to bring back (see :func:`_choose`): the candidates and
    their worth, the share of the room recall may take, and what is chosen so far."""

    def __init__(self, prompt: Prompt, outcome: Removal, query: str, embedder: Embedder | None) -> None:
        self.prompt, self.query, self.groups = prompt, query, prompt.groups
        self.costs = prompt.group_costs  # a property that adds up every group: read once
        self.scores = scores = _Scores(prompt, query)
        self.gone = set(outcome.removed)
        self.firsts = firsts = [g.first for g in prompt.groups]
        # The newest turn is the input's immediate context: it always stays (recall shares out the rest).
        kept = [n for n in scores.numbers if firsts[n] not in self.gone]
        self.newest = kept[-1] if kept else None
        # The other kept groups that match compete with the excluded ones for the share: a matching newest
        # turn is not displaced by a less relevant older one.
        candidates = [n for n in scores.numbers if n != self.newest]
        #: With an embedder: a group's worth by meaning (the most similar few), and its whole text's similarity.
        self.meaning: dict[int, float] = {}
        self.similar_whole: dict[int, float] = {}
        self.embedded = embedder is not None
        if embedder is not None:
            gone = [n for n in candidates if firsts[n] in self.gone]
            similar, self.similar_whole = _similarities(prompt, gone, query, embedder)
            self.meaning = {n: SEMANTIC_WEIGHT * s for n, s in _semantic(similar).items()}
        excluded = [n for n in candidates if scores.term_scores[n] or n in self.meaning]
        self.relevance = {n: max(scores.relevance[n], self.meaning.get(n, 0.0)) for n in excluded}
        excluded.sort(key=lambda n: (-self.relevance[n], -firsts[n]))
        self.excluded = excluded[:MAX_CANDIDATES]
        self.factors: dict[int, float] = {}
        #: What each query word is worth to the groups chosen next (``COVERED`` once a chosen one held it).
        self.weight: dict[str, float] = dict.fromkeys(scores.query, 1.0)
        #: Per rare word of the query covered so far, the query words the sentences that covered it held.
        self.seen_with: dict[str, set[str]] = {}
        self.chosen: list[int] = []
        self.taken: set[int] = set()
        self.used = 0
        self.excerpts: dict[int, list[Message]] = {}
        self.whole: dict[int, int] = {}  # what coming back whole adds to an excerpted group
        self.temporal = TEMPORAL.search(query) is not None
        self.dated = 0  # the groups chosen so far that looked for their dated turn
        self.room = 0
        self.share = MAX_RECALL_SHARE

    def share_room(self, budget: int) -> None:
        """The room beside the protected context and the newest turn, and the share of it recall may take
        (:func:`recall_share`: by how the best excluded group matches against the best kept one)."""
        scores, costs, gone = self.scores, self.costs, self.gone
        protected = sum(costs[n] for n, g in enumerate(self.groups) if g.protected)
        newest = costs[self.newest] if self.newest is not None else 0
        self.room = budget - self.prompt.fixed - protected - newest
        recent = [scores.relevance[n] * scores.best for n in scores.numbers if self.firsts[n] not in gone]
        excluded = [self.relevance[n] for n in self.excluded if self.firsts[n] in gone]
        best_excluded = max(excluded, default=0.0) * scores.best
        if scores.best > 0:
            self.share = recall_share(self.query, best_excluded, max(recent, default=0.0))

    def plain(self, n: int) -> bool:
        """Whether group ``n`` is an excluded single message that is not a tool call or result, nor a
        superseded statement (it may come beside a recalled one)."""
        groups = self.groups
        if n < 0 or n >= len(groups) or groups[n].protected or self.firsts[n] not in self.gone:
            return False
        if len(groups[n].members) > 1:
            return False
        message = self.prompt.messages[groups[n].first]
        return message.role in ("user", "assistant") and not message.tool_calls and not self.superseded(n)

    def superseded(self, n: int) -> bool:
        """Whether a later statement about the same subject replaced group ``n``'s."""
        return self.scores.superseded(n, self.firsts)

    def factor(self, n: int) -> float:
        """What a group's worth is multiplied by: less for a superseded statement, and for a question that
        cannot bring its answer (the next turn) with it."""
        known = self.factors.get(n)
        if known is None:
            question = n in self.scores.questions and not (self.plain(n) and self.plain(n + 1))
            known = self.factors[n] = (SUPERSEDED_FACTOR if self.superseded(n) else 1.0) * (
                QUESTION_FACTOR if question else 1.0
            )
        return known

    def new_to(self, matched: dict[str, float]) -> bool:
        """Whether a sentence names something not covered yet: a rare word of the query no chosen sentence
        held, or one held only without some query word this sentence has ("the parking code for Falcon"
        covers Falcon, but not "vault": Falcon's vault code is still news)."""
        seen = self.seen_with
        return any(t not in seen or not matched.keys() <= seen[t] for t in matched if t in self.scores.rare)

    def best_sentence(self, n: int) -> tuple[float, dict[str, float]]:
        """A group's best sentence that still names something not covered, and its value."""
        best: tuple[float, dict[str, float]] = (0.0, {})
        for matched in self.scores.term_scores[n]:
            if self.scores.rare and not self.new_to(matched):
                continue  # every rare word of the query it holds was covered already, with its company
            worth = sum(self.weight[t] * v for t, v in matched.items())
            if worth > best[0]:
                best = (worth, matched)
        return best

    def value(self, n: int) -> float:
        """A group's marginal worth now: its best sentence not covered yet (or its meaning), discounted."""
        best = self.scores.best
        by_words = self.best_sentence(n)[0] / best if best > 0 else 0.0
        return self.factor(n) * max(by_words, self.meaning.get(n, 0.0))

    def companions(self, n: int) -> list[int]:
        """The neighbour and the dated turn a chosen group brings (not chosen yet)."""
        groups, messages = self.groups, self.prompt.messages
        out: list[int] = []
        if self.plain(n):
            text = messages[groups[n].first].text.rstrip()
            if _asks(text) and self.plain(n + 1):
                out.append(n + 1)
            elif len(_RAW_WORD.findall(text)) <= SHORT_TURN and self.plain(n - 1):
                out.append(n - 1)
        if self.temporal and self.dated < DATED_HITS:
            self.dated += 1
            for m in range(n, max(-1, n - DATE_LOOKBACK), -1):
                if any(_dated(messages[p].text) for p in groups[m].members):
                    if m != n and self.plain(m):
                        out.append(m)
                    break
        return [m for m in out if m not in self.taken]

    def take(self, number: int, cost: int, worth: float | None = None) -> bool:
        """Choose ``number`` (at ``cost``) and what it brings, if the share allows; whether it was. A
        discounted group (a superseded statement, a question without its answer) may use only its worth ÷
        ``STRONG`` of the share: it comes back only while the room is to spare. Its worth is its relevance,
        else (a group the fill step ranks by meaning alone) ``worth``, its place in the fused ranking."""
        limit = self.room * self.share
        if self.factor(number) < 1.0:
            known = self.relevance.get(number, worth if worth is not None else 0.0)
            limit *= min(1.0, self.factor(number) * known / STRONG)
        if self.used + cost > limit:
            return False
        self.chosen.append(number)
        self.taken.add(number)
        self.used += cost
        costs = self.costs
        for m in self.companions(number):
            if self.used + costs[m] <= limit:
                self.chosen.append(m)
                self.taken.add(m)
                self.used += costs[m]
        return True

    def cover(self) -> None:
        """Coverage: the groups best by marginal value first, each while it names something not covered.

        Lazy greedy: values only fall as words get covered, so a popped value still above the next stale
        one is the true best.
        """
        heap = [(-self.value(n), self.firsts[n] * -1, n) for n in self.excluded]
        heapq.heapify(heap)
        while heap:
            _, order, number = heapq.heappop(heap)
            if number in self.taken:
                continue
            current = self.value(number)
            if heap and current < -heap[0][0] - 1e-12:
                heapq.heappush(heap, (-current, order, number))
                continue
            if current < MIN_RELEVANCE:
                break
            if self.take_cheapest(number):
                self.covered_by(number)

    def take_cheapest(self, number: int) -> bool:
        """Take a group at its excerpt's cost when its tool results cut to what the query matches are
        cheaper (the copies are kept until it may come back whole); whether it was taken."""
        groups, messages, prompt = self.groups, self.prompt.messages, self.prompt
        cost = cheap = self.costs[number]
        copies = (
            _excerpt(prompt, number, self.scores.query)
            if self.firsts[number] in self.gone and any(messages[p].role == "tool" for p in groups[number].members)
            else None
        )
        if copies is not None:
            cheap = sum(Prompt(copies, prompt.counter, prompt.per_message_overhead).costs)
            if cheap < cost:
                self.excerpts[number], self.whole[number] = copies, cost - cheap
        if not self.take(number, min(cost, cheap)):
            self.excerpts.pop(number, None)
            return False
        return True

    def covered_by(self, number: int) -> None:
        """What the sentence a group was chosen for is about (its rarest query word) counts ``COVERED`` as
        much from now on, and is covered together with the query words that sentence held."""
        scores = self.scores
        sentence = self.best_sentence(number)[1]
        matched = [t for t in sentence if t in scores.rare]
        if matched and number not in scores.questions:
            about = min(matched, key=lambda t: (scores.sentence_frequency[t], t))
            if about not in self.seen_with:
                self.weight[about] *= COVERED
            self.seen_with.setdefault(about, set()).update(sentence)

    def fill_ranking(self) -> tuple[dict[int, float], dict[int, float]]:
        """The groups the fill step may bring, each with its worth: those that match by words (not
        superseded: the statement that replaced it wins; not a look-alike, the query's common words without
        any of its rare ones, when the history holds them), with an embedder every excluded group ranked by
        words and by meaning, the two rankings fused by reciprocal rank; discounted by :meth:`factor`. And
        each one's worth before the discount."""
        scores = self.scores
        by_words = {
            n: scores.relevance[n]
            for n in self.excluded
            if scores.relevance[n] >= MIN_RELEVANCE and not self.superseded(n) and _holds_rare(scores, n)
        }
        fill: dict[int, float] = by_words
        if self.embedded:
            similar = self.similar_whole
            by_meaning = {n: v for n, v in similar.items() if v >= FUSED_FLOOR and not self.superseded(n)}
            fill = _fused(by_words, by_meaning)
        return {n: v * self.factor(n) for n, v in fill.items() if v >= MIN_RELEVANCE}, fill

    def fill(self) -> None:
        """Fill: the other matching groups, most relevant first, whole (an excerpt is for the coverage
        step), while the share allows."""
        fill, fused = self.fill_ranking()
        groups, messages = self.groups, self.prompt.messages
        for number in sorted(fill, key=lambda n: (-fill[n], -self.firsts[n])):
            if self.used >= self.room * self.share:
                break
            if number not in self.taken and not any(messages[p].role == "tool" for p in groups[number].members):
                self.take(number, self.costs[number], fused.get(number))

    def unexcerpt(self) -> None:
        """Excerpted groups come back whole instead, most useful first, while the share allows."""
        for number in [n for n in self.chosen if n in self.excerpts]:
            if self.used + self.whole[number] <= self.room * self.share:
                self.used += self.whole[number]
                del self.excerpts[number]


__all__ = [
    "DATE",
    "MAX_RECALL_SHARE",
    "MIN_RELEVANCE",
    "TEMPORAL",
    "current_input",
    "query_words",
    "recall",
    "search_words",
    "whole_groups",
]
