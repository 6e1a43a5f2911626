"""What a strategy is (G1): the callable contract, the :class:`StrategyRequest` it is given and the
:class:`~contextshift.core.shifting.ShiftResult` it returns. Every strategy module depends on this one, and
this one on none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .embedding import Embedder
from .messages import Message
from .shifting import Counter, ShiftResult


@dataclass(frozen=True, slots=True)
class StrategyRequest:
    """What a strategy is given (frozen). ``messages`` are normalized (every one has an id) and immutable.

    Args:
        messages: the prompt, oldest first.
        count_tokens: the counter every count must use.
        budget: the tokens the result may use.
        manual_excluded_ids: ids the user excluded.
        per_message_overhead: framing tokens per message for a plain callable counter.
        embedder: a sentence-embedding model (``recall`` and ``vector-recall`` then also score by meaning),
            or None (BM25 alone, the default).
    """

    messages: list[Message]
    count_tokens: Counter
    budget: int
    manual_excluded_ids: frozenset[str] = field(default_factory=frozenset)
    per_message_overhead: int = 4
    embedder: Embedder | None = None


Strategy = Callable[[StrategyRequest], ShiftResult]
