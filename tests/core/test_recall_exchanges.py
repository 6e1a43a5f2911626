"""Worked cases of ``recall`` (G4a) on dialogue: a turn that asks brings its answer, and every match may
use the whole share of the room.

Counter: ceil(len/4) tokens a text, 4 a message (``test_recall_subjects``' chat: ten chatter turns of 20
tokens, the system prompt 8).
"""

from __future__ import annotations

from contextshift import shift_with_strategy

from .test_recall_subjects import ceil4, chat, recalled

# 27 tokens: it asks in its middle sentence and ends with a shared photo's caption, not with "?".
ASKED = (
    "asked",
    "user",
    "Congrats on the new studio! How did the kids take the move? [shares a photo: a dance studio]",
)
# 16 tokens: the answer, which holds none of the input's words.
ANSWER = ("answer", "assistant", "They were scared at first, but they love it now.")


def test_a_turn_that_asks_in_any_sentence_brings_the_answer_after_it() -> None:
    messages = chat(ASKED, ANSWER, question="How did the kids take the move to the new studio?")
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    # Protected 8 + 17, the newest turn 20: room 55, recall's share 0.9 of it (49.5). The turn that asks
    # (27) and its answer (16) take 43; the 12 tokens left hold no other chatter turn.
    assert recalled(result) == ["asked", "answer"]
    assert [m.id for m in result.kept] == ["sys", "asked", "answer", "c9", "in"]
    assert result.tokens == 88


def test_an_answer_is_not_brought_by_a_turn_that_does_not_ask() -> None:
    told = ("told", "user", "Congrats on the new studio! The kids took the move well. [shares a photo: a dance studio]")
    messages = chat(told, ANSWER, question="How did the kids take the move to the new studio?")
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    assert recalled(result) == ["told"]
    assert "answer" not in {m.id for m in result.kept}


def test_a_weak_match_may_use_the_whole_share_when_the_room_allows() -> None:
    strong = ("strong", "user", "The harbour hall venue costs 900 euros for the evening.")  # 18 tokens
    weak = ("weak", "assistant", "Parking near the harbour is tricky on weekends.")  # 16 tokens, one input word
    messages = chat(strong, weak, question="What does the harbour hall venue cost?")
    result = shift_with_strategy(messages, ceil4, 110, strategy="recall")
    # Protected 8 + 14, the newest turn 20: room 68, recall's share 61.2. Both matches (34) fit in it, the
    # weak one too (it is ranked after the strong one, not given a smaller share); the newest turns keep
    # the rest: 110 - 22 - 34 = 54, two chatter turns (40).
    assert recalled(result) == ["strong", "weak"]
    assert [m.id for m in result.kept] == ["sys", "strong", "weak", "c8", "c9", "in"]
    assert result.tokens == 96


def test_a_follow_up_still_keeps_the_newest_turns() -> None:
    strong = ("strong", "user", "The harbour hall venue costs 900 euros for the evening.")
    weak = ("weak", "assistant", "Parking near the harbour is tricky on weekends.")
    messages = chat(strong, weak, question="And that harbour hall?")  # 10 tokens
    result = shift_with_strategy(messages, ceil4, 110, strategy="recall")
    # A follow-up: protected 8 + 10, the newest turn 20, room 72; recall may take a quarter (18). The strong
    # statement (18) fits, the weak one does not; the newest turns keep 110 - 18 - 18 = 74: three (60).
    assert recalled(result) == ["strong"]
    assert [m.id for m in result.kept] == ["sys", "strong", "c7", "c8", "c9", "in"]
    assert result.tokens == 96
