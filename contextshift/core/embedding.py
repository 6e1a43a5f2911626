"""Relevance by meaning (G4, G4a): the embedding extension point, with no model and no I/O in it.

An :class:`Embedder` turns texts into vectors; two texts that say the same thing in other words get
vectors pointing the same way. ``recall`` and ``vector-recall`` use one when the caller passes it
(``shift_with_strategy(embedder=...)``), beside BM25, which only sees shared words. The model that ships
with contextshift's ``embeddings`` extra is loaded by ``contextshift.embeddings``, outside the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Texts to vectors, one per text, all of one length (a sentence-embedding model).

    ``name`` says which model, for diagnostics. ``embed`` must give the same vector for the same text
    every time (the strategies are deterministic) and may cache.
    """

    @property
    def name(self) -> str:
        """Which model, as diagnostics name it (e.g. ``all-MiniLM-L6-v2 (int8 ONNX)``)."""
        ...

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """Embed ``texts``.

        Args:
            texts: the texts, any number, any length (a model may read only the start of a long one).

        Returns:
            One vector per text, in order, all of one length.
        """
        ...


def similarities(embedder: Embedder, query: str, documents: Sequence[str]) -> list[float]:
    """The cosine similarity of each document to ``query``, in -1..1 (0 for an empty text).

    Args:
        embedder: the model.
        query: what is searched for (the current input).
        documents: the texts to score.

    Returns:
        One similarity per document, in order.

    Raises:
        ValueError: the embedder returned a different number of vectors, or vectors of different lengths.
    """
    if not documents:
        return []
    import numpy as np  # on first use: ``import contextshift`` does not load numpy (N4)

    vectors = np.asarray(embedder.embed([query, *documents]), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(documents) + 1:
        raise ValueError(f"embedder {embedder.name!r} returned {vectors.shape} for {len(documents) + 1} texts")
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    scores = unit[1:] @ unit[0]
    empty = [not text.strip() for text in documents]
    return [0.0 if blank else round(float(s), 6) for s, blank in zip(scores, empty, strict=True)]


__all__ = ["Embedder", "similarities"]
