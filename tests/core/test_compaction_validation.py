"""C8: a summarizer reply is stored only when non-empty, naturally finished and smaller than what it replaces.

Adapted from the reference product's quality tests (finish reason ``length`` rejected, a summary longer than its
input rejected), plus the stored record's shape: role ``system``, source ``summary``, ``meta.covers`` in order.
"""

from __future__ import annotations

import pytest

from contextshift.core.compaction import (
    EMPTY,
    NOT_SMALLER,
    SUMMARY_HEADER,
    TRUNCATED,
    accept_summary,
    clean_summary,
    message_tokens,
    select_fold,
    summary_body,
    summary_from_selection,
    summary_message,
    validate_summary,
)
from contextshift.core.messages import Message
from contextshift.providers.serialize import to_anthropic_messages, to_openai_messages


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None, "<summary>  </summary>"])
def test_an_empty_summary_is_rejected(text: str | None) -> None:
    verdict = validate_summary(text, "stop", 1_000, 0)
    assert not verdict.ok and verdict.reason == EMPTY


@pytest.mark.parametrize("finish", ["length", "max_tokens", "content_filter", "tool_calls", None, ""])
def test_a_summary_cut_off_for_any_reason_but_a_natural_stop_is_rejected(finish: str | None) -> None:
    verdict = validate_summary("Alice booked Paris.", finish, 1_000, 10)
    assert not verdict.ok and verdict.reason == TRUNCATED


@pytest.mark.parametrize("finish", ["stop", "end_turn", "STOP"])
def test_a_natural_stop_is_accepted(finish: str) -> None:
    verdict = validate_summary("Alice booked Paris.", finish, 1_000, 10)
    assert verdict.ok and verdict.reason is None and bool(verdict)


@pytest.mark.parametrize("summary_tokens", [1_000, 1_001, 50_000])
def test_a_summary_not_smaller_than_what_it_replaces_is_rejected(summary_tokens: int) -> None:
    verdict = validate_summary("long text", "stop", 1_000, summary_tokens)
    assert not verdict.ok and verdict.reason == NOT_SMALLER


def test_reasons_are_checked_in_a_stable_order() -> None:
    assert validate_summary("", "length", 10, 99).reason == EMPTY
    assert validate_summary("x", "length", 10, 99).reason == TRUNCATED


def test_a_wrapping_summary_tag_or_fence_is_removed() -> None:
    assert clean_summary("  <summary>\nAlice booked Paris.\n</summary> ") == "Alice booked Paris."
    assert clean_summary("```\nfacts\n```") == "facts"
    assert clean_summary(None) == ""


def test_the_stored_summary_is_a_system_message_with_source_summary() -> None:
    message = summary_message(
        " Alice booked Paris. ",
        message_id="sum-1",
        covers=["m1", "m2", "m2", "m3"],
        workspaces=["api", "api", "docs"],
        supersedes=["sum-0"],
    )
    assert message.role == "system" and message.source == "summary" and message.id == "sum-1"
    assert message.content == f"{SUMMARY_HEADER}\nAlice booked Paris."
    assert message.meta["covers"] == ["m1", "m2", "m3"]
    assert message.meta["workspaces"] == ["api", "docs"]
    assert message.meta["supersedes"] == ["sum-0"]
    assert message.workspace is None  # several workspaces
    assert not message.protected  # shifting may still drop it (M4)
    assert summary_body(message) == "Alice booked Paris."
    assert Message.from_dict(message.to_dict()) == message


def test_a_summary_in_one_workspace_carries_it() -> None:
    assert summary_message("x", message_id="s", covers=["m"], workspaces=["api"]).workspace == "api"


def test_nothing_empty_or_uncovered_is_ever_built() -> None:
    with pytest.raises(ValueError):
        summary_message("  ", message_id="s", covers=["m"])
    with pytest.raises(ValueError):
        summary_message("x", message_id="s", covers=[])
    with pytest.raises(ValueError):
        summary_message("x", message_id="", covers=["m"])


def test_the_record_is_built_from_a_selection_and_validated_against_its_fold() -> None:
    history = [
        Message(role="user", content="plan a trip to Paris in May " * 20, id="u0", workspace="travel"),
        Message(role="assistant", content="Paris, 3-7 May, hotel Lumiere " * 20, id="a0", workspace="travel"),
        Message(role="user", content="and now?", id="u1"),
    ]
    selection = select_fold(history, target_tokens=None, input_budget=10_000)
    summary = summary_from_selection("Trip: Paris, 3-7 May, hotel Lumiere.", selection, message_id="s1")
    assert summary.meta["covers"] == ["u0", "a0"] and summary.workspace == "travel"
    cost = message_tokens([summary])[0]
    assert validate_summary("Trip: Paris, 3-7 May, hotel Lumiere.", "stop", selection.fold_tokens, cost).ok
    bloated = " ".join(m.text for m in selection.fold) * 2
    big = message_tokens([summary_from_selection(bloated, selection, message_id="s1")])[0]
    assert validate_summary(bloated, "stop", selection.fold_tokens, big).reason == NOT_SMALLER


def test_providers_accept_the_summary_mid_conversation() -> None:
    summary = summary_message("Alice booked Paris.", message_id="s", covers=["m"])
    conversation = [summary, Message(role="user", content="and Rome?", id="u")]
    system, turns = to_anthropic_messages(conversation)
    assert system is not None and "Alice booked Paris." in system
    assert [t["role"] for t in turns] == ["user"]
    assert [m["role"] for m in to_openai_messages(conversation)] == ["system", "user"]


def test_accept_summary_returns_the_record_only_for_a_valid_reply() -> None:
    history = [
        Message(role="user", content="we chose the blue logo and a budget of 4,000 EUR " * 10, id="u0"),
        Message(role="user", content="next?", id="u1"),
    ]
    selection = select_fold(history, target_tokens=None, input_budget=10_000)
    verdict, record = accept_summary("Blue logo; budget 4,000 EUR.", "stop", selection, message_id="s1")
    assert verdict.ok and record is not None and record.meta["covers"] == ["u0"]
    for reply, finish, reason in [
        ("  ", "stop", EMPTY),
        ("Blue logo", "length", TRUNCATED),
        ("x " * 500, "stop", NOT_SMALLER),
    ]:
        verdict, record = accept_summary(reply, finish, selection, message_id="s1")
        assert (verdict.ok, verdict.reason, record) == (False, reason, None)
