"""M1/M2: ``Message(...)`` validates and coerces exactly as ``Message.from_dict`` does, and stays immutable.

Every case runs twice, through the constructor and through ``from_dict``, and must give the same message or
the same error.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from contextshift import Message, ToolCall, shift_context
from contextshift.core.messages import link_ids

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

#: (fields, what the message holds afterwards: field -> value)
COERCED: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"role": "assistant", "tool_calls": [CALL]}, {"tool_calls": (ToolCall("c1", "f", "{}", {"type": "function"}),)}),
    (
        {"role": "assistant", "tool_calls": [{"id": "c2", "name": "g", "arguments": {"x": 1}}]},
        {"tool_calls": (ToolCall("c2", "g", '{"x": 1}', {"flat": True}),)},
    ),
    (
        {"role": "user", "content": ["a", "b"]},
        {"content": ({"type": "text", "text": "a"}, {"type": "text", "text": "b"})},
    ),
    ({"role": "user", "content": None}, {"content": None}),
    ({"role": "user", "content": "x", "meta": None}, {"meta": {}}),
    ({"role": "user", "content": "x", "id": None}, {"id": ""}),
    ({"role": "tool", "content": "r", "tool_call_id": ""}, {"tool_call_id": None}),
    ({"role": "user", "content": "x", "relevance": 1}, {"relevance": 1}),
]

#: (fields, error type, words the message must contain: the field's name)
REJECTED: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"role": "robot", "content": "x"}, ValueError, "role"),
    ({"role": "user", "content": 123}, TypeError, "content"),
    ({"role": "user", "content": [1]}, TypeError, "content parts"),
    ({"role": "user", "content": "x", "pinned": "yes"}, TypeError, "pinned"),
    ({"role": "user", "content": "x", "meta": ["not", "a", "mapping"]}, TypeError, "meta"),
    ({"role": "user", "content": "x", "source": "elsewhere"}, ValueError, "source"),
    ({"role": "user", "content": "x", "relevance": "high"}, TypeError, "relevance"),
    ({"role": "user", "content": "x", "relevance": True}, TypeError, "relevance"),
    ({"role": "user", "content": "x", "name": 7}, TypeError, "name"),
    ({"role": "user", "content": "x", "workspace": 7}, TypeError, "workspace"),
    ({"role": "user", "content": "x", "id": 5}, TypeError, "id"),
    ({"role": "assistant", "tool_calls": "c1"}, TypeError, "tool_calls"),
    ({"role": "assistant", "tool_calls": ["c1"]}, TypeError, "tool_calls"),
    ({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, ValueError, "id"),
    ({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 5}}]}, TypeError, "name"),
    ({"role": "tool", "content": "r", "tool_call_id": 5}, TypeError, "tool_call_id"),
]

BUILDERS: dict[str, Callable[[dict[str, Any]], Message]] = {
    "constructor": lambda fields: Message(**fields),
    "from_dict": Message.from_dict,
}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=list(BUILDERS))
@pytest.mark.parametrize(("fields", "expected"), COERCED)
def test_both_paths_coerce_alike(
    build: Callable[[dict[str, Any]], Message], fields: dict[str, Any], expected: dict[str, Any]
) -> None:
    message = build(fields)
    for name, value in expected.items():
        assert getattr(message, name) == value, name
    assert message == Message(**fields) == Message.from_dict(fields)


@pytest.mark.parametrize("build", BUILDERS.values(), ids=list(BUILDERS))
@pytest.mark.parametrize(("fields", "error", "words"), REJECTED)
def test_both_paths_reject_alike_naming_the_field(
    build: Callable[[dict[str, Any]], Message], fields: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        build(fields)


def test_a_dict_tool_call_given_to_the_constructor_is_shifted_like_any_other() -> None:
    call = Message(role="assistant", id="a", tool_calls=[{"id": "c1", "name": "f", "arguments": "{}"}])  # type: ignore[list-item]
    result = Message(role="tool", id="r", content="ok", tool_call_id="c1")
    shifted = shift_context([call, result, Message.user("now", id="u")], lambda s: len(s), 1000)
    assert [m.id for m in shifted.kept] == ["a", "r", "u"]
    assert link_ids(call) == ("c1",)


def test_meta_is_read_only_and_a_copy_of_what_was_given() -> None:
    given = {"tool_call_id": "c9"}
    message = Message(role="tool", content="r", meta=given)
    with pytest.raises(TypeError):
        message.meta["tool_call_id"] = "other"  # type: ignore[index]
    given["tool_call_id"] = "changed"
    assert message.meta == {"tool_call_id": "c9"} and link_ids(message) == ("c9",)


def test_content_parts_are_read_only() -> None:
    message = Message(role="user", content=[{"type": "text", "text": "a"}])
    assert isinstance(message.content, tuple)
    with pytest.raises(TypeError):
        message.content[0]["text"] = "b"  # type: ignore[index]
    assert message.text == "a"


def test_fields_cannot_be_assigned() -> None:
    message = Message.user("x")
    with pytest.raises(AttributeError):
        message.content = "y"  # type: ignore[misc]


def test_messages_are_hashable_and_equal_messages_hash_alike() -> None:
    a = Message.user("x", id="m", meta={"k": [1, 2]})
    b = Message.from_dict({"id": "m", "role": "user", "content": "x", "meta": {"k": [1, 2]}})
    assert a == b and hash(a) == hash(b)
    assert len({a, b, Message.user("y", id="m")}) == 2
    assert hash(ToolCall("c", "f", "{}")) == hash(ToolCall("c", "f", "{}"))


def test_copies_and_pickles_give_the_same_message() -> None:
    message = Message.assistant("see", id="a", tool_calls=[CALL], meta={"k": "v"}, extra={"x-vendor": 1})
    assert copy.deepcopy(message) is message and copy.copy(message) is message
    assert pickle.loads(pickle.dumps(message)) == message


def test_factories_set_the_role_and_pass_every_other_field() -> None:
    assert Message.user("hi", id="u", source="input") == Message(role="user", content="hi", id="u", source="input")
    assert Message.system("rules").role == "system" and Message.system("rules").protected
    assistant = Message.assistant(tool_calls=[CALL])
    assert assistant.role == "assistant" and assistant.tool_calls[0].id == "c1"
    result = Message.tool_result("c1", "42", id="r")
    assert result == Message(role="tool", content="42", id="r", tool_call_id="c1")
    with pytest.raises(ValueError, match="the call it answers"):
        Message.tool_result("", "42")


def test_round_trip_through_dicts_is_lossless() -> None:
    message = Message.from_dict(
        {"id": "r", "role": "tool", "content": [{"type": "text", "text": "a"}], "toolCallId": "c1", "x-vendor": 1}
    )
    assert Message.from_dict(message.to_dict()) == message
    assert message.to_dict()["toolCallId"] == "c1" and message.to_dict()["x-vendor"] == 1
