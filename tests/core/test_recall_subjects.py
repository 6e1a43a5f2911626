"""Worked cases of ``recall`` (G4a) on what a question needs: subjects, answers spread over turns, follow-ups.

Counter: ceil(len/4) tokens a text, 4 a message. Chatter turns are 62 characters: 20 tokens each.
"""

from __future__ import annotations

import math

from contextshift import shift_with_strategy
from contextshift.core.shifting import ShiftResult


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


CHATTER = "Some ordinary chatter about the weather and lunch plans today."


def chat(*history: tuple[str, str, str], question: str, chatter: int = 10) -> list[dict[str, object]]:
    """A system prompt, the ``(id, role, text)`` turns, ``chatter`` turns of small talk, the input."""
    return [
        {"id": "sys", "role": "system", "content": "You are helpful."},
        *[{"id": i, "role": role, "content": text} for i, role, text in history],
        *[{"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": CHATTER} for i in range(chatter)],
        {"id": "in", "role": "user", "content": question, "source": "input"},
    ]


def recalled(result: ShiftResult) -> list[str]:
    return [m.id for m in result.kept if result.reasons[m.id] == "recalled"]


GATES = [
    ("north", "user", "The gate code for warehouse NORTH is 5521."),
    ("south", "user", "The gate code for warehouse SOUTH is 7730."),
    ("east", "user", "The gate code for warehouse EAST is 1942."),
    ("west", "user", "The gate code for warehouse WEST is 6608."),
]


def test_look_alike_statements_about_other_subjects_are_not_taken_as_changes() -> None:
    # Each line has the words of the one before it and only the warehouse's name and the code differ: a
    # later line names another warehouse, so none is superseded and all four come back.
    messages = chat(*GATES, question="What are the gate codes of all the warehouses?")
    result = shift_with_strategy(messages, ceil4, 150, strategy="recall")
    assert recalled(result) == ["north", "south", "east", "west"]
    # 24 protected, 15 tokens a line, 20 a chatter turn: the four lines and the newest three turns, 144.
    assert [m.id for m in result.kept] == ["sys", "north", "south", "east", "west", "c7", "c8", "c9", "in"]
    assert result.tokens == 144


def test_a_later_statement_about_the_same_subject_supersedes_the_earlier_one() -> None:
    changed = ("changed", "user", "Update: the gate code for warehouse NORTH changed to 8080.")
    messages = chat(*GATES, changed, question="What are the gate codes of all the warehouses?")
    result = shift_with_strategy(messages, ceil4, 150, strategy="recall")
    assert recalled(result) == ["south", "east", "west", "changed"]
    assert result.reasons["north"] == "context-shift"


def test_an_answer_given_over_two_turns_comes_back_whole() -> None:
    # The question turn holds the input's words; the answer ("Rome!") holds none of them, and comes with it.
    asked = ("asked", "user", "Where did you go on your trip last week, Jon?")
    answer = ("answer", "assistant", "Rome! Loved every minute.")
    messages = chat(asked, answer, question="Which city did Jon visit on his trip last week?")
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    assert recalled(result) == ["asked", "answer"]
    assert [m.id for m in result.kept] == ["sys", "asked", "answer", "c8", "c9", "in"]


def test_a_follow_up_keeps_the_newest_turns() -> None:
    old = ("venue", "user", "The second option for the venue is the harbour hall.")
    # Asked about the past, the old statement comes back in place of the oldest of the newest turns.
    asked = shift_with_strategy(
        chat(old, question="What was the second option for the venue?"), ceil4, 100, strategy="recall"
    )
    assert recalled(asked) == ["venue"]
    assert [m.id for m in asked.kept] == ["sys", "venue", "c7", "c8", "c9", "in"]
    # "And the second one?" follows up on the last turns: recall may take a quarter of the room (17 of 69
    # tokens) and the statement (17 tokens) does not fit beside the newest turn's 20... so the newest stay.
    follow = shift_with_strategy(chat(old, question="And the second one?"), ceil4, 100, strategy="recall")
    assert recalled(follow) == []
    assert [m.id for m in follow.kept] == ["sys", "c6", "c7", "c8", "c9", "in"]


def test_the_recall_share_follows_the_evidence() -> None:
    from contextshift.core.recall import FOLLOW_UP_SHARE, MAX_RECALL_SHARE, follow_up, recall_share

    assert follow_up("yes, do that") and follow_up("And the second one?") and follow_up("what does it return?")
    assert not follow_up("What was the gate code for warehouse NORTH?")
    assert not follow_up("Which city did Jon visit on his trip last week, and with whom did he travel there?")
    assert recall_share("yes, do that", 6.0, 1.0) == FOLLOW_UP_SHARE
    # Strong matches in the excluded history, better than anything in the newest turns: most of the room.
    assert recall_share("What was the gate code?", 6.0, 3.0) == MAX_RECALL_SHARE
    # The newest turns match four times better: a quarter of that.
    assert recall_share("What was the gate code?", 2.0, 8.0) == MAX_RECALL_SHARE / 4
