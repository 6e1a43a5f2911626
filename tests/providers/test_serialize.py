"""P1 (provider serialization) and M2: core messages to OpenAI and Anthropic wire format, and bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextshift.core import Message, ToolCall
from contextshift.providers import (
    ChatRequest,
    UnknownProviderKind,
    anthropic_body,
    chat_request,
    openai_body,
    request_body,
)
from contextshift.providers.serialize import (
    CONTINUATION_TEXT,
    RAW_ARGUMENTS_KEY,
    anthropic_tools,
    openai_tools,
    to_anthropic_messages,
    to_openai_messages,
    tool_use_input,
)
from tests.fakes.validate import anthropic_problem, openai_problem

TRAVEL = [
    Message("system", "You are a travel bot.", id="sys", source="system", pinned=True),
    Message("user", "Weather in Paris and Rome?", id="u1", source="history", meta={"x": 1}),
    Message(
        "assistant",
        "Let me check.",
        id="a1",
        tool_calls=(
            ToolCall("call_paris", "weather", '{"city": "Paris"}'),
            ToolCall("call_rome", "weather", '{"city": "Rome"}'),
        ),
    ),
    Message("tool", "18C", id="t1", tool_call_id="call_paris"),
    Message("tool", "21C", id="t2", tool_call_id="call_rome"),
    Message("system", "Summary: the user plans a trip in May.", id="sum", source="summary"),
    Message("assistant", "Paris 18C, Rome 21C.", id="a2"),
    Message("user", "Thanks!", id="u2", source="input"),
]


# -- OpenAI ----------------------------------------------------------------------------------------------


def test_openai_keeps_system_roles_tool_calls_and_tool_results() -> None:
    assert to_openai_messages(TRAVEL) == [
        {"role": "system", "content": "You are a travel bot."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_paris",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_rome",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_paris", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_rome", "content": "21C"},
        {"role": "system", "content": "Summary: the user plans a trip in May."},
        {"role": "assistant", "content": "Paris 18C, Rome 21C."},
        {"role": "user", "content": "Thanks!"},
    ]


def test_openai_passes_content_parts_through_and_keeps_names() -> None:
    parts = (
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
    )
    assert to_openai_messages([Message("user", parts, name="ann")]) == [
        {"role": "user", "content": [dict(p) for p in parts], "name": "ann"}
    ]


def test_openai_assistant_with_only_tool_calls_has_empty_string_content() -> None:
    # V3: llama-cpp-python answers a null content with a 500; "" is accepted everywhere.
    wire = to_openai_messages([Message("assistant", "", tool_calls=(ToolCall("c1", "f", ""),))])
    assert wire == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}],
        }
    ]


def test_openai_converts_anthropic_blocks_given_as_dicts() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    assert to_openai_messages(messages) == [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "calling"}],
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    ]


def test_tool_messages_without_ids_answer_the_pending_calls_in_order() -> None:
    messages = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "f", "{}"), ToolCall("c2", "g", "{}"))),
        Message("tool", "r1"),
        Message("tool", "r2"),
        Message("tool", "orphan"),
    ]
    wire = to_openai_messages(messages)
    assert [m.get("tool_call_id") for m in wire[2:4]] == ["c1", "c2"]
    assert wire[4] == {"role": "user", "content": "Tool result:\norphan"}
    _, anthropic = to_anthropic_messages(messages)
    assert anthropic[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "r2"},
        {"type": "text", "text": "Tool result:\norphan"},
    ]


def test_tool_link_from_meta_is_used() -> None:
    messages = [
        Message("assistant", "", tool_calls=(ToolCall("c1", "f", "{}"), ToolCall("c2", "f", "{}"))),
        Message("tool", "second", meta={"callId": "c2"}),
        Message("tool", "first", meta={"toolCallId": "c1"}),
    ]
    assert [m.get("tool_call_id") for m in to_openai_messages(messages)[1:]] == ["c2", "c1"]


# -- Anthropic -------------------------------------------------------------------------------------------


def test_anthropic_parallel_tool_calls_and_mid_conversation_summary() -> None:
    system, wire = to_anthropic_messages(TRAVEL)
    assert system == "You are a travel bot.\n\nSummary: the user plans a trip in May."
    assert wire == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_paris", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_rome", "name": "weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_paris", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "call_rome", "content": "21C"},
            ],
        },
        {"role": "assistant", "content": "Paris 18C, Rome 21C."},
        {"role": "user", "content": "Thanks!"},
    ]
    body = anthropic_body(ChatRequest(model="m", messages=wire, system=system))
    assert anthropic_problem(body, {"anthropic-version": "2023-06-01"}) is None


def test_anthropic_merges_same_role_turns_and_puts_tool_results_first() -> None:
    messages = [
        Message("user", "a"),
        Message("user", "b"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "f", "{}"),)),
        Message("user", "wait"),
        Message("tool", "done", tool_call_id="c1"),
    ]
    _, wire = to_anthropic_messages(messages)
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "done"},
                {"type": "text", "text": "wait"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], [{"role": "user", "content": CONTINUATION_TEXT}]),
        ([Message("system", "only system")], [{"role": "user", "content": CONTINUATION_TEXT}]),
        (
            [Message("system", "s"), Message("assistant", "I continue.")],
            [{"role": "user", "content": CONTINUATION_TEXT}, {"role": "assistant", "content": "I continue."}],
        ),
    ],
)
def test_anthropic_always_starts_with_a_user_turn(messages: list[Message], expected: list[dict[str, Any]]) -> None:
    assert to_anthropic_messages(messages)[1] == expected


def test_anthropic_drops_blank_turns_and_trailing_whitespace_of_a_final_prefill() -> None:
    _, wire = to_anthropic_messages(
        [Message("user", "q"), Message("assistant", "  "), Message("user", ""), Message("assistant", "Sure, ")]
    )
    assert wire == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure,"}]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ("{not json", {RAW_ARGUMENTS_KEY: "{not json"}),
        ("[1, 2]", {RAW_ARGUMENTS_KEY: "[1, 2]"}),
        ("42", {RAW_ARGUMENTS_KEY: "42"}),
    ],
)
def test_tool_use_input(arguments: str, expected: dict[str, Any]) -> None:
    assert tool_use_input(arguments) == expected


def test_anthropic_converts_openai_parts() -> None:
    parts = (
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
        {"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "WFla"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
        {"type": "file", "file": {"file_id": "file-1", "filename": "b.pdf"}},
        {"type": "text", "text": ""},
    )
    _, wire = to_anthropic_messages([Message("user", parts)])
    assert wire[0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.test/cat.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "WFla"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
        {"type": "text", "text": "[file: b.pdf]"},
    ]


def test_anthropic_tool_result_error_flag_and_parts() -> None:
    messages = [
        Message("assistant", "", tool_calls=(ToolCall("c1", "f", "{}"),)),
        Message("tool", ({"type": "text", "text": "boom"},), tool_call_id="c1", meta={"is_error": True}),
    ]
    _, wire = to_anthropic_messages(messages)
    assert wire[-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [{"type": "text", "text": "boom"}],
                "is_error": True,
            }
        ],
    }


# -- round trips -----------------------------------------------------------------------------------------


def test_openai_wire_round_trips_through_core_messages() -> None:
    wire = to_openai_messages(TRAVEL)
    assert to_openai_messages([Message.from_dict(m) for m in wire]) == wire


def test_anthropic_wire_round_trips_through_core_messages() -> None:
    system, wire = to_anthropic_messages(TRAVEL)
    again_system, again = to_anthropic_messages(
        [Message("system", system or ""), *(Message.from_dict(m) for m in wire)]
    )
    assert (again_system, again) == (system, wire)


def _calls(wire: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in wire
        for c in m.get("tool_calls", [])
    ]


def _results(wire: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["tool_call_id"], m["content"]) for m in wire if m["role"] == "tool"]


def test_anthropic_wire_converts_back_to_the_same_openai_tool_exchange() -> None:
    _, wire = to_anthropic_messages(TRAVEL)
    crossed = to_openai_messages([Message.from_dict(m) for m in wire])
    direct = to_openai_messages([m for m in TRAVEL if m.role != "system"])
    assert _calls(crossed) == _calls(direct)
    assert _results(crossed) == _results(direct)


# -- bodies ----------------------------------------------------------------------------------------------


def test_openai_body_is_exact() -> None:
    request = ChatRequest(
        model="gpt",
        messages=[{"role": "user", "content": "hi"}],
        system="top",
        max_tokens=10,
        temperature=0.0,
        stream=True,
        tools=[{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        extra={"top_p": 0.5},
    )
    assert openai_body(request) == {
        "model": "gpt",
        "messages": [{"role": "system", "content": "top"}, {"role": "user", "content": "hi"}],
        "max_tokens": 10,
        "temperature": 0.0,
        "tools": [
            {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "top_p": 0.5,
    }
    assert openai_body(request, max_tokens_field="max_completion_tokens")["max_completion_tokens"] == 10


def test_anthropic_body_is_exact() -> None:
    request = ChatRequest(
        model="claude",
        messages=[{"role": "user", "content": "hi"}],
        system="top",
        temperature=0.2,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    )
    assert anthropic_body(request) == {
        "model": "claude",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        "system": "top",
        "temperature": 0.2,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    assert anthropic_body(request, default_max_tokens=7)["max_tokens"] == 7


def test_tool_definitions_convert_both_ways() -> None:
    openai_style = [
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    ]
    anthropic_style = anthropic_tools(openai_style)
    assert anthropic_style == [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]
    assert openai_tools(anthropic_style) == openai_style
    assert openai_tools(openai_style) == openai_style
    assert anthropic_tools(anthropic_style) == anthropic_style


def test_chat_request_dispatches_by_kind() -> None:
    for kind in ("openai", "openai-codex"):
        request = chat_request(kind, TRAVEL, model="m", max_tokens=5)
        assert request.system is None
        assert request.messages == to_openai_messages(TRAVEL)
        assert request_body(kind, request) == openai_body(request)
    request = chat_request("anthropic", TRAVEL, model="m")
    assert (request.system, request.messages) == to_anthropic_messages(TRAVEL)
    assert request_body("anthropic", request) == anthropic_body(request)


def test_an_unknown_kind_is_unknown_provider_kind_for_the_request_and_its_body() -> None:
    with pytest.raises(UnknownProviderKind) as made:
        chat_request("gemini", TRAVEL, model="m")
    with pytest.raises(UnknownProviderKind) as body:
        request_body("gemini", chat_request("openai", TRAVEL, model="m"))
    for caught in (made, body):
        assert caught.value.code == "UNKNOWN_PROVIDER_KIND" and caught.value.params == {"kind": "gemini"}
        assert str(caught.value) == "Unknown provider kind 'gemini'; expected one of openai, anthropic, openai-codex."


# -- properties ------------------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=12)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    counter = 0
    for step in draw(st.lists(st.sampled_from(["system", "user", "assistant", "tools"]), max_size=12)):
        if step != "tools":
            out.append(Message(step, draw(_text)))  # type: ignore[arg-type]
            continue
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            counter += 1
            arguments = draw(st.sampled_from(["", "{}", '{"q": 1}', "not json", "[1]"]))
            calls.append(ToolCall(f"call_{counter}", "tool", arguments))
        out.append(Message("assistant", draw(_text), tool_calls=tuple(calls)))
        results = [Message("tool", draw(_text), tool_call_id=c.id) for c in draw(st.permutations(calls))]
        if draw(st.booleans()):
            results.insert(draw(st.integers(0, len(results))), Message("system", "Summary.", source="summary"))
        out.extend(results)
    return out


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_anthropic_serialization_is_always_a_valid_request(messages: list[Message]) -> None:
    system, wire = to_anthropic_messages(messages)
    assert anthropic_problem(anthropic_body(ChatRequest("m", wire, system)), {"anthropic-version": "x"}) is None
    systems = [m.content for m in messages if m.role == "system" and isinstance(m.content, str) and m.content]
    assert system == ("\n\n".join(systems) if systems else None)
    uses = [b["id"] for m in wire if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    assert uses == [c.id for m in messages for c in m.tool_calls]


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_openai_serialization_keeps_every_message_and_link(messages: list[Message]) -> None:
    wire = to_openai_messages(messages)
    assert len(wire) == len(messages)
    assert [m["role"] for m in wire] == [m.role for m in messages]
    assert [m.get("tool_call_id") for m in wire] == [m.tool_call_id for m in messages]
    if wire:
        assert openai_problem({"model": "m", "messages": wire}) is None
