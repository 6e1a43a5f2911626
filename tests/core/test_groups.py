"""M3: tool groups, stricter than the reference product: no orphan in any arrangement."""

from __future__ import annotations

import math

from contextshift import shift_context
from contextshift.core.groups import build_groups, find_links
from contextshift.core.messages import normalize_messages


def members(raw: list[dict[str, object]]) -> list[list[str]]:
    messages = normalize_messages(raw)
    return [[messages[p].id for p in g.members] for g in build_groups(messages)]


def call(ident: str, *call_ids: str) -> dict[str, object]:
    return {
        "id": ident,
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}} for c in call_ids],
    }


def result(ident: str, call_id: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {"id": ident, "role": "tool", "content": "r"}
    if call_id:
        out["tool_call_id"] = call_id
    return out


def test_parallel_calls_and_their_results_form_one_group() -> None:
    raw = [
        {"id": "u", "role": "user", "content": "q"},
        call("a", "c1", "c2", "c3"),
        result("r1", "c1"),
        result("r2", "c2"),
        result("r3", "c3"),
    ]
    assert members(raw) == [["u"], ["a", "r1", "r2", "r3"]]


def test_results_separated_by_other_messages_still_join_their_call() -> None:
    raw = [call("a", "c1"), {"id": "u", "role": "user", "content": "meanwhile"}, result("r1", "c1")]
    assert members(raw) == [["a", "r1"], ["u"]]


def test_a_run_of_id_less_results_joins_the_nearest_assistant() -> None:
    raw = [
        {"id": "a", "role": "assistant", "content": "calling"},
        result("r1"),
        result("r2"),
        result("r3"),
        {"id": "u", "role": "user", "content": "next"},
    ]
    assert members(raw) == [["a", "r1", "r2", "r3"], ["u"]]


def test_groups_chained_through_shared_ids_merge() -> None:
    raw = [
        call("a1", "c1"),
        result("r1", "c1"),
        {
            "id": "a2",
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}],
        },
    ]
    assert members(raw) == [["a1", "r1", "a2"]]


def test_a_group_with_a_pinned_member_is_kept_whole() -> None:
    raw = [
        call("a", "c1", "c2"),
        result("r1", "c1"),
        {**result("r2", "c2"), "pinned": True},
        {"id": "u", "role": "user", "content": "x" * 400},
        {"id": "now", "role": "user", "content": "now", "source": "input"},
    ]
    shifted = shift_context(raw, lambda s: math.ceil(len(s) / 4), 40)
    assert [m.id for m in shifted.kept] == ["a", "r1", "r2", "now"]
    assert [m.id for m in shifted.excluded] == ["u"]
    assert shifted.reasons["r1"] == "protected"


def test_removing_one_parallel_result_never_leaves_the_others_orphaned() -> None:
    raw = [
        call("a", "c1", "c2"),
        result("r1"),
        result("r2"),
        {"id": "now", "role": "user", "content": "now", "pinned": True},
    ]
    shifted = shift_context(raw, lambda s: math.ceil(len(s) / 4), 12)
    assert [m.id for m in shifted.kept] == ["now"]
    assert [m.id for m in shifted.excluded] == ["a", "r1", "r2"]


def test_a_prompts_owner_map_is_built_once_and_names_each_positions_group() -> None:
    # The host asks for it once per message; rebuilding it on each question made shift_with_strategy
    # quadratic (411 ms at 10k messages). Built once, the same list answers every time.
    from contextshift.core.shifting import Prompt

    raw = [
        {"id": "s", "role": "system", "content": "x"},
        call("a", "c1", "c2"),
        result("r1", "c1"),
        {"id": "u", "role": "user", "content": "y"},
        result("r2", "c2"),
    ]
    prompt = Prompt(raw, lambda s: len(s))
    owner = prompt.owner
    assert prompt.owner is owner
    assert [[prompt.ids[p] for p in prompt.groups[owner[p]].members] for p in range(len(raw))] == [
        ["s"],
        ["a", "r1", "r2"],
        ["a", "r1", "r2"],
        ["u"],
        ["a", "r1", "r2"],
    ]


def test_a_message_joining_two_groups_merges_them_under_their_earliest_member() -> None:
    # The later group (from a2) is the larger one when x joins both; the merged group's root is still a1,
    # and an id-less result after x joins it too. Another run of id-less results forms a group of its own.
    raw = [
        call("a1", "c1"),
        {"id": "u", "role": "user", "content": "q"},
        call("a2", "c2"),
        result("r2", "c2"),
        result("r2b", "c2"),
        result("r2c", "c2"),
        result("r1", "c1"),
        {**call("x", "c2"), "tool_call_id": "c1"},
        result("after-x"),
        {"id": "b", "role": "assistant", "content": "plain"},
        result("b1"),
        result("b2"),
    ]
    assert members(raw) == [
        ["a1", "a2", "r2", "r2b", "r2c", "r1", "x", "after-x"],
        ["u"],
        ["b", "b1", "b2"],
    ]
    messages = normalize_messages(raw)
    links = find_links(messages, [m._kind for m in messages])
    assert links is not None
    assert links.multi == {0: [0, 2, 3, 4, 5, 6, 7, 8], 9: [9, 10, 11]}
    assert list(links.multi) == [0, 9]
    assert links.root_of == {**dict.fromkeys([0, 2, 3, 4, 5, 6, 7, 8], 0), 9: 9, 10: 9, 11: 9}
    assert links.scattered == {0}
