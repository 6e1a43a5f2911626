"""Relevance of retrieved blocks to the current input (G4, P4), offline, with BM25 (``bm25s``).

Words are lower-cased, English stop words dropped and the rest stemmed (Snowball, ``PyStemmer``), so
"flights" finds "flight".

A block's relevance is in 0..1: half its BM25 score against the query relative to the best-scoring block,
half the share of the query's terms it contains. A block that shares no term with the query scores 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy, bm25s and PyStemmer are imported when first used: ``import contextshift`` stays light
    import numpy as np
    import Stemmer

#: ``bm25s.tokenize``'s own word pattern (scikit-learn's), so the words are exactly the ones it would give.
_WORD = re.compile(r"(?u)\b\w\w+\b")
#: bm25s' default k1.
BM25_K1 = 1.5


@cache
def _stemmer() -> Stemmer.Stemmer:
    import Stemmer

    return Stemmer.Stemmer("english")


@cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


@lru_cache(maxsize=1 << 14)
def _analysed(text: str) -> tuple[str, ...]:
    stopwords = _stopwords()
    return tuple(_stem(w) for w in _WORD.findall(text.lower()) if w not in stopwords)


def _terms(texts: Sequence[str]) -> list[list[str]]:
    """What ``bm25s.tokenize(texts, stopwords="en", stemmer=<English Snowball>)`` gives, word for word, without
    its per-call cost (it builds a vocabulary and a stop-word set for every call); each word is stemmed
    once, and each text analysed once while it is among the last 16k (a turn analyses the same messages)."""
    return [list(_analysed(text)) for text in texts]


def bm25_relevance(query: str, documents: Sequence[str]) -> list[float]:
    """One relevance score in 0..1 per document, against ``query``."""
    if not documents:
        return []
    query_terms = _terms([query])[0]
    if not query_terms:
        return [0.0] * len(documents)
    corpus = _terms(documents)
    if not any(corpus):
        return [0.0] * len(documents)
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    scores = [float(s) for s in retriever.get_scores(query_terms)]
    best = max(scores)
    wanted = set(query_terms)
    out = []
    for score, terms in zip(scores, corpus, strict=True):
        coverage = len(wanted.intersection(terms)) / len(wanted)
        relative = score / best if best > 0 else 0.0
        out.append(round(0.5 * relative + 0.5 * coverage, 6) if coverage else 0.0)
    return out


def terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's words as BM25 sees them: lower-cased, English stop words dropped, stemmed."""
    if not texts:
        return []
    return _terms(texts)


def bm25_scores(query_terms: Sequence[str], corpus: Sequence[Sequence[str]]) -> list[float]:
    """Raw BM25 scores of each document of ``corpus`` (already analysed with :func:`terms`) for the query."""
    if not corpus:
        return []
    if not query_terms or not any(corpus):
        return [0.0] * len(corpus)
    import bm25s

    retriever = bm25s.BM25()
    retriever.index([list(d) for d in corpus], show_progress=False)
    return [float(s) for s in retriever.get_scores(list(query_terms))]


def bm25_term_scores(
    query_terms: Sequence[str], corpus: Sequence[Sequence[str]], *, length_weight: float = 0.75
) -> dict[str, list[float]]:
    """Each query term's own BM25 score in each document (a document's score is their sum).

    ``length_weight`` is BM25's ``b``: how much a long document's scores are scaled down.
    """
    wanted = list(dict.fromkeys(query_terms))
    matrix = bm25_term_matrix(wanted, corpus, length_weight=length_weight)
    return {term: [float(s) for s in row] for term, row in zip(wanted, matrix, strict=True)}


def bm25_term_matrix(
    query_terms: Sequence[str], corpus: Sequence[Sequence[str]], *, length_weight: float = 0.75
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """:func:`bm25_term_scores` as one array: a row per distinct query term (in order), a column per document."""
    import numpy as np

    wanted = list(dict.fromkeys(query_terms))
    scores = np.zeros((len(wanted), len(corpus)), dtype=np.float32)
    if not corpus or not wanted or not any(corpus):
        return scores
    # bm25s' BM25 (Lucene variant, k1 1.5) computed for the query's terms only, with its arithmetic (a float32
    # idf times a float64 term-frequency part, stored as float32), so every score is bm25s' own to the bit;
    # indexing the whole vocabulary of every sentence took most of a recall turn.
    row = {term: k for k, term in enumerate(wanted)}
    counts = np.zeros((len(wanted), len(corpus)), dtype=np.float32)
    for column, document in enumerate(corpus):
        for word in document:
            k = row.get(word)
            if k is not None:
                counts[k, column] += 1
    return bm25_from_counts(counts, np.array([len(d) for d in corpus]), length_weight=length_weight)


def bm25_from_counts(
    counts: np.ndarray[Any, np.dtype[np.float32]],
    lengths: np.ndarray[Any, np.dtype[Any]],
    *,
    length_weight: float = 0.75,
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """:func:`bm25_term_matrix` from the counts already made: ``counts[k, d]`` how often query term ``k`` is
    in document ``d`` (float32), ``lengths[d]`` how many words document ``d`` has (integers)."""
    import numpy as np

    scores = np.zeros(counts.shape, dtype=np.float32)
    if not counts.size or not lengths.any():
        return scores
    average = lengths.mean()
    documents = counts.shape[1]
    frequency = (counts > 0).sum(axis=1)
    idf = np.array(
        [math.log(1 + (documents - df + 0.5) / (df + 0.5)) if df else 0.0 for df in frequency.tolist()],
        dtype=np.float32,
    )
    norm = BM25_K1 * ((1 - length_weight) + length_weight * lengths / average)
    with np.errstate(invalid="ignore", divide="ignore"):  # an empty document with b = 1: zeroed below
        part = counts / (norm[None, :] + counts)
    scores[:] = idf[:, None] * part
    scores[counts == 0] = 0.0
    return scores
