"""contextshift.integrations.openai_agents against the real Agents SDK: FittedSession, the model-input filter and
a run on OpenAIChatCompletionsModel talking to a fake provider over a local socket (M2, M3, S1-S8, G1)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, SQLiteSession, function_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import AsyncOpenAI

from contextshift import TokenBudgetExceeded
from contextshift.integrations.openai_agents import FittedSession, ItemFitter, fit_model_input
from tests.fakes import FakeProvider, FakeToolCall, Reply

from .histories import Event, histories


def text_of(item: Any) -> str:
    for key in ("content", "output", "arguments"):
        value = item.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return " ".join(str(p.get("text", "")) for p in value)
    return " ".join(str(p.get("text", "")) for p in item.get("summary", []))


def cost(item: Any) -> int:
    return len(text_of(item)) // 4 + 4 + (10 if item.get("type") == "function_call" else 0)


def count(items: Sequence[Any]) -> int:
    """The tests' counter: a quarter of an item's text, 4 an item and 10 a function call."""
    return sum(map(cost, items))


def items_of(events: list[Event], reasoning: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, event in enumerate(events):
        if event.kind in ("system", "user"):
            out.append({"role": event.kind, "content": event.text})
        elif event.kind == "assistant":
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{n}",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": event.text, "annotations": []}],
                }
            )
        elif event.kind == "calls":
            if reasoning:
                out.append({"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "hm"}]})
            for call_id in event.call_ids:
                arguments = json.dumps({"q": event.text[:12]})
                out.append({"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": arguments})
        else:
            out.append({"type": "function_call_output", "call_id": event.call_ids[0], "output": event.text})
    return out


def orphans(items: Sequence[Any]) -> list[str]:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    return sorted(calls ^ outputs)


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "S" * 40},  # 14
        {"role": "user", "content": "a" * 80},  # 24
        {"type": "reasoning", "id": "rs_1", "summary": []},  # 4: goes with the call after it
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "x" * 40},  # 24
        {"type": "function_call_output", "call_id": "c1", "output": "r" * 40},  # 14
        {"type": "message", "role": "assistant", "id": "m1", "content": [{"type": "output_text", "text": "b" * 40}]},
        {"role": "user", "content": "d" * 40},  # 14: the current input
    ]


def test_items_that_fit_come_back_as_the_very_same_objects() -> None:
    items = conversation()
    fitter = ItemFitter(max_tokens=10_000, token_counter=count)

    out = fitter.fit(items)

    assert out == conversation()
    assert all(a is b for a, b in zip(out, items, strict=True))
    assert fitter.last_result is not None and fitter.last_result.tokens == count(items) == 108


def test_a_reasoning_item_leaves_with_the_call_after_it_and_the_call_with_its_output() -> None:
    fitter = ItemFitter(max_tokens=60, token_counter=count)

    out = fitter.fit(conversation())

    # system 14 + input 14 = 28; the assistant message 14 -> 42; reasoning + call + output (42) do not fit.
    assert [i.get("id", i.get("role")) for i in out] == ["system", "m1", "user"]
    assert count(out) == 42
    result = fitter.last_result
    assert result is not None
    assert result.reasons["rs_1"] == result.reasons["item-3"] == result.reasons["item-4"] == "context-shift"


def test_summarize_adds_a_system_item_after_the_system_messages() -> None:
    fitter = ItemFitter(max_tokens=70, token_counter=count, strategy="summarize")

    out = fitter.fit(conversation())

    assert out[0] == {"role": "system", "content": "S" * 40}
    assert out[1]["role"] == "system" and out[1]["content"].startswith("[Summary")
    assert count(out) <= 70 and orphans(out) == []


def test_too_small_a_budget_is_refused() -> None:
    with pytest.raises(TokenBudgetExceeded):
        ItemFitter(max_tokens=20, token_counter=count).fit(conversation())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=histories(),
    share=st.floats(0.0, 1.2),
    reasoning=st.booleans(),
    strategy=st.sampled_from(["truncate", "summarize", "recall"]),
)
def test_random_histories_never_orphan_a_function_call_or_a_reasoning_item(
    events: list[Event], share: float, reasoning: bool, strategy: str
) -> None:
    items = items_of(events, reasoning)
    floor = count([items[0], items[-1]])
    budget = floor + int(share * (count(items) - floor))
    fitter = ItemFitter(max_tokens=budget, token_counter=count, strategy=strategy)

    out = fitter.fit(items)

    assert orphans(out) == []
    assert count(out) <= budget
    assert out[0] is items[0] and out[-1] is items[-1]
    for at, item in enumerate(out):
        if item.get("type") == "reasoning":  # still followed by the item it preceded
            assert out[at + 1] is items[items.index(item) + 1]
    if count(items) <= budget:
        assert out == items


def stored_history(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(turns):
        out.append({"role": "user", "content": f"question {n} " + "words " * 20})
        out.append({"type": "function_call", "call_id": f"old{n}", "name": "lookup", "arguments": json.dumps({"q": n})})
        out.append({"type": "function_call_output", "call_id": f"old{n}", "output": "answer " * 25})
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_old{n}",
                "status": "completed",
                "content": [{"type": "output_text", "text": "reply " * 15, "annotations": []}],
            }
        )
    return out


async def test_a_fitted_session_fits_what_it_reads_and_stores_everything() -> None:
    inner = SQLiteSession("s1")
    await inner.add_items(stored_history(30))
    session = FittedSession(inner, max_tokens=300, token_counter=count)

    fitted = await session.get_items()

    assert count(fitted) <= 300 and orphans(fitted) == []
    assert fitted == (await inner.get_items())[-len(fitted) :]
    assert len(await inner.get_items()) == 120
    assert await session.get_items(limit=2) == (await inner.get_items())[-2:]  # a tail read is plain
    await session.add_items([{"role": "user", "content": "more"}])
    assert len(await inner.get_items()) == 121
    assert await session.pop_item() == {"role": "user", "content": "more"}
    assert session.session_id == "s1" and session.last_result is not None
    await session.clear_session()
    assert await inner.get_items() == []


async def test_an_agent_run_over_a_local_socket_is_fitted_before_every_model_call(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.script(
        Reply(tool_calls=[FakeToolCall("new1", "lookup", {"q": "a"})], finish_reason="tool_calls"),
        Reply(tool_calls=[FakeToolCall("new2", "lookup", {"q": "b"})], finish_reason="tool_calls"),
        Reply("All done."),
    )

    @function_tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q} " + "detail " * 30

    client = AsyncOpenAI(base_url=fake_provider.base_url, api_key="sk-test")
    agent = Agent(
        name="helper",
        instructions="You answer questions.",
        model=OpenAIChatCompletionsModel(model="fake-model", openai_client=client),
        tools=[lookup],
    )
    inner = SQLiteSession("run")
    await inner.add_items(stored_history(40))
    session = FittedSession(inner, max_tokens=2_000, token_counter=count)
    per_call = fit_model_input(max_tokens=400, token_counter=count)

    result = await Runner.run(
        agent,
        "and now the new question?",
        session=session,
        run_config=RunConfig(call_model_input_filter=per_call, tracing_disabled=True),
    )

    assert result.final_output == "All done."
    assert len(fake_provider.requests) == 3
    for request in fake_provider.requests:
        sent = request.messages
        assert request.rejected is None
        assert sent[0] == {"role": "system", "content": "You answer questions."}
        assert len(sent) < 160
        calls = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        assert calls == {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert any(m["role"] == "user" and m["content"] == "and now the new question?" for m in sent)
    assert fake_provider.requests[-1].messages[-1]["tool_call_id"] == "new2"
    assert per_call.last_result is not None and per_call.last_result.tokens <= 400
    assert session.last_result is not None and session.last_result.tokens <= 2_000
    stored = await inner.get_items()
    # the history, the input, two rounds of the fake's echo text + call + output, the answer: nothing dropped
    assert len(stored) == 160 + 1 + 2 * 3 + 1


async def test_a_summary_is_read_from_a_fitted_session_but_never_stored() -> None:
    inner = SQLiteSession("s2")
    await inner.add_items(stored_history(30))
    session = FittedSession(inner, max_tokens=600, token_counter=count, strategy="summarize")

    fitted = await session.get_items()

    assert fitted[0]["role"] == "system" and fitted[0]["content"].startswith("[Summary")
    assert count(fitted) <= 600 and orphans(fitted) == []
    result = session.last_result
    assert result is not None and len(result.truncated) == 1
    stored = await inner.get_items()
    assert len(stored) == 120 and all(not str(i.get("content", "")).startswith("[Summary") for i in stored)
