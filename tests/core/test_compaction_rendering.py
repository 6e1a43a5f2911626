"""C7, C9: the summarizer request — typed records, labels, caps, workspace headers, output cap, input budget.

Adapted from the reference product's entry, prompt and quality tests: base64 images stripped, tool call name and
arguments, bare marker for empty arguments, bounded and scrubbed arguments, result outcomes rather than raw JSON,
truncated oversized output, data URIs that do not swallow following text, MCP-style content arrays, empty result
marker, header escaping, workspace headers, output cap window/10 or 4096, and a tiny window failing closed.
"""

from __future__ import annotations

import json

import pytest

from contextshift.core.compaction import (
    SUMMARY_HEADER,
    SYSTEM_PROMPT,
    TOOL_ARGS_CAP,
    TOOL_RESULT_CAP,
    SummarizerInputTooLarge,
    ToolExchange,
    build_prompt,
    build_records,
    input_budget,
    max_output_tokens,
    render_transcript,
)
from contextshift.core.compaction.rendering import clip, condense
from contextshift.core.messages import Message, ToolCall
from contextshift.core.tokens import approximate_count

B64 = "iVBORw0KGgo" + "A" * 600


def transcript(*messages: Message) -> str:
    return render_transcript(build_records(list(messages)))


def tool_round(arguments: str = '{"path": "a.txt"}', result: object = "done", name: str = "write") -> list[Message]:
    call = Message(role="assistant", content="", id="c", tool_calls=(ToolCall("x1", name, arguments),))
    return [call, Message(role="tool", content=result, id="r", tool_call_id="x1")]  # type: ignore[arg-type]


# -- typed records ------------------------------------------------------------------------------------------


def test_each_message_is_rendered_with_its_role() -> None:
    out = transcript(
        Message(role="user", content="Book Paris for 3 May", id="u", name="alice"),
        Message(role="assistant", content="Booked, ref 4471.", id="a"),
    )
    assert "user (alice): Book Paris for 3 May\nassistant: Booked, ref 4471." in out
    assert out.startswith("Summarize this conversation transcript.")
    assert "<transcript>" in out and out.endswith("</transcript>")


def test_images_and_files_become_labels_and_never_raw_data() -> None:
    content = (
        {"type": "text", "text": "look at these"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
        {"type": "image", "source": {"type": "base64", "data": B64}},
        {"type": "file", "file": {"file_data": B64, "filename": "q3.pdf"}},
    )
    out = transcript(Message(role="user", content=content, id="u"))
    assert "user: look at these [image] [image] [file]" in out
    assert "AAAA" not in out and "base64" not in out


def test_base64_in_text_is_scrubbed_without_swallowing_what_follows() -> None:
    out = transcript(Message(role="user", content=f"see data:image/png;base64,{B64} and then more", id="u"))
    assert "see [media] and then more" in out
    bare = transcript(Message(role="user", content=f"blob {B64} end", id="u"))
    assert "blob [media] end" in bare


def test_a_tool_call_shows_its_name_and_arguments() -> None:
    out = transcript(*tool_round())
    assert 'assistant: [tool_call: write] {"path": "a.txt"}' in out
    assert "tool: [tool_result: write] done" in out


def test_a_call_without_arguments_is_a_bare_marker() -> None:
    out = transcript(*tool_round(arguments=""))
    assert "assistant: [tool_call: write]\n" in out


def test_arguments_are_capped_with_a_truncation_marker() -> None:
    arguments = "x " * 1_000
    out = transcript(*tool_round(arguments=arguments))
    kept = arguments.strip()[:TOOL_ARGS_CAP]
    assert f"[tool_call: write] {kept}…[truncated {len(arguments.strip()) - TOOL_ARGS_CAP} chars]" in out


def test_results_are_capped_with_a_truncation_marker() -> None:
    result = "line of output\n" * 500
    out = transcript(*tool_round(result=result))
    cut = len(result.strip()) - TOOL_RESULT_CAP
    assert f"…[truncated {cut} chars]" in out
    assert TOOL_RESULT_CAP == 2000 and TOOL_ARGS_CAP == 500
    assert len(out) < 3_000


def test_an_empty_result_has_a_marker() -> None:
    assert "tool: [tool_result: write] (empty)" in transcript(*tool_round(result=""))


def test_a_result_outcome_is_its_text_not_raw_json() -> None:
    mcp = ({"type": "text", "text": "3 files changed"}, {"type": "image_url", "image_url": {"url": "x"}})
    out = transcript(*tool_round(result=mcp))
    assert "tool: [tool_result: write] 3 files changed [image]" in out
    assert '"type"' not in out


def test_anthropic_tool_blocks_render_as_one_exchange() -> None:
    use = Message(
        role="assistant",
        content=(
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "flights"}},
        ),
        id="c",
    )
    back = Message(
        role="user",
        content=({"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "2 found"}]},),
        id="r",
    )
    records = build_records([use, back])
    assert len(records) == 1 and isinstance(records[0], ToolExchange)
    out = render_transcript(records)
    assert (
        'assistant: Searching.\nassistant: [tool_call: search] {"q": "flights"}\ntool: [tool_result: search] 2 found'
        in out
    )


def test_parallel_calls_and_results_render_together() -> None:
    call = Message(
        role="assistant", content="", id="c", tool_calls=(ToolCall("x1", "a", "{}"), ToolCall("x2", "b", "{}"))
    )
    results = [Message(role="tool", content=f"r{n}", id=f"r{n}", tool_call_id=f"x{n}") for n in (1, 2)]
    out = transcript(call, *results)
    assert "[tool_result: a] r1\ntool: [tool_result: b] r2" in out


def test_reasoning_is_left_out() -> None:
    content = ({"type": "thinking", "thinking": "secret plan"}, {"type": "text", "text": "Answer."})
    out = transcript(Message(role="assistant", content=content, id="a"))
    assert "secret" not in out and "assistant: Answer." in out


def test_an_earlier_summary_is_rendered_as_such_without_its_header() -> None:
    summary = Message(
        role="system",
        content=f"{SUMMARY_HEADER}\nAlice booked Paris.",
        id="s",
        source="summary",
        meta={"covers": ["o1"], "workspaces": ["repo"]},
    )
    out = transcript(summary, Message(role="user", content="and Rome?", id="u"))
    assert "[earlier summary, workspaces: repo]\nAlice booked Paris.\n[end of earlier summary]" in out
    assert SUMMARY_HEADER not in out


# -- workspaces ---------------------------------------------------------------------------------------------


def test_a_workspace_header_appears_where_the_session_spans_several() -> None:
    out = transcript(
        Message(role="user", content="fix the build", id="u1", workspace="api"),
        Message(role="assistant", content="fixed", id="a1", workspace="api"),
        Message(role="user", content="now the docs", id="u2", workspace="docs"),
    )
    assert "=== workspace: api ===\nuser: fix the build\nassistant: fixed\n=== workspace: docs ===\nuser: now" in out


def test_a_single_workspace_gets_no_header() -> None:
    out = transcript(
        Message(role="user", content="hi", id="u1", workspace="api"),
        Message(role="assistant", content="hello", id="a1", workspace="api"),
    )
    assert "workspace" not in out


def test_workspace_headers_are_escaped_and_bounded() -> None:
    out = transcript(
        Message(role="user", content="a", id="u1", workspace="my [main]\n  repo"),
        Message(role="user", content="b", id="u2", workspace="x" * 400),
    )
    assert "=== workspace: my (main) repo ===" in out
    assert "x" * 256 + "…[truncated 144 chars] ===" in out


# -- the instruction ------------------------------------------------------------------------------------------


def test_the_instruction_asks_for_a_faithful_compact_summary() -> None:
    lowered = SYSTEM_PROMPT.lower()
    for needle in ("facts", "names", "numbers", "decisions", "open questions", "tool calls", "workspace"):
        assert needle in lowered
    assert "faithful" in lowered and "compact" in lowered
    assert "identifiers, numbers, dates, names, file paths and links verbatim" in lowered
    assert "decision and open question" in lowered


def test_a_capped_result_keeps_the_numbers_and_names_the_cut_would_lose() -> None:
    notes = "the weather was fine and lunch was late. " * 80
    result = json.dumps({"project": "Falcon", "notes": notes, "vault_code": 48213, "owner": "Bob"})
    out = transcript(*tool_round(result=result))
    assert "48213" in out and '"owner": "Bob"' in out
    body = out.split("[tool_result: write] ", 1)[1].split("\n", 1)[0]
    shown = body.split("…[truncated ", 1)[0]
    assert len(shown) <= TOOL_RESULT_CAP
    cut = int(body.split("…[truncated ", 1)[1].split(" ", 1)[0])
    assert cut == len(result) - sum(len(p) for p in shown.split(" … "))


def test_a_capped_result_with_no_fact_past_the_cap_is_cut_as_before() -> None:
    result = "Falcon 48213. " + "plain words of output " * 200
    assert condense(result, 2000) == clip(result, 2000)


# -- output cap and input budget (C9) ---------------------------------------------------------------------


@pytest.mark.parametrize(("window", "cap"), [(20_000, 2_000), (200_000, 4_096), (40_960, 4_096), (5, 1)])
def test_output_cap_is_a_tenth_of_the_window_at_most_4096(window: int, cap: int) -> None:
    assert max_output_tokens(window) == cap


@pytest.mark.parametrize("window", [0, -5])
def test_output_cap_needs_a_window(window: int) -> None:
    with pytest.raises(ValueError):
        max_output_tokens(window)


def test_a_tiny_summarizer_window_has_no_input_budget() -> None:
    assert input_budget(512) <= 0


def test_input_budget_leaves_room_for_the_instruction_and_the_output() -> None:
    system = approximate_count(SYSTEM_PROMPT)
    assert input_budget(32_000) + system == 27_200  # the 85% share binds
    small = input_budget(4_000)  # here the output cap (400) and framing (512) bind
    assert small + system == 4_000 - 400 - 512


def test_a_prompt_over_budget_is_shrunk_to_fit() -> None:
    messages = [Message(role="user", content="word " * 2_000, id=f"u{n}") for n in range(3)]
    prompt = build_prompt(messages, budget_tokens=600)
    assert prompt.shrunk and prompt.user_tokens <= 600
    assert prompt.user.count("…[truncated") == 3
    assert prompt.input_tokens == prompt.user_tokens + approximate_count(SYSTEM_PROMPT)
    assert [m.role for m in prompt.messages()] == ["system", "user"]


def test_a_prompt_that_cannot_fit_fails_before_any_call() -> None:
    messages = [Message(role="user", content="word " * 100, id=f"u{n}") for n in range(50)]
    with pytest.raises(SummarizerInputTooLarge) as caught:
        build_prompt(messages, budget_tokens=30)
    assert caught.value.code == "COMPACTION_INPUT_TOO_LARGE"
    assert caught.value.reason == "input-overflow"


def test_a_prompt_within_budget_is_not_shrunk() -> None:
    prompt = build_prompt([Message(role="user", content="short", id="u")], budget_tokens=1_000)
    assert not prompt.shrunk and prompt.record_count == 1


def test_condensing_a_long_run_without_a_sentence_end_is_linear() -> None:
    # Forty words and a comma not followed by a space: the earlier piece pattern backtracked
    # exponentially here (2^40 steps); now it reads the text once. A fact past the cap is still kept.
    text = "word " * 40 + ",x " + "filler " * 30 + "end. The vault code is 4711."
    condensed = condense(text, 120)
    assert len(condensed) < len(text)
    assert "4711" in condensed
