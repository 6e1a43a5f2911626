"""C7, C9: what a compaction pass folds.

Adapted from the reference product's boundary, selection, assembly and starvation tests: no orphan tool result
at the head of the kept side, the current turn kept, whole exchanges only, oldest first within the summarizer
budget, progress on an oversized first exchange, kept islands, empty rows that do not starve later history, and
summaries that roll up. Costs use the default estimate, ~4 characters a token.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextshift.core.compaction import (
    BELOW_TARGET,
    BUDGET_LIMITED,
    NOTHING_TO_FOLD,
    SELECTED,
    SUMMARY_HEADER,
    Selection,
    build_prompt,
    compactable_tokens,
    select_fold,
    summary_from_selection,
)
from contextshift.core.messages import Message, ToolCall

BIG = 100_000  # an input budget nothing here reaches


def text(tokens: int) -> str:
    return "abc " * tokens  # spaces: a run of 256+ letters would be scrubbed as base64


def u(ident: str, tokens: int = 10, **kw: object) -> Message:
    return Message(role="user", content=text(tokens), id=ident, **kw)  # type: ignore[arg-type]


def a(ident: str, tokens: int = 10, **kw: object) -> Message:
    return Message(role="assistant", content=text(tokens), id=ident, **kw)  # type: ignore[arg-type]


def call(ident: str, *call_ids: str, **kw: object) -> Message:
    calls = tuple(ToolCall(c, "lookup", '{"q": "x"}') for c in call_ids)
    return Message(role="assistant", content="", id=ident, tool_calls=calls, **kw)  # type: ignore[arg-type]


def res(ident: str, call_id: str | None, tokens: int = 10, **kw: object) -> Message:
    return Message(role="tool", content=text(tokens), id=ident, tool_call_id=call_id, **kw)  # type: ignore[arg-type]


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def fold_all(history: Sequence[Message], budget: int = BIG) -> Selection:
    return select_fold(history, target_tokens=None, input_budget=budget)


# -- the current turn ---------------------------------------------------------------------------------------


def test_the_newest_user_turn_and_what_follows_stay_raw() -> None:
    history = [u("u0"), a("a0"), u("u1"), a("a1")]  # last user at index 2: fold 2
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "a0"]
    assert ids(selection.keep) == ["u1", "a1"]
    assert selection.reason == SELECTED and selection.complete


def test_tool_work_of_the_current_turn_is_never_eaten() -> None:
    history = [u("u1"), call("c", "x1"), res("r", "x1"), a("a1")]
    selection = fold_all(history)
    assert selection.empty
    assert selection.reason == NOTHING_TO_FOLD
    assert ids(selection.keep) == ids(history)


def test_a_single_long_turn_is_left_alone() -> None:
    # The reference product compacts the middle of one long agentic turn; C7 keeps the current turn raw.
    history = [u("u1"), *[m for n in range(5) for m in (call(f"c{n}", f"x{n}"), res(f"r{n}", f"x{n}", 500))]]
    assert fold_all(history).reason == NOTHING_TO_FOLD


def test_an_exchange_reaching_into_the_current_turn_stays_whole_and_raw() -> None:
    history = [u("u0"), a("a0"), call("c", "x1"), u("u1"), res("r", "x1"), a("a1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "a0"]
    assert {"c", "r"} <= set(ids(selection.keep))


def test_a_session_without_any_user_message_may_fold_everything() -> None:
    history = [a("a0"), a("a1")]
    assert ids(fold_all(history).fold) == ["a0", "a1"]


def test_a_user_message_carrying_tool_results_is_not_the_current_turn() -> None:
    use = Message(
        role="assistant",
        content=({"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "x"}},),
        id="c",
    )
    back = Message(role="user", content=({"type": "tool_result", "tool_use_id": "t1", "content": "found"},), id="r")
    history = [u("u0"), use, back, u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "c", "r"]
    assert ids(selection.keep) == ["u1"]


# -- tool exchanges and the head of the kept side --------------------------------------------------------


def test_parallel_calls_and_all_their_results_are_folded_together() -> None:
    history = [u("u0"), call("c", "x1", "x2", "x3"), res("r1", "x1"), res("r2", "x2"), res("r3", "x3"), u("u1")]
    selection = select_fold(history, target_tokens=5, input_budget=BIG)
    assert ids(selection.fold) == ["u0", "c", "r1", "r2", "r3"]


def test_a_result_arriving_after_other_messages_keeps_its_exchange_whole() -> None:
    history = [u("u0"), call("c", "x1"), a("between", 300), res("r", "x1"), u("u1", 5), a("a1"), u("u2")]
    for target in range(0, 400, 7):
        selection = select_fold(history, target_tokens=target, input_budget=BIG)
        folded = set(ids(selection.fold))
        assert {"c", "r"} <= folded or not {"c", "r"} & folded


def test_the_kept_side_never_starts_with_an_orphan_result() -> None:
    # r1/r2 answer calls that are gone (deleted); a cut after a0 would start the kept side with them.
    history = [u("u0", 200), a("a0", 200), res("r1", "gone1"), res("r2", "gone2"), u("u1", 50), a("a1"), u("u2")]
    selection = select_fold(history, target_tokens=80, input_budget=BIG)
    assert ids(selection.fold) == ["u0", "a0", "r1", "r2"]  # consecutive results all advanced over
    assert selection.keep[0].role != "tool"


def test_an_orphan_result_at_the_very_start_is_folded_first() -> None:
    history = [res("r0", None), u("u0"), a("a0"), u("u1")]
    assert ids(fold_all(history).fold) == ["r0", "u0", "a0"]


def test_an_idless_result_joins_the_assistant_before_it() -> None:
    history = [u("u0"), call("c", "x1"), res("r", None, 400), u("u1"), u("u2")]
    selection = select_fold(history, target_tokens=50, input_budget=BIG)
    assert ids(selection.fold) == ["u0", "c", "r"]


# -- the target ---------------------------------------------------------------------------------------------


def test_a_target_folds_the_oldest_history_until_the_rest_fits() -> None:
    history = [m for n in range(10) for m in (u(f"u{n}", 500), a(f"a{n}", 500))] + [u("now")]
    assert compactable_tokens(history) == 10_000
    selection = select_fold(history, target_tokens=4_000, input_budget=BIG)
    assert ids(selection.fold) == ids(history[:12])
    assert selection.pressure_before == 10_000
    assert selection.pressure_after == 4_000
    assert selection.complete


def test_history_already_at_the_target_is_a_noop() -> None:
    history = [u("u0", 100), a("a0", 100), u("u1")]
    selection = select_fold(history, target_tokens=200, input_budget=BIG)
    assert selection.empty and selection.reason == BELOW_TARGET and selection.complete


def test_as_much_as_possible_folds_everything_before_the_current_turn() -> None:
    history = [u("u0", 1), a("a0", 1), u("u1", 1), a("a1", 1), u("now")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "a0", "u1", "a1"]
    assert selection.pressure_after == 0


# -- the summarizer budget (C9) ----------------------------------------------------------------------------


def test_the_budget_keeps_the_oldest_whole_exchanges_and_defers_the_newest() -> None:
    history = [m for n in range(6) for m in (u(f"u{n}", 100), a(f"a{n}", 100))] + [u("now")]
    selection = fold_all(history, budget=700)
    assert ids(selection.fold) == ids(history[:6])
    assert selection.reason == BUDGET_LIMITED and not selection.complete
    assert selection.input_tokens <= 700
    assert not selection.oversized


def test_an_oversized_first_exchange_is_still_folded_and_then_shrunk_to_fit() -> None:
    history = [u("u0", 5_000), a("a0"), u("u1")]
    selection = fold_all(history, budget=800)
    assert ids(selection.fold) == ["u0"]
    assert selection.oversized
    prompt = build_prompt(selection.fold, budget_tokens=800)
    assert prompt.shrunk and prompt.user_tokens <= 800


def test_a_hundred_one_character_rows_with_a_tiny_budget_fold_one_row() -> None:
    history = [Message(role="user" if n % 2 else "assistant", content="x", id=f"m{n}") for n in range(100)]
    history.append(u("now"))
    selection = fold_all(history, budget=1)
    assert ids(selection.fold) == ["m0"]


def test_an_over_full_session_is_compacted_in_several_passes() -> None:
    history: list[Message] = [m for n in range(30) for m in (u(f"u{n}", 400), a(f"a{n}", 400))] + [u("now")]
    target = 2_000
    passes = 0
    while True:
        selection = select_fold(history, target_tokens=target, input_budget=3_000)
        if selection.empty:
            break
        passes += 1
        summary = summary_from_selection("short summary", selection, message_id=f"s{passes}")
        history = [summary, *selection.keep]
        assert passes < 60
    assert passes > 1
    assert compactable_tokens(history) <= target
    assert [m.id for m in history if m.source == "summary"] == [f"s{passes}"]  # one rolled-up summary


def test_input_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        fold_all([u("u0"), u("u1")], budget=0)
    with pytest.raises(ValueError):
        select_fold([u("u0"), u("u1")], target_tokens=-1, input_budget=10)


# -- kept islands and empty rows --------------------------------------------------------------------------


def test_a_pinned_exchange_with_parallel_siblings_is_never_compacted() -> None:
    history = [u("u0"), call("c", "x1", "x2", pinned=True), res("r1", "x1"), res("r2", "x2"), a("a0"), u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "a0"]
    assert ids(selection.keep) == ["c", "r1", "r2", "u1"]


def test_compaction_continues_past_a_pinned_message() -> None:
    history = [u("u0"), u("pin", pinned=True), a("a0"), u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "a0"]
    assert ids(selection.keep) == ["pin", "u1"]
    assert compactable_tokens(history) == 20


def test_nothing_is_folded_inside_a_kept_exchange() -> None:
    # a summary there would stand between a kept call and its kept result
    history = [u("u0"), call("c", "x1", pinned=True), a("inside"), res("r", "x1"), a("after"), u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["u0", "after"]


def test_empty_rows_at_the_head_do_not_starve_later_history() -> None:
    history = [Message(role="assistant", content="", id="e0"), Message(role="assistant", content=None, id="e1")]
    history += [u("u0"), a("a0"), u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["e0", "e1", "u0", "a0"]


def test_only_empty_rows_is_a_noop_without_any_model_call() -> None:
    history = [Message(role="assistant", content="", id="e0"), u("u1")]
    assert fold_all(history).reason == NOTHING_TO_FOLD


# -- summaries roll up ---------------------------------------------------------------------------------------


def summary(ident: str, covers: list[str], workspaces: list[str] | None = None) -> Message:
    meta = {"covers": covers, "workspaces": workspaces or []}
    return Message(role="system", content=f"{SUMMARY_HEADER}\nold facts", id=ident, source="summary", meta=meta)


def test_an_earlier_summary_is_folded_into_the_next_one() -> None:
    history = [summary("s1", ["o1", "o2"], ["ws-a"]), u("u0", workspace="ws-b"), a("a0"), u("u1")]
    selection = fold_all(history)
    assert ids(selection.fold) == ["s1", "u0", "a0"]
    assert selection.covers == ("o1", "o2", "u0", "a0")
    assert selection.supersedes == ("s1",)
    assert selection.workspaces == ("ws-a", "ws-b")


def test_a_summary_alone_is_never_re_summarized() -> None:
    history = [summary("s1", ["o1"]), u("u1")]
    assert fold_all(history).reason == NOTHING_TO_FOLD


def test_summaries_do_not_count_towards_the_target() -> None:
    history = [summary("s1", ["o1"]), u("u0", 100), a("a0", 100), u("u1")]
    assert select_fold(history, target_tokens=200, input_budget=BIG).reason == BELOW_TARGET


def test_fold_and_keep_costs_add_up() -> None:
    history = [u("u0", 30), a("a0", 20), u("u1", 7)]
    selection = fold_all(history)
    assert (selection.fold_tokens, selection.keep_tokens) == (50, 7)


def test_messages_need_unique_ids() -> None:
    with pytest.raises(ValueError):
        fold_all([Message(role="user", content="x"), u("u1")])
    with pytest.raises(ValueError):
        fold_all([u("same"), u("same")])


# -- a long session read in part (``beyond``) -----------------------------------------------------------------


def _session(exchanges: int) -> list[Message]:
    out: list[Message] = []
    for i in range(exchanges):
        if i % 5 == 2:
            out += [u(f"u{i}"), call(f"c{i}", f"t{i}"), res(f"r{i}", f"t{i}"), a(f"a{i}")]
        else:
            out += [u(f"u{i}"), a(f"a{i}", 10 + i % 7)]
    return out


@pytest.mark.parametrize("target", [None, 200, 0])
@pytest.mark.parametrize("split", [90, 121, 150])
def test_a_prefix_with_the_rest_given_as_beyond_folds_what_the_whole_session_folds(
    split: int, target: int | None
) -> None:
    session = _session(80)  # 80 exchanges; the budget takes about 30 of them (some 70 messages)
    prefix = session[:split]
    rest = compactable_tokens(session) - compactable_tokens(prefix)  # what the prefix alone does not count
    whole = select_fold(session, target_tokens=target, input_budget=1_000)
    part = select_fold(prefix, target_tokens=target, input_budget=1_000, beyond=rest)
    assert whole.reason == BUDGET_LIMITED and part.reason == BUDGET_LIMITED
    assert part.covers == whole.covers
    assert part.pressure_before == whole.pressure_before
    assert part.pressure_after == whole.pressure_after
    assert not part.complete


@pytest.mark.parametrize("split", [10, 25, 40, 61])
def test_a_prefix_shorter_than_the_budget_folds_less_never_other_messages(split: int) -> None:
    session = _session(80)
    prefix = session[:split]
    rest = compactable_tokens(session) - compactable_tokens(prefix)  # what the prefix alone does not count
    whole = select_fold(session, target_tokens=None, input_budget=1_000)
    part = select_fold(prefix, target_tokens=None, input_budget=1_000, beyond=rest)
    assert 0 < len(part.covers) < len(whole.covers)
    assert whole.covers[: len(part.covers)] == part.covers
    assert not part.complete


def test_a_prefix_never_folds_its_last_user_message_or_what_follows() -> None:
    session = _session(10)
    prefix = session[:7]  # ends inside exchange 2's tool call: u2, c2, r2 read, a2 not
    part = select_fold(prefix, target_tokens=None, input_budget=BIG, beyond=50)
    assert part.covers == ("u0", "a0", "u1", "a1")
    assert not part.complete
    assert part.pressure_before == compactable_tokens(prefix) + 50


def test_the_target_inside_a_prefix_is_reached_as_on_the_whole_session() -> None:
    session = _session(20)
    prefix = session[:30]
    target = compactable_tokens(session) - 100  # fold about 100 tokens: the first few exchanges
    whole = select_fold(session, target_tokens=target, input_budget=BIG)
    rest = compactable_tokens(session) - compactable_tokens(prefix)  # what the prefix alone does not count
    part = select_fold(prefix, target_tokens=target, input_budget=BIG, beyond=rest)
    assert whole.complete and part.complete
    assert part.covers == whole.covers == ("u0", "a0", "u1", "a1", "u2", "c2", "r2", "a2", "u3", "a3", "u4")


def test_beyond_must_be_a_non_negative_integer() -> None:
    with pytest.raises(ValueError, match="beyond"):
        select_fold(_session(3), target_tokens=None, input_budget=BIG, beyond=-1)
