"""The summary keeps a history's analysis between calls and extends it as the history grows (S8): what it
writes must be what a cold call writes, for the grown history, any query and any counter."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextshift import Message
from contextshift.core.summary import clear_caches, extractive_summary

from .strategies_gen import examples, texts


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


def words(text: str) -> int:
    return len(text.split()) + 1


def cold(messages: list[Message], count: object, target: int, query: str) -> str | None:
    clear_caches()
    return extractive_summary(messages, count, target, query)  # type: ignore[arg-type]


histories = st.lists(
    st.tuples(st.sampled_from(("user", "assistant")), texts(), st.sampled_from((None, "alpha", "beta"))),
    min_size=1,
    max_size=24,
).map(lambda items: [Message(role=r, content=t, workspace=w) for r, t, w in items])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data(), st.sampled_from(("", "What did we decide about the budget?", "Lisbon 2400 Maria")))
def test_a_summary_of_a_grown_history_is_the_cold_summary_of_it(
    history: list[Message], data: st.DataObject, query: str
) -> None:
    cut = data.draw(st.integers(0, len(history)))
    target = data.draw(st.integers(12, 200))
    expected = cold(history, ceil4, target, query)
    clear_caches()
    extractive_summary(history[:cut], ceil4, target, query)  # the earlier turn: its history is kept
    assert extractive_summary(history, ceil4, target, query) == expected


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.integers(12, 120))
def test_a_kept_history_counts_lines_with_the_counter_of_each_call(history: list[Message], target: int) -> None:
    by_words = cold(history, words, target, "")
    by_characters = cold(history, ceil4, target, "")
    extractive_summary(history, words, target)
    assert extractive_summary(history, ceil4, target) == by_characters
    assert extractive_summary(history, words, target) == by_words


def test_a_repeated_sentence_in_the_newer_messages_is_not_summarized_twice() -> None:
    clear_caches()
    first = [Message(role="user", content="We booked the Lisbon flight for 14 March. The weather is mild.")]
    grown = [*first, Message(role="assistant", content="We booked the Lisbon flight for 14 March.")]
    extractive_summary(first, ceil4, 200)
    text = extractive_summary(grown, ceil4, 200)
    assert text is not None
    assert text.count("Lisbon") == 1
    assert text == cold(grown, ceil4, 200, "")
