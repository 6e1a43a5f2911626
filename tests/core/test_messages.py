"""M1/M2: messages and their lossless conversion to and from provider dicts."""

from __future__ import annotations

import math

import pytest

from contextshift import Message, shift_context
from contextshift.core.messages import link_ids, normalize_messages


def test_openai_dict_round_trips_losslessly() -> None:
    data = {
        "id": "a1",
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
            {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        ],
        "pinned": True,
        "source": "history",
        "relevance": 0.5,
        "workspace": "ws-1",
        "meta": {"x": 1},
        "refusal": None,
    }
    message = Message.from_dict(data)
    assert [c.name for c in message.tool_calls] == ["get_weather", "get_time"]
    assert message.to_dict() == data
    assert Message.from_dict(message.to_dict()) == message


def test_anthropic_blocks_round_trip_and_carry_links() -> None:
    call = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "red door"}},
        ],
    }
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}]}
    m_call, m_result = Message.from_dict(call), Message.from_dict(result)
    assert m_call.to_dict() == call and m_result.to_dict() == result
    assert link_ids(m_call) == ("toolu_1",) and link_ids(m_result) == ("toolu_1",)
    assert m_call.text == 'Let me check.\nsearch\n{"q": "red door"}'
    assert m_result.text == "found"


def test_link_key_precedence_is_tool_call_id_then_toolCallId_then_callId() -> None:
    both = Message.from_dict({"role": "tool", "content": "r", "toolCallId": "b", "callId": "c"})
    assert both.tool_call_id == "b"
    assert both.to_dict()["toolCallId"] == "b"
    in_meta = Message.from_dict({"role": "tool", "content": "r", "meta": {"callId": "c", "toolCallId": "b"}})
    assert link_ids(in_meta) == ("b",)
    top_wins = Message.from_dict({"role": "tool", "content": "r", "tool_call_id": "a", "meta": {"toolCallId": "b"}})
    assert link_ids(top_wins) == ("a",)


def test_missing_ids_become_stable_positions() -> None:
    messages = normalize_messages([{"role": "user", "content": "a"}, {"id": "x", "role": "user", "content": "b"}])
    assert [m.id for m in messages] == ["msg-0", "x"]


def test_text_joins_parts_then_tool_call_names_and_arguments() -> None:
    message = Message.from_dict(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "x"}}],
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    )
    assert message.text == "one\nf\n{}"
    assert message.media_parts() == (1, 0)


def test_protection_follows_m4() -> None:
    def protected(**fields: object) -> bool:
        return Message.from_dict({"role": "user", "content": "x", **fields}).protected

    assert protected(pinned=True)
    assert protected(source="input")
    assert not protected(source="history")
    assert Message(role="system", content="s").protected
    assert Message(role="system", content="s", source="persona").protected
    assert Message(role="system", content="s", source="character").protected
    assert not Message(role="system", content="s", source="lorebook").protected
    assert not Message(role="system", content="s", source="summary").protected


@pytest.mark.parametrize(
    ("bad", "error", "words"),
    [
        ({"id": "m1", "role": "robot", "content": "x"}, ValueError, "m1"),
        ({"id": "m2", "role": "user", "content": 5}, TypeError, "m2"),
        ({"id": "m3", "role": "user", "content": "x", "pinned": "yes"}, TypeError, "m3"),
        ({"id": "m4", "role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, ValueError, "id"),
    ],
)
def test_bad_messages_are_rejected_with_their_id(bad: dict[str, object], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        shift_context([bad], lambda s: math.ceil(len(s) / 4), 100)


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate message id"):
        normalize_messages([{"id": "a", "role": "user", "content": "x"}, {"id": "a", "role": "user", "content": "y"}])
