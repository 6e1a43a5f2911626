"""contextshift.integrations.langchain against the real LangChain: shift_messages, the create_agent middleware
and the LangGraph pre_model_hook (M2, M3, S1-S8, G1)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

from contextshift import TokenBudgetExceeded, get_tokenizer
from contextshift.integrations.langchain import (
    ContextShiftMiddleware,
    MessageShifter,
    pre_model_hook,
    shift_messages,
    to_message,
)

from .histories import Event, histories


def cost(message: BaseMessage) -> int:
    """The tests' per-message counter: a quarter of the text, 4 a message and 10 a tool call."""
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return len(str(message.content)) // 4 + 4 + 10 * len(calls)


def per_message(message: BaseMessage) -> int:
    return cost(message)


def count(messages: Sequence[BaseMessage]) -> int:
    """The same counter on a list (what trim_messages calls a list counter), plus 3 to prime the reply."""
    return sum(map(cost, messages)) + 3


def lumpy(messages: Sequence[BaseMessage]) -> int:
    """A counter that charges a list more than its messages one by one: one more token per three messages."""
    return sum(map(cost, messages)) + len(messages) // 3


def lc_history(events: list[Event]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n, event in enumerate(events):
        if event.kind == "system":
            out.append(SystemMessage(event.text, id=f"m{n}"))
        elif event.kind == "user":
            out.append(HumanMessage(event.text, id=f"m{n}"))
        elif event.kind == "assistant":
            out.append(AIMessage(event.text, id=f"m{n}"))
        elif event.kind == "calls":
            calls = [{"name": "lookup", "args": {"q": event.text[:20]}, "id": c} for c in event.call_ids]
            out.append(AIMessage(event.text, tool_calls=calls, id=f"m{n}"))
        else:
            out.append(ToolMessage(event.text, tool_call_id=event.call_ids[0], id=f"m{n}"))
    return out


def orphans(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool call ids without their result, and results without their call."""
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return sorted(str(i) for i in calls ^ results)


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("S" * 40, id="sys"),  # 10 + 4 = 14
        HumanMessage("a" * 80, id="u1"),  # 20 + 4 = 24
        AIMessage(
            "",
            id="a1",
            tool_calls=[
                {"name": "lookup", "args": {"q": "x"}, "id": "c1"},
                {"name": "lookup", "args": {"q": "y"}, "id": "c2"},
            ],
        ),  # 0 + 4 + 20 = 24
        ToolMessage("r" * 40, tool_call_id="c1", id="t1"),  # 14
        HumanMessage("b" * 40, id="u2"),  # 14: stands between the two results
        ToolMessage("r" * 40, tool_call_id="c2", id="t2"),  # 14
        AIMessage("c" * 40, id="a2"),  # 14
        HumanMessage("d" * 40, id="u3"),  # 14: the current input
    ]


# -- shift_messages -------------------------------------------------------------------------------------------


def test_a_history_that_fits_comes_back_as_the_very_same_objects() -> None:
    messages = [
        SystemMessage("be brief", id="s", additional_kwargs={"cache": True}),
        HumanMessage("hi", id="h", name="ann", response_metadata={"k": 1}),
        AIMessage(
            [{"type": "text", "text": "checking"}],
            id="a",
            tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}],
            additional_kwargs={"refusal": None},
            usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        ),
        ToolMessage("42", tool_call_id="c1", artifact={"raw": [4, 2]}, status="success"),
        HumanMessage("thanks"),
    ]
    snapshot = [m.model_copy(deep=True) for m in messages]
    shifter = MessageShifter(max_tokens=10_000, token_counter=count)

    out = shifter(messages)

    assert out == snapshot
    assert all(a is b for a, b in zip(out, messages, strict=True))
    assert messages == snapshot  # nothing given was changed
    assert shifter.last_result is not None and shifter.last_result.excluded == []
    assert shifter.last_result.tokens == count(messages)


def test_the_oldest_group_leaves_first_and_a_call_leaves_with_both_of_its_results() -> None:
    shifter = MessageShifter(max_tokens=80, token_counter=count)

    out = shifter(conversation())

    # 3 + 14 (sys) + 14 (u3, protected) = 31; newest first: a2 14 -> 45, t2's group (a1, t1, t2 = 52) does not
    # fit, so it leaves whole and u2 (14 -> 59) stays; u1 is older than the group and leaves too.
    assert [m.id for m in out] == ["sys", "u2", "a2", "u3"]
    assert count(out) == 59
    result = shifter.last_result
    assert result is not None
    assert result.tokens == 59 and result.budget == 80
    assert result.reasons == {
        "sys": "protected",
        "u1": "context-shift",
        "a1": "context-shift",
        "t1": "context-shift",
        "u2": "fit",
        "t2": "context-shift",
        "a2": "fit",
        "u3": "protected",
    }


@pytest.mark.parametrize(
    "counter",
    [count, per_message, "approximate", len],
    ids=["list counter", "per-message counter", "approximate", "len counts messages"],
)
def test_every_counter_trim_messages_takes_is_taken_and_decides_the_budget(counter: Any) -> None:
    from langchain_core.messages.utils import count_tokens_approximately

    budget = 5 if counter is len else 80
    out = shift_messages(conversation(), max_tokens=budget, token_counter=counter)

    measure = {len: len, "approximate": count_tokens_approximately}.get(counter, count)
    assert measure(out) <= budget
    assert out[0].id == "sys" and out[-1].id == "u3"
    assert orphans(out) == []


def test_a_chat_model_counts_with_its_own_get_num_tokens_from_messages() -> None:
    class Counting(GenericFakeChatModel):
        calls: list[int] = Field(default_factory=list)

        def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
            self.calls.append(len(messages))
            return count(messages)

    model = Counting(messages=iter([]))
    out = shift_messages(conversation(), max_tokens=80, token_counter=model)

    assert [m.id for m in out] == ["sys", "u2", "a2", "u3"]
    assert model.calls and max(model.calls) == 4  # the last call counted the fitted list as a whole


def test_a_counter_that_charges_lists_more_is_met_by_fitting_again() -> None:
    shifter = MessageShifter(max_tokens=56, token_counter=lumpy)

    out = shifter(conversation())

    # One by one sys 14 + u2 14 + a2 14 + u3 14 = 56 fits, but the counter charges the list of four 57: the fit
    # runs again with the budget 55, and u2 leaves (three messages: 42 + 1 = 43).
    assert [m.id for m in out] == ["sys", "a2", "u3"]
    result = shifter.last_result
    assert result is not None and result.tokens == lumpy(out) == 43 and result.budget == 56
    assert result.diagnostics[-1].endswith("fitted again to 55 tokens")


def test_a_model_name_counts_with_contextshift_s_profile_for_it() -> None:
    profile = get_tokenizer("gpt-4o")
    shifter = MessageShifter(max_tokens=60, model="gpt-4o")

    out = shifter(conversation())

    converted = [to_message(m, str(m.id)) for m in out]
    assert profile.count_messages(converted) <= 60
    assert shifter.last_result is not None and shifter.last_result.tokens == profile.count_messages(converted)
    assert orphans(out) == [] and out[0].id == "sys" and out[-1].id == "u3"


def test_summarize_puts_a_system_message_after_the_system_prompt_naming_what_it_replaces() -> None:
    shifter = MessageShifter(max_tokens=80, token_counter=count, strategy="summarize")

    out = shifter(conversation())

    assert out[0].id == "sys"
    summary = out[1]
    assert isinstance(summary, SystemMessage)
    result = shifter.last_result
    assert result is not None and len(result.truncated) == 1
    assert summary.content == result.truncated[0].replacement.text
    assert summary.response_metadata["contextshift_summary_of"] == result.truncated[0].source_ids
    assert count(out) <= 80 and orphans(out) == []


def test_pinned_ids_stay_and_without_system_among_protected_roles_the_system_prompt_may_go() -> None:
    out = shift_messages(conversation(), max_tokens=60, token_counter=count, pinned_ids=["u1"])
    assert [m.id for m in out] == ["sys", "u1", "u3"]

    out = shift_messages(conversation(), max_tokens=40, token_counter=count, protected_roles=[])
    assert [m.id for m in out] == ["a2", "u3"]


def test_too_small_a_budget_for_the_system_prompt_and_input_is_refused_with_its_code() -> None:
    with pytest.raises(TokenBudgetExceeded) as caught:
        shift_messages(conversation(), max_tokens=20, token_counter=count)
    assert caught.value.code == "TOKEN_BUDGET_EXCEEDED"
    assert caught.value.budget == 20


def test_bad_arguments_are_refused_before_anything_is_counted() -> None:
    with pytest.raises(ValueError, match="not both"):
        MessageShifter(max_tokens=10, token_counter=count, model="gpt-4o")
    with pytest.raises(ValueError, match="positive"):
        MessageShifter(max_tokens=0)
    with pytest.raises(ValueError, match="unknown protected role"):
        MessageShifter(max_tokens=10, protected_roles=["human"])
    with pytest.raises(ValueError, match="shortcut"):
        MessageShifter(max_tokens=10, token_counter="exact")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=histories(),
    share=st.floats(0.0, 1.2),
    use_lumpy=st.booleans(),
    strategy=st.sampled_from(["truncate", "summarize", "recall"]),
)
def test_random_histories_never_orphan_a_tool_message_and_fit_by_the_same_counter(
    events: list[Event], share: float, use_lumpy: bool, strategy: str
) -> None:
    messages = lc_history(events)
    counter = lumpy if use_lumpy else count
    floor = counter([messages[0], messages[-1]])
    budget = floor + int(share * (counter(messages) - floor))
    shifter = MessageShifter(max_tokens=budget, token_counter=counter, strategy=strategy)

    out = shifter(messages)

    assert orphans(out) == []
    assert counter(out) <= budget
    assert out[0] is messages[0] and out[-1] is messages[-1]
    originals = [m for m in out if any(m is o for o in messages)]
    assert [messages.index(m) for m in originals] == sorted(messages.index(m) for m in originals)
    if counter(messages) <= budget:
        assert out == messages


# -- create_agent middleware and the LangGraph hook --------------------------------------------------------------


class RecordingModel(GenericFakeChatModel):
    """LangChain's fake chat model, recording every list of messages it is sent and accepting tools."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingModel:
        return self


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q} " + "detail " * 30


def replies() -> Iterator[AIMessage]:
    yield AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "a"}, "id": "new1"}])
    yield AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "b"}, "id": "new2"}])
    yield AIMessage("All done.")


def long_history(turns: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n in range(turns):
        out.append(HumanMessage(f"question {n} " + "words " * 20))
        out.append(AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": str(n)}, "id": f"old{n}"}]))
        out.append(ToolMessage("answer " * 25, tool_call_id=f"old{n}"))
        out.append(AIMessage(f"reply {n} " + "text " * 15))
    out.append(HumanMessage("and now the new question?"))
    return out


def test_the_middleware_fits_every_model_call_of_a_create_agent_run_and_the_state_keeps_everything() -> None:
    model = RecordingModel(messages=replies())
    middleware = ContextShiftMiddleware(max_tokens=300, token_counter=count)
    agent = create_agent(model, tools=[lookup], system_prompt="You answer questions.", middleware=[middleware])
    history = long_history(40)

    state = agent.invoke({"messages": history})

    assert len(model.received) == 3  # three model calls: two tool rounds and the answer
    for sent in model.received:
        assert isinstance(sent[0], SystemMessage) and sent[0].content == "You answer questions."
        assert count(sent) <= 300
        assert orphans(sent) == []
        assert sent[len(sent) - 1 - [type(m) for m in reversed(sent)].index(HumanMessage)].content == (
            "and now the new question?"
        )
        assert len(sent) < len(history)
    assert model.received[-1][-1].tool_call_id == "new2"  # the newest tool round is sent
    assert state["messages"][-1].content == "All done."
    assert len(state["messages"]) == len(history) + 5  # nothing stored was dropped
    assert middleware.last_result is not None and middleware.last_result.tokens <= 300
    assert middleware.last_result.excluded


async def test_the_middleware_fits_async_runs_too() -> None:
    model = RecordingModel(messages=replies())
    middleware = ContextShiftMiddleware(max_tokens=300, token_counter=count, strategy="summarize")
    agent = create_agent(model, tools=[lookup], system_prompt="You answer questions.", middleware=[middleware])

    state = await agent.ainvoke({"messages": long_history(40)})

    assert state["messages"][-1].content == "All done."
    for sent in model.received:
        assert count(sent) <= 300 and orphans(sent) == []
        assert isinstance(sent[1], SystemMessage) and "Summary" in str(sent[1].content)


def test_the_langgraph_pre_model_hook_fits_the_llm_input_and_leaves_the_state_alone() -> None:
    from langgraph.prebuilt import create_react_agent

    model = RecordingModel(messages=replies())
    hook = pre_model_hook(max_tokens=300, token_counter=count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
        graph = create_react_agent(model, [lookup], pre_model_hook=hook)
    history = [SystemMessage("You answer questions."), *long_history(40)]

    state = graph.invoke({"messages": history})

    assert len(model.received) == 3
    for sent in model.received:
        assert count(sent) <= 300 and orphans(sent) == []
        assert sent[0].content == "You answer questions."
    assert len(state["messages"]) == len(history) + 5
    assert hook.last_result is not None and hook.last_result.excluded
    assert json.dumps(hook({"messages": history[:3]})["llm_input_messages"][0].content) == json.dumps(
        "You answer questions."
    )
