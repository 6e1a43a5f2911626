"""contextshift.integrations.pydantic_ai against the real Pydantic AI: the history processor and an agent run on
FunctionModel (M2, M3, S1-S8, G1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextshift import TokenBudgetExceeded, get_tokenizer
from contextshift.integrations.pydantic_ai import history_processor, process_history

from .histories import Event, histories


def part_cost(part: Any) -> int:
    if isinstance(part, ToolCallPart):
        return 10 + len(part.args_as_json_str()) // 4
    content = getattr(part, "content", "")
    return len(content if isinstance(content, str) else str(content)) // 4


def count(messages: Sequence[ModelMessage]) -> int:
    """The tests' counter: a quarter of each part's text, 10 a tool call and 4 a message."""
    return sum(4 + sum(map(part_cost, m.parts)) for m in messages)


def pai_history(events: list[Event]) -> list[ModelMessage]:
    """Request-side events (system, user, results) gather in one ModelRequest and response-side events in one
    ModelResponse; the final user message is a request of its own."""
    out: list[ModelMessage] = []
    parts: list[Any] = []
    side = ""

    def flush() -> None:
        if parts:
            out.append(ModelRequest(parts=list(parts)) if side == "request" else ModelResponse(parts=list(parts)))
            parts.clear()

    for n, event in enumerate(events):
        wanted = "response" if event.kind in ("assistant", "calls") else "request"
        if wanted != side or n == len(events) - 1:
            flush()
            side = wanted
        if event.kind == "system":
            parts.append(SystemPromptPart(event.text))
        elif event.kind == "user":
            parts.append(UserPromptPart(event.text))
        elif event.kind == "result":
            parts.append(ToolReturnPart("lookup", event.text, tool_call_id=event.call_ids[0]))
        elif event.kind == "assistant":
            parts.append(TextPart(event.text))
        else:
            parts.append(TextPart(event.text))
            parts.extend(ToolCallPart("lookup", {"q": event.text[:12]}, tool_call_id=c) for c in event.call_ids)
    flush()
    return out


def orphans(messages: Sequence[ModelMessage]) -> list[str]:
    calls = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    results = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    return sorted(calls ^ results)


def conversation() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[SystemPromptPart("S" * 40), UserPromptPart("a" * 80)]),  # 4 + 10 + 20 = 34
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1"),
                ToolCallPart("lookup", {"q": "y"}, tool_call_id="c2"),
            ]
        ),  # 4 + 2 * (10 + 2) = 28
        ModelRequest(parts=[ToolReturnPart("lookup", "r" * 40, tool_call_id="c1")]),  # 14
        ModelResponse(parts=[TextPart("b" * 40)]),  # 14: stands between the two results
        ModelRequest(parts=[ToolReturnPart("lookup", "r" * 40, tool_call_id="c2")]),  # 14
        ModelResponse(parts=[TextPart("c" * 40)]),  # 14
        ModelRequest(parts=[UserPromptPart("d" * 40)]),  # 14: the request being answered
    ]


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_a_history_that_fits_comes_back_as_the_very_same_objects() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart(["look", ImageUrl("https://x.test/a.png")])]),
        ModelResponse(parts=[ThinkingPart("hmm"), ToolCallPart("f", '{"x": 1}', tool_call_id="c1")], model_name="m"),
        ModelRequest(parts=[ToolReturnPart("f", {"answer": 42}, tool_call_id="c1")]),
        ModelResponse(parts=[ToolCallPart("f", {"x": 2}, tool_call_id="c2")]),
        ModelRequest(parts=[RetryPromptPart("bad x", tool_name="f", tool_call_id="c2")]),
        ModelResponse(parts=[TextPart("42")]),
        ModelRequest(parts=[UserPromptPart("thanks")]),
    ]
    processor = history_processor(max_tokens=10_000, token_counter=count)

    out = processor(list(messages))

    assert out == messages
    assert all(a is b for a, b in zip(out, messages, strict=True))
    assert processor.last_result is not None and processor.last_result.excluded == []


def test_the_oldest_messages_leave_first_and_both_results_go_with_their_calls() -> None:
    processor = history_processor(max_tokens=50, token_counter=count)
    messages = conversation()

    out = processor(messages)

    # The system prompt (4 + 10 = 14 as a request of its own) and the last request (14) stay; newest first
    # c 14 -> 42; the result of c2 belongs to the calls' group (28 + 14 + 14 = 56), which leaves whole; b (14)
    # would make 56: it leaves too, and so does the first user prompt, which is older.
    assert out[1:] == [messages[5], messages[6]]
    assert isinstance(out[0], ModelRequest) and out[0] is not messages[0]
    assert out[0].parts == [messages[0].parts[0]]  # the first request, rebuilt with its system prompt alone
    assert count(out) == 42
    assert orphans(out) == []
    assert processor.last_result is not None and processor.last_result.tokens == 42


def test_a_model_name_counts_with_contextshift_s_profile() -> None:
    messages = conversation()
    processor = history_processor(max_tokens=70, model="gpt-4o")

    out = processor(messages)

    result = processor.last_result
    assert result is not None
    assert result.tokens == get_tokenizer("gpt-4o").count_messages(result.kept) <= 70
    assert orphans(out) == [] and out[-1] is messages[-1] and len(out) < len(messages)


def test_summarize_adds_a_system_prompt_request_after_the_system_prompt() -> None:
    processor = history_processor(max_tokens=90, token_counter=count, strategy="summarize")

    out = processor(conversation())

    assert isinstance(out[1], ModelRequest) and isinstance(out[1].parts[0], SystemPromptPart)
    result = processor.last_result
    assert result is not None and len(result.truncated) == 1
    assert out[1].parts[0].content == result.truncated[0].replacement.text
    assert count(out) <= 90 and orphans(out) == []


def test_too_small_a_budget_is_refused_and_bad_arguments_before_counting() -> None:
    with pytest.raises(TokenBudgetExceeded):
        history_processor(max_tokens=20, token_counter=count)(conversation())
    with pytest.raises(ValueError, match="not both"):
        history_processor(max_tokens=20, token_counter=count, model="gpt-4o")
    with pytest.raises(ValueError, match="no ids to pin"):
        history_processor(max_tokens=20, pinned_ids=["x"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=histories(), share=st.floats(0.0, 1.2), strategy=st.sampled_from(["truncate", "summarize", "recall"]))
def test_random_histories_never_split_a_tool_call_from_its_return_and_fit_the_budget(
    events: list[Event], share: float, strategy: str
) -> None:
    messages = pai_history(events)
    system = ModelRequest(parts=[p for p in messages[0].parts if isinstance(p, SystemPromptPart)])
    floor = count([system, messages[-1]])
    budget = floor + int(share * (count(messages) - floor))
    processor = history_processor(max_tokens=budget, token_counter=count, strategy=strategy)

    out = processor(list(messages))

    assert orphans(out) == []
    assert count(out) <= budget
    assert isinstance(out[-1], ModelRequest) and out[-1] is messages[-1]
    assert [p for p in out[0].parts if isinstance(p, SystemPromptPart)] == system.parts
    if count(messages) <= budget:
        assert out == messages


def long_history(turns: int) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for n in range(turns):
        out.append(ModelRequest(parts=[UserPromptPart(f"question {n} " + "words " * 20)]))
        out.append(ModelResponse(parts=[ToolCallPart("lookup", {"q": str(n)}, tool_call_id=f"old{n}")]))
        out.append(ModelRequest(parts=[ToolReturnPart("lookup", "answer " * 25, tool_call_id=f"old{n}")]))
        out.append(ModelResponse(parts=[TextPart(f"reply {n} " + "text " * 15)]))
    return out


@pytest.mark.parametrize("strategy", ["truncate", "summarize"])
def test_an_agent_run_on_function_model_is_fitted_before_every_model_request(strategy: str) -> None:
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        rounds = len(received)
        if rounds <= 2:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": f"new{rounds}"}, tool_call_id=f"new{rounds}")])
        return ModelResponse(parts=[TextPart("All done.")])

    capability = process_history(max_tokens=400, token_counter=count, strategy=strategy)
    assert isinstance(capability, ProcessHistory)
    agent = Agent(FunctionModel(model), system_prompt="You answer questions.", capabilities=[capability])

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q} " + "detail " * 30

    history = long_history(40)
    result = agent.run_sync("and now the new question?", message_history=history)

    assert result.output == "All done."
    assert len(received) == 3
    for sent in received:
        assert count(sent) <= 400
        assert orphans(sent) == []
        assert len(sent) < len(history)
        assert any(
            isinstance(p, UserPromptPart) and p.content == "and now the new question?" for m in sent for p in m.parts
        )
    assert any(isinstance(p, ToolReturnPart) and p.tool_call_id == "new2" for p in received[-1][-1].parts)
    last = capability.processor.last_result
    assert last is not None and (last.truncated if strategy == "summarize" else last.excluded)
    if strategy == "summarize":  # the first request carries the summary of the history it dropped
        assert any(
            isinstance(p, SystemPromptPart) and p.content.startswith("[Summary") for m in received[0] for p in m.parts
        )
