"""S5/M2: results are frozen, and their kept messages go back to a provider in one call."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import contextshift
from contextshift import Message, ShiftResult, StrategyRequest, Truncation, shift_context, shift_with_strategy

#: The keys OpenAI Chat Completions accepts on a message of each role.
OPENAI_KEYS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "tool_call_id"},
}

CONVERSATION: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "content": "Be brief.", "source": "system"},
    {"id": "u1", "role": "user", "content": "Weather?", "pinned": True, "meta": {"k": 1}},
    {
        "id": "a1",
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    },
    {"id": "t1", "role": "tool", "tool_call_id": "c1", "content": "sunny", "workspace": "w"},
    {"id": "u2", "role": "user", "content": "Thanks", "source": "input", "relevance": 0.5},
]


def _result() -> ShiftResult:
    return shift_context(CONVERSATION, lambda s: len(s) // 4, 1000)


def test_a_result_cannot_be_changed_after_it_is_made() -> None:
    result = _result()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.tokens = -5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.kept = []  # type: ignore[misc]
    truncation = Truncation(Message.system("s", id="x"), ["a"], 10, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        truncation.tokens_after = 1  # type: ignore[misc]
    request = StrategyRequest(messages=[], count_tokens=len, budget=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.budget = 2  # type: ignore[misc]


def test_a_strategy_result_is_frozen_too() -> None:
    result = shift_with_strategy(CONVERSATION, lambda s: len(s) // 4, 1000, strategy="summarize")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.strategy = "other"  # type: ignore[misc]


def test_to_openai_keeps_only_the_keys_the_api_accepts() -> None:
    wire = _result().to_openai()
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "user"]
    for message in wire:
        assert set(message) <= OPENAI_KEYS[message["role"]], message
    assert wire[2]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    ]
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert contextshift.to_openai_messages(_result().kept) == wire


def test_to_anthropic_gives_the_system_text_and_alternating_turns() -> None:
    system, wire = _result().to_anthropic()
    assert system == "Be brief."
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"] == [{"type": "tool_use", "id": "c1", "name": "weather", "input": {}}]
    assert {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"} in wire[2]["content"]
    assert contextshift.to_anthropic_messages(_result().kept) == (system, wire)


def test_the_excluded_of_a_message_prompt_equal_pickle_and_copy_as_a_list() -> None:
    import copy
    import pickle

    messages = [Message.from_dict(d) for d in CONVERSATION]
    filler = [Message(role="user", content="word " * 40, id=f"f{i}") for i in range(6)]
    result = shift_context([messages[0], *filler, *messages[1:]], lambda s: len(s) // 4, 60)
    dropped = [m for m in filler if result.reasons[m.id] == "context-shift"]
    assert dropped and result.excluded == dropped and list(result.excluded) == dropped
    assert result.excluded[0] is dropped[0] and result.excluded[-1:] == dropped[-1:]
    for made in (pickle.loads(pickle.dumps(result.excluded)), copy.deepcopy(result.excluded)):
        assert made == dropped and type(made) is list
    with pytest.raises(TypeError):
        result.excluded[0] = dropped[0]  # type: ignore[index]


def test_results_built_from_one_prompt_have_reasons_of_their_own() -> None:
    from contextshift.core.shifting import Prompt, build_result, shift_prompt

    prompt = Prompt([Message.from_dict(d) for d in CONVERSATION], lambda s: len(s) // 4)
    first = build_result(prompt, shift_prompt(prompt, 1000), 1000)
    second = build_result(prompt, shift_prompt(prompt, 1000), 1000)
    assert first.reasons == second.reasons and first.reasons is not second.reasons
    first.reasons["u2"] = "changed"
    assert second.reasons["u2"] == "protected"
    assert shift_context(CONVERSATION, lambda s: len(s) // 4, 1000).reasons["u2"] == "protected"


def test_the_positions_a_shift_drops_read_like_their_list() -> None:
    import copy
    import pickle
    import random

    from contextshift.core.shifting import Span

    rng = random.Random(12)
    for _ in range(300):
        start = rng.randint(0, 20)
        span = range(start, rng.randint(start, 50))
        gaps = set(rng.sample(range(-3, 55), rng.randint(0, 6)))
        positions = Span(span, gaps)
        listed = [p for p in span if p not in gaps]
        assert list(positions) == listed and len(positions) == len(listed)
        assert positions == listed and listed == positions and positions != [*listed, 99]
        assert [positions[i] for i in range(len(listed))] == listed
        assert [positions[i - len(listed)] for i in range(len(listed))] == listed
        assert positions[1:-1] == listed[1:-1] and positions[::-1] == listed[::-1]
        assert all((p in positions) == (p in listed) for p in range(-3, 55))
        assert pickle.loads(pickle.dumps(positions)) == listed and type(copy.deepcopy(positions)) is list
        with pytest.raises(IndexError):
            positions[len(listed)]
