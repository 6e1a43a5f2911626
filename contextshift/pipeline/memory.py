"""Memory retrieval (P4): the stored memories most relevant to the current input, offline (BM25)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.relevance import bm25_relevance

DEFAULT_LIMIT = 5


@dataclass(frozen=True, slots=True)
class MemoryItem:
    id: str
    content: str


@dataclass(frozen=True, slots=True)
class Recall:
    item: MemoryItem
    relevance: float
    retrieved: bool


def retrieve(memories: Sequence[MemoryItem], query: str, limit: int = DEFAULT_LIMIT) -> list[Recall]:
    """Every memory with its relevance, best first; the best ``limit`` with relevance above 0 are ``retrieved``."""
    usable = [m for m in memories if m.content.strip()]
    scores = bm25_relevance(query, [m.content for m in usable]) if usable else []
    ranked = sorted(range(len(usable)), key=lambda i: (-scores[i], i))
    chosen = {i for i in ranked[:limit] if scores[i] > 0}
    return [Recall(usable[i], scores[i], i in chosen) for i in ranked]
