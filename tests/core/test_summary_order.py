"""The summary's order of the sentences a query leaves static: read from the history's order by score in
O(n) when that order is theirs, sorted otherwise; the same permutation either way (S7, S8)."""

from __future__ import annotations

import numpy as np

from contextshift import Message
from contextshift.core.summary import _by_value, _History

LINES = [
    "Maria booked the flight to Lisbon for 2400 euros.",
    "We agreed the deadline is Friday.",
    "Sure.",
    "Tomas will send the contract on Monday.",
    "The weather was nice.",
    "Should we move the launch to March?",
    "Maria booked the hotel in Porto.",
    "Ok.",
]


def _history() -> _History:
    history = _History()
    messages = [Message(role="user" if n % 2 else "assistant", content=line) for n, line in enumerate(LINES)]
    history.absorb(messages, [(m.role, m.workspace, m.text) for m in messages])
    return history


def _sorted(history: _History, static: np.ndarray, value: np.ndarray) -> list[int]:
    return np.lexsort((-history.scored().orders[static], -value)).tolist()  # type: ignore[no-any-return]


def test_static_sentences_by_score_come_in_the_order_a_sort_by_value_then_lateness_gives() -> None:
    history = _history()
    score, top, _, _ = history.scored()
    static = np.array([0, 1, 3, 4, 6, 7])
    value = score[static] / top
    assert _by_value(history, static, value, True).tolist() == _sorted(history, static, value)
    assert len(history) == 8


def test_equal_values_out_of_score_order_are_sorted_later_first() -> None:
    history = _history()
    static = np.arange(len(history))
    value = np.ones(len(history))  # every value ties: the latest sentence comes first
    assert _by_value(history, static, value, True).tolist() == [7, 6, 5, 4, 3, 2, 1, 0]
    assert _by_value(history, static, value, False).tolist() == [7, 6, 5, 4, 3, 2, 1, 0]
