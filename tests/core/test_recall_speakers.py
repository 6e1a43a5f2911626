"""Worked cases of ``recall`` (G4a): who said a turn (its ``name``) is a term of the turn.

Counter: ceil(len/4) tokens a text, 4 a message (``test_recall_subjects``' chat: ten chatter turns of 20
tokens, the system prompt 8).
"""

from __future__ import annotations

from typing import Any

from contextshift import shift_with_strategy

from .test_recall_subjects import ceil4, chat, recalled

# Each turn is about painting; neither names its speaker. Caroline's is the later one.
MELANIE = ("melanie", "user", "I painted a sunrise over the lake last week.")
CAROLINE = ("caroline", "assistant", "I painted my bedroom wall a pale blue.")
QUESTION = "What did Melanie paint?"


def _named(messages: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    return [{**m, "name": names[m["id"]]} if m["id"] in names else m for m in messages]


def test_a_question_naming_a_speaker_brings_back_that_speakers_turn() -> None:
    messages = _named(chat(MELANIE, CAROLINE, question=QUESTION), {"melanie": "Melanie", "caroline": "Caroline"})
    result = shift_with_strategy(messages, ceil4, 60, strategy="recall")
    assert recalled(result) == ["melanie"]
    # Protected 8 + 10, the newest turn 20: room 22, recall's share 0.9 of it (19.8). Both turns hold
    # "paint"; Melanie's also holds her name (her speaker), so it ranks first and comes back (15 tokens);
    # Caroline's (14) no longer fits beside it.
    assert [m.id for m in result.kept] == ["sys", "melanie", "c9", "in"]
    assert result.tokens == 53


def test_without_speakers_the_later_look_alike_turn_comes_back_instead() -> None:
    messages = chat(MELANIE, CAROLINE, question=QUESTION)
    result = shift_with_strategy(messages, ceil4, 60, strategy="recall")
    # The two turns tie on "paint"; the later one is taken first, and the earlier no longer fits.
    assert recalled(result) == ["caroline"]
    assert result.tokens == 52


def test_a_speakers_turn_that_holds_no_word_of_the_question_does_not_come_back_for_the_name() -> None:
    lunch = ("lunch", "user", "We had soup and bread for lunch today.")
    messages = _named(chat(lunch, question=QUESTION), {"lunch": "Melanie"})
    result = shift_with_strategy(messages, ceil4, 60, strategy="recall")
    # Her name is a term only of her sentences that hold a word of the question: this one holds none.
    assert recalled(result) == []
    assert [m.id for m in result.kept] == ["sys", "c8", "c9", "in"]
