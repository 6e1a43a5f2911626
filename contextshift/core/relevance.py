"""Relevance of retrieved blocks to the current input (G4, P4), offline, with BM25 (``bm25s``).

Words are lower-cased, English stop words dropped and the rest stemmed (Snowball, ``PyStemmer``), so
"flights" finds "flight".

A block's relevance is in 0..1: half its BM25 score against the query relative to the best-scoring block,
half the share of the query's terms it contains. A block that shares no term with the query scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import bm25s
import Stemmer


@cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _terms(texts: Sequence[str]) -> list[list[str]]:
    tokens: list[list[str]] = bm25s.tokenize(
        list(texts), stopwords="en", stemmer=_stemmer(), show_progress=False, return_ids=False
    )
    return tokens


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
    if not corpus or not wanted or not any(corpus):
        return {term: [0.0] * len(corpus) for term in wanted}
    retriever = bm25s.BM25(b=length_weight)
    retriever.index([list(d) for d in corpus], show_progress=False)
    return {term: [float(s) for s in retriever.get_scores([term])] for term in wanted}
