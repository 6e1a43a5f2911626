"""``summarize`` is never below ``truncate`` on what the current input asks about (issue 23, point 5).

The summary's room displaces the newest turns a plain shift would keep. When the history with the summary
would hold fewer of the input's search words than the history with those turns, the turns are kept and no
summary is made. Worked cases with a fixed counter (a quarter of the characters, rounded up, plus 4 a
message), and a property against ``truncate`` as the reference on generated conversations.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings

from contextshift import Message, TokenBudgetExceeded, shift_with_strategy
from contextshift.core.recall import current_input, query_words
from contextshift.core.relevance import terms

from .strategies_gen import approx_tokens, examples, scenarios


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


#: One long sentence (294 characters): the summary cuts a sentence at 240, and the gate code is after that.
LONG = (
    "I went through every shelf of the depot this morning and counted the pallets twice over, "
    "then logged the forklift hours, swept the loading bay, checked the sprinkler heads one by one, "
    "phoned the night shift to compare notes, and finally wrote down that the gate code for warehouse NORTH is 5521"
)
SHORT = "The gate code for warehouse NORTH is 5521."


def chat(newest: str) -> list[Message]:
    out = [Message(role="system", content="You are terse.", id="sys")]
    for n in range(12):
        out.append(Message(role="user", content=f"Filler question {n} about the weather today?", id=f"u{n}"))
        out.append(Message(role="assistant", content=f"Filler answer {n}: it is mild and dry.", id=f"a{n}"))
    out.append(Message(role="user", content="Anything else from the depot round?", id="u-last"))
    out.append(Message(role="assistant", content=newest, id="fact"))
    out.append(Message(role="user", content="What is the gate code for warehouse NORTH?", id="now", source="input"))
    return out


def test_the_newest_turns_stay_when_the_summary_would_lose_the_words_the_input_asks_for() -> None:
    # Budget 120: truncate keeps sys (8) + u-last (13) + fact (78) + now (15) = 114. The summary's room
    # (35% of the budget) would push u-last and fact out, and the summary cuts fact's one sentence at 240
    # characters, before "gate code for warehouse NORTH": 0 of the input's 4 search words against 4.
    messages = chat(LONG)
    truncated = shift_with_strategy(messages, ceil4, 120, strategy="truncate")
    result = shift_with_strategy(messages, ceil4, 120, strategy="summarize")
    assert [m.id for m in truncated.kept] == ["sys", "u-last", "fact", "now"]
    assert result.strategy == "summarize"
    assert [m.id for m in result.kept] == ["sys", "u-last", "fact", "now"]
    assert result.truncated == []
    assert result.tokens == truncated.tokens == 114
    assert result.reasons["fact"] == "fit"
    assert result.reasons["a11"] == "context-shift"
    assert (
        "with a context summary the history would hold 0 of the current input's 4 search words, with the newest "
        "turns it displaces 4: the turns were kept instead"
    ) in result.diagnostics


def test_a_summary_that_holds_the_words_the_input_asks_for_is_kept() -> None:
    # The same chat with the fact in a short sentence: the summary quotes it whole, so it holds all 4 words.
    messages = chat(SHORT)
    result = shift_with_strategy(messages, ceil4, 60, strategy="summarize")
    assert [m.id for m in result.kept] == ["sys", "context-summary", "now"]
    assert "5521" in result.kept[1].text
    assert "context summary created for 26 message(s)" in result.diagnostics


def _words_held(messages: list[Message], wanted: set[str]) -> int:
    history = "\n".join(m.text for m in messages if not m.protected)
    return len(wanted.intersection(*terms([history])))


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(scenarios(squeezed=True))
def test_summarize_never_holds_fewer_of_the_inputs_words_than_truncate(s) -> None:  # type: ignore[no-untyped-def]
    try:
        reference = shift_with_strategy(s.inputs, approx_tokens, s.budget, strategy="truncate")
    except TokenBudgetExceeded:  # the protected context does not fit: summarize raises too
        return
    result = shift_with_strategy(s.inputs, approx_tokens, s.budget, strategy="summarize")
    wanted = set(query_words(current_input(s.normalized())))
    assert _words_held(list(result.kept), wanted) >= _words_held(list(reference.kept), wanted)
