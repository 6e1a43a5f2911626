"""P1-P5 and G7 through the pipeline: the reference product's pipeline cases (13.3), adapted."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from contextshift import ContextStrategyRegistry, Message, ShiftResult, get_tokenizer
from contextshift.core.request import StrategyRequest
from contextshift.core.tokens import ChatFormatProfile
from contextshift.core.vocabulary import SUMMARY_HEADER
from contextshift.pipeline import (
    AuthorNote,
    InterceptorContext,
    LoreEntry,
    MemoryItem,
    PipelineRequest,
    PromptBudgetExceeded,
    Sources,
    run_pipeline,
)


class ExactTestProfile(ChatFormatProfile):
    """ceil(len/4) + 4 a message and no priming: the reference tests' arithmetic, marked exact."""

    tokens_per_message = 4
    reply_priming = 0

    def __init__(self) -> None:
        super().__init__("test-exact", approximate=False)

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / 4)


EXACT = ExactTestProfile()


def history(*items: tuple[str, str, str]) -> list[Message]:
    return [Message(id=i, role=r, content=c, source="history") for i, r, c in items]  # type: ignore[arg-type]


def request(sources: Sources, **overrides: object) -> PipelineRequest:
    settings: dict[str, object] = {"profile": EXACT, "context_limit": 40, "response_reserve": 10}
    settings.update(overrides)
    return PipelineRequest(sources=sources, **settings)  # type: ignore[arg-type]


class Appender:
    name = "appender"
    priority = 100

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]:
        self.seen = [m.id for m in messages]
        return [*messages, Message(role="system", content="plugin " * 80, id="plugin-block", pinned=True)]


def test_shifting_runs_before_interceptors_and_the_final_shift_drops_their_additions_first() -> None:
    appender = Appender()
    sources = Sources(history=history(("old", "user", "old " * 80), ("recent", "user", "recent")), user_input="now")
    result = run_pipeline(request(sources, interceptors=[appender]))
    assert "old" not in appender.seen
    ids = [m.id for m in result.messages]
    assert "plugin-block" not in ids
    assert ids == ["recent", "core.current-input"]
    assert result.tokenizer == {"profile": "test-exact", "approximate": False}
    assert result.budget == {"context_limit": 40, "response_reserve": 10, "prompt_tokens": 11}
    entries = {e.identifier: e for e in result.entries}
    assert entries["old"].reason == "context-shift" and not entries["old"].included
    assert entries["plugin-block"].reason == "final-budget"
    assert any("final budget enforcement excluded 1" in d for d in result.diagnostics)


def test_summarize_through_the_pipeline_keeps_a_summary_that_fits() -> None:
    sources = Sources(
        history=history(
            ("h1", "user", "remember the red door " * 20), ("h2", "assistant", "remember the blue key " * 20)
        ),
        user_input="continue",
    )
    result = run_pipeline(request(sources, context_limit=70, response_reserve=20, strategy="summarize"))
    assert result.context_strategy == "summarize"
    assert any(SUMMARY_HEADER in m.text for m in result.messages)
    assert any("context summary created" in d for d in result.diagnostics)
    assert result.budget["prompt_tokens"] <= 50
    summary = next(e for e in result.entries if e.stands_for)
    assert summary.stands_for == ["h1", "h2"] and summary.included and summary.source == "summary"
    assert {e.identifier: e.reason for e in result.entries}["h1"] == "summarized"


def test_an_unsafe_plugin_strategy_is_rejected_and_the_input_survives() -> None:
    registry = ContextStrategyRegistry()

    def empty(req: StrategyRequest) -> ShiftResult:
        return ShiftResult(kept=[], excluded=list(req.messages), truncated=[], tokens=0, reasons={})

    registry.register("test.empty", empty)
    sources = Sources(history=history(("old", "user", "old " * 10)), user_input="now")
    result = run_pipeline(request(sources, strategy="test.empty", registry=registry))
    assert "core.current-input" in [m.id for m in result.messages]
    assert result.context_strategy == "truncate"
    assert any("rejected" in d for d in result.diagnostics)


def test_required_lore_over_the_budget_fails_with_the_pipeline_figures() -> None:
    lore = [LoreEntry(id="req", content="required " * 100, constant=True)]
    with pytest.raises(PromptBudgetExceeded) as caught:
        run_pipeline(request(Sources(lore=lore, user_input="now"), context_limit=20, response_reserve=10))
    assert caught.value.code == "TOKEN_BUDGET_EXCEEDED"
    assert caught.value.params == {"context_limit": 20, "response_reserve": 10, "prompt_tokens": 234}


def test_the_reply_reserve_is_the_larger_of_the_setting_and_max_tokens() -> None:
    sources = Sources(history=history(("older", "user", "older " * 30)), user_input="now")
    result = run_pipeline(request(sources, context_limit=60, response_reserve=10, max_tokens=30))
    assert result.max_tokens == 30
    assert result.budget["response_reserve"] == 30
    assert result.budget["prompt_tokens"] == 5


def test_a_budget_of_zero_or_less_fails_at_once() -> None:
    with pytest.raises(PromptBudgetExceeded) as caught:
        run_pipeline(request(Sources(user_input="hi"), context_limit=100, response_reserve=100))
    assert caught.value.params["prompt_tokens"] == 0


def test_an_already_persisted_current_input_is_protected() -> None:
    sources = Sources(
        history=history(("old", "user", "old " * 80), ("current", "user", "the current request must survive"))
    )
    result = run_pipeline(request(sources, context_limit=35, response_reserve=15))
    assert [m.id for m in result.messages] == ["current"]
    assert result.budget["prompt_tokens"] == 12
    assert {e.identifier: e.reason for e in result.entries}["current"] == "protected"


def test_the_default_tokenizer_is_reported_as_approximate() -> None:
    result = run_pipeline(request(Sources(user_input="hello"), profile=get_tokenizer(None)))
    assert result.tokenizer == {"profile": "approximate", "approximate": True}
    assert 'tokenizer "approximate" is approximate' in result.diagnostics


def test_a_throwing_interceptor_is_skipped_with_a_diagnostic() -> None:
    class Broken:
        name = "broken-hook"
        priority = 10

        def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]:
            raise RuntimeError("boom")

    result = run_pipeline(request(Sources(user_input="hi"), interceptors=[Broken()]))
    assert [m.id for m in result.messages] == ["core.current-input"]
    assert any("broken-hook" in d and "skipped" in d for d in result.diagnostics)


def test_protected_messages_an_interceptor_removes_are_restored_in_place() -> None:
    class Eraser:
        name = "eraser"
        priority = 10

        def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]:
            return []

    sources = Sources(system_prompt="Be kind.", history=history(("h1", "user", "hello")), user_input="now")
    result = run_pipeline(request(sources, interceptors=[Eraser()]))
    assert [m.id for m in result.messages] == ["core.system-prompt", "core.current-input"]
    assert {e.identifier: e.reason for e in result.entries}["h1"] == "interceptor"


def test_interceptor_additions_are_never_protected_and_edits_to_protected_blocks_are_undone() -> None:
    class Sneaky:
        name = "sneaky"
        priority = 10

        def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]:
            edited = [
                Message(role=m.role, content="OBEY", id=m.id, source=m.source) if m.protected else m for m in messages
            ]
            return [*edited, Message(role="system", content="x", source="system", pinned=True)]

    result = run_pipeline(request(Sources(system_prompt="Be kind.", user_input="now"), interceptors=[Sneaky()]))
    by_id = {m.id: m for m in result.messages}
    assert by_id["core.system-prompt"].content == "Be kind."
    added = by_id["plugin.sneaky"]
    assert added.pinned is False and added.protected is False


def test_audit_entries_show_skipped_blocks_with_their_reasons_in_template_order() -> None:
    lore = [
        LoreEntry(id="off", content="disabled lore", keys=("door",), enabled=False),
        LoreEntry(id="door", content="The red door is locked.", keys=("door", "red")),
        LoreEntry(id="sea", content="The sea is calm.", keys=("sea",)),
    ]
    sources = Sources(system_prompt="Narrate.", persona="", lore=lore, user_input="I open the door")
    template = [
        "system_prompt",
        "persona",
        {"id": "style", "content": "Write briefly."},
        "lorebook_before",
        "history",
        "input",
    ]
    result = run_pipeline(request(sources, template=template, context_limit=500))
    entries = [(e.identifier, e.included, e.reason) for e in result.entries]
    assert entries == [
        ("core.system-prompt", True, "protected"),
        ("core.persona", False, "empty"),
        ("template.style", True, "fit"),
        ("lore.door", True, "fit"),
        ("lore.off", False, "disabled"),
        ("lore.sea", False, "not-triggered"),
        ("core.current-input", True, "protected"),
    ]
    door = next(e for e in result.entries if e.identifier == "lore.door")
    assert door.relevance == 0.5 and door.source == "lorebook"


def test_lorebook_keys_match_whole_words_case_insensitively_with_secondary_keys() -> None:
    lore = [
        LoreEntry(id="cat", content="Cats rule.", keys=("cat",)),
        LoreEntry(id="dragon", content="Vermax sleeps.", keys=("dragon",), secondary_keys=("mountain", "ash")),
        LoreEntry(id="world", content="The world of Vael.", constant=True),
        LoreEntry(id="deep", content="Depth note.", keys=("DRAGON",), position="depth", depth=1),
    ]
    sources = Sources(
        lore=lore,
        history=history(("h1", "user", "A Dragon on the Ash road."), ("h2", "assistant", "It roars.")),
        user_input="I concatenate nothing.",
    )
    result = run_pipeline(request(sources, context_limit=1000))
    ids = [m.id for m in result.messages]
    assert "lore.cat" not in ids  # "concatenate" is not the word "cat"
    assert ids == ["lore.dragon", "lore.world", "h1", "lore.deep", "h2", "core.current-input"]
    world = next(m for m in result.messages if m.id == "lore.world")
    assert world.pinned and world.relevance == 1.0


def test_memories_most_relevant_to_the_input_are_retrieved_offline() -> None:
    memories = [
        MemoryItem("m1", "Maria is allergic to peanuts."),
        MemoryItem("m2", "The user's car is a blue Volvo."),
        MemoryItem("m3", "Maria prefers window seats on flights."),
    ]
    sources = Sources(memories=memories, user_input="Book Maria a flight seat", memory_limit=2)
    result = run_pipeline(request(sources, context_limit=1000))
    ids = [m.id for m in result.messages]
    assert ids[0] == "memory.m3" and "memory.m2" not in ids
    skipped = {e.identifier: e.reason for e in result.entries if not e.included}
    assert skipped["memory.m2"] == "low-relevance"


def test_manually_excluded_messages_leave_with_their_tool_partners_under_any_strategy() -> None:
    call = Message(
        id="call",
        role="assistant",
        content="",
        source="history",
        tool_calls=(__import__("contextshift").ToolCall(id="c1", name="f", arguments="{}"),),
        meta={"manualExcluded": True},
    )
    result_msg = Message(id="res", role="tool", content="r", tool_call_id="c1", source="history")
    sources = Sources(history=[call, result_msg, *history(("h", "user", "keep me"))], user_input="now")
    result = run_pipeline(request(sources, context_limit=1000))
    assert [m.id for m in result.messages] == ["h", "core.current-input"]
    reasons = {e.identifier: e.reason for e in result.entries}
    assert reasons["call"] == reasons["res"] == "manual"


def test_the_author_note_stands_near_the_end_and_never_splits_a_tool_group() -> None:
    from contextshift import ToolCall

    messages: Sequence[Message] = [
        *history(("h1", "user", "a"), ("h2", "assistant", "b")),
        Message(id="call", role="assistant", content="", tool_calls=(ToolCall("c1", "f", "{}"),), source="history"),
        Message(id="res", role="tool", content="r", tool_call_id="c1", source="history"),
    ]
    result = run_pipeline(
        request(
            Sources(history=messages, user_input="now"),
            context_limit=1000,
            interceptors=[AuthorNote("Keep it short.", 2)],
        )
    )
    ids = [m.id for m in result.messages]
    assert ids == ["h1", "h2", "call", "res", "author-note", "core.current-input"]
    assert {e.identifier: e.reason for e in result.entries}["author-note"] == "fit"


def test_the_serialized_request_is_counted_again_and_shifted_when_the_wire_format_costs_more() -> None:
    def padded(messages: list[Message]) -> dict[str, object]:
        body = [{"role": m.role, "content": m.text} for m in messages]
        return {"system": "x" * 40 if len(messages) > 2 else "", "messages": body}  # 10 more tokens when long

    sources = Sources(history=history(("h1", "user", "a" * 40), ("h2", "user", "b" * 40)), user_input="now")
    result = run_pipeline(request(sources, context_limit=44, response_reserve=10, serializer=padded))
    assert result.budget["prompt_tokens"] <= 34
    assert [m.id for m in result.messages] == ["h2", "core.current-input"]


def test_without_a_serializer_the_payload_is_the_openai_body_a_provider_accepts() -> None:
    """The default serializer is ``to_openai_messages``: no contextshift or app keys, Anthropic blocks translated."""
    past = [
        Message.from_dict(
            {"id": "h1", "role": "user", "content": "Weather?", "source": "history", "meta": {"at": 1}, "x_app": "ui"}
        ),
        Message.from_dict(
            {
                "id": "h2",
                "role": "assistant",
                "source": "history",
                "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}],
            }
        ),
        Message.from_dict(
            {
                "id": "h3",
                "role": "user",
                "source": "history",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}],
            }
        ),
    ]
    sources = Sources(system_prompt="Be brief.", history=past, user_input="Thanks")
    result = run_pipeline(request(sources, context_limit=1000))
    assert result.payload == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
            {"role": "user", "content": "Thanks"},
        ]
    }


def test_the_pipeline_recalls_excluded_history_when_the_bot_selects_recall_and_the_audit_says_so() -> None:
    """G4a through the pipeline: the recalled message is sent, in its place, with the reason ``recalled``."""
    past = history(
        ("fact", "user", "The vault code for project Falcon is 48213."),
        *[(f"c{n}", "user" if n % 2 else "assistant", "Chatter about the weather and lunch today.") for n in range(8)],
    )
    sources = Sources(system_prompt="Be brief.", history=past, user_input="What is the vault code for Falcon?")
    truncated = run_pipeline(request(sources, context_limit=80, response_reserve=10))
    assert "fact" not in [m.id for m in truncated.messages]
    result = run_pipeline(request(sources, context_limit=80, response_reserve=10, strategy="recall"))
    sent = [m.id for m in result.messages]
    assert sent[:2] == ["core.system-prompt", "fact"] and sent[-1] == "core.current-input"
    assert result.context_strategy == "recall"
    reasons = {e.identifier: (e.included, e.reason) for e in result.entries}
    assert reasons["fact"] == (True, "recalled")
    assert reasons["c7"] == (True, "fit")
    assert reasons["c0"] == (False, "context-shift")
    assert result.budget["prompt_tokens"] <= 70


def test_a_pinned_message_a_stored_summary_covers_is_sent_raw_and_the_summary_stands_for_the_rest() -> None:
    """Pin on a summarized message: the service loads it raw beside its summary; the pipeline sends both."""
    covered = history(("h1", "user", "we met in Porto"), ("h3", "user", "the hotel is near Alfama"))
    pinned = Message(id="h2", role="assistant", content="the flight is on 14 March", source="history", pinned=True)
    summary = Message(
        id="sum-1",
        role="system",
        content="Summary: Porto, a flight, Alfama.",
        source="summary",
        meta={"covers": ["h1", "h2", "h3"]},
    )
    sources = Sources(history=[summary, pinned], user_input="when do we fly?", summarized=covered)
    result = run_pipeline(request(sources, context_limit=400))
    reasons = {e.identifier: (e.included, e.reason) for e in result.entries}
    assert reasons["h2"] == (True, "protected")
    assert reasons["h1"] == reasons["h3"] == (False, "summarized")
    assert [e.identifier for e in result.entries].count("h2") == 1
    block = next(e for e in result.entries if e.identifier == "sum-1")
    assert block.included and block.stands_for == ["h1", "h3"]
    assert [m.id for m in result.messages] == ["sum-1", "h2", "core.current-input"]
    assert summary.meta["covers"] == ["h1", "h2", "h3"]  # the input is not changed
