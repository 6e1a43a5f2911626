"""Property tests of compaction selection (C7, C8, C9) over generated sessions.

Sessions mix plain turns with images and files, OpenAI tool exchanges with parallel calls, id-less results,
results that arrive after later messages (even after the next user message), Anthropic ``tool_use`` /
``tool_result`` blocks, orphan results, empty rows, pins, several workspaces and existing summaries; targets
and summarizer budgets are random, from tiny to large. Tool groups and the current turn come from a small
reference model below (M3 and C7 restated), not from the library.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextshift.core.compaction import (
    NOTHING_TO_FOLD,
    SUMMARY_HEADER,
    Selection,
    SummarizerInputTooLarge,
    build_prompt,
    compactable_tokens,
    select_fold,
    summary_from_selection,
    validate_summary,
)
from contextshift.core.messages import Message, ToolCall

#: Multiply every test's ``max_examples`` (e.g. ``CONTEXTSHIFT_PROPERTY_SCALE=20`` for a deep run).
SCALE = float(os.environ.get("CONTEXTSHIFT_PROPERTY_SCALE", "1"))


def examples(count: int) -> int:
    return max(1, round(count * SCALE))


FAST = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ["Paris", "budget", "42", "deploy", "ticket", "ok", "Привет", "東京", "run", "fix", "3 May", "—"]


# -- the reference model --------------------------------------------------------------------------------------


def ref_links(m: Message) -> set[str]:
    links: set[str] = set()
    if m.tool_call_id:
        links.add(m.tool_call_id)
    links.update(c.id for c in m.tool_calls)
    for part in m.content if isinstance(m.content, tuple) else ():
        if part.get("type") == "tool_use":
            links.add(part["id"])
        elif part.get("type") == "tool_result":
            links.add(part["tool_use_id"])
    return links


def ref_is_result(m: Message) -> bool:
    return m.role == "tool" or (isinstance(m.content, tuple) and any(p.get("type") == "tool_result" for p in m.content))


def ref_groups(history: Sequence[Message]) -> list[list[int]]:
    """M3: messages sharing a link are one group; an id-less tool result joins the nearest assistant before it."""
    parent = list(range(len(history)))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    first: dict[str, int] = {}
    for i, m in enumerate(history):
        links = ref_links(m)
        for link in links:
            if link in first:
                parent[find(i)] = find(first[link])
            else:
                first[link] = i
        if m.role == "tool" and not links:
            anchor = next((j for j in range(i - 1, -1, -1) if history[j].role == "assistant"), None)
            if anchor is not None:
                parent[find(i)] = find(anchor)
    out: dict[int, list[int]] = {}
    for i in range(len(history)):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def ref_turn_start(history: Sequence[Message]) -> int:
    """C7: the last message the user typed (not a summary, not a tool-result carrier)."""
    for i in range(len(history) - 1, -1, -1):
        m = history[i]
        if m.role == "user" and m.source != "summary" and not ref_is_result(m):
            return i
    return len(history)


# -- generators -----------------------------------------------------------------------------------------------


@st.composite
def texts(draw: st.DrawFn, max_words: int = 60) -> str:
    size, seed = draw(st.integers(0, max_words)), draw(st.integers(0, 2**16))
    words = [WORDS[(seed + n * (seed % 7 + 1)) % len(WORDS)] for n in range(size)]  # two draws, not sixty
    if draw(st.integers(0, 12)) == 0:
        words.append("Q" * draw(st.integers(200, 3_000)))  # a base64-like blob or a huge paste
    return " ".join(words)


@st.composite
def sessions(draw: st.DrawFn) -> list[Message]:
    counter = itertools.count()

    def nid(prefix: str) -> str:
        return f"{prefix}{next(counter)}"

    spaces = draw(st.sampled_from([(None,), ("api",), ("api", "docs"), (None, "api", "docs")]))
    out: list[Message] = []
    pending: list[Message] = []  # results that arrive later

    if draw(st.booleans()):
        covers = [f"old{n}" for n in range(draw(st.integers(1, 4)))]
        meta = {"covers": covers, "workspaces": [s for s in spaces if s][:1]}
        body = f"{SUMMARY_HEADER}\n{draw(texts(30))}"
        out.append(Message(role="system", content=body, id=nid("sum"), source="summary", meta=meta))
    if draw(st.integers(0, 5)) == 0:
        out.append(
            Message(
                role="tool", content=draw(texts()), id=nid("orphan"), tool_call_id=draw(st.sampled_from([None, "lost"]))
            )
        )

    for _ in range(draw(st.integers(0, 9))):
        ws = draw(st.sampled_from(spaces))
        content: Any = draw(texts())
        if draw(st.integers(0, 4)) == 0:
            content = (
                {"type": "text", "text": content},
                draw(
                    st.sampled_from(
                        [
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                            {"type": "file", "file": {"file_data": "AAAA"}},
                        ]
                    )
                ),
            )
        out.append(
            Message(role="user", content=content, id=nid("u"), workspace=ws, pinned=draw(st.integers(0, 15)) == 0)
        )
        deliver: bool = draw(st.booleans())
        if pending and deliver:
            out.extend(pending)
            pending = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "tools", "tools", "anthropic", "empty", "idless", "orphan"]))
            pinned = draw(st.integers(0, 12)) == 0
            if kind == "text":
                out.append(Message(role="assistant", content=draw(texts()), id=nid("a"), workspace=ws, pinned=pinned))
            elif kind == "empty":
                out.append(Message(role="assistant", content="", id=nid("e"), workspace=ws))
            elif kind == "orphan":
                out.append(Message(role="tool", content=draw(texts(10)), id=nid("o"), tool_call_id=nid("gone")))
            elif kind == "idless":
                out.append(
                    Message(
                        role="assistant",
                        content="",
                        id=nid("c"),
                        workspace=ws,
                        tool_calls=(ToolCall(nid("x"), "run", draw(texts(5))),),
                        pinned=pinned,
                    )
                )
                for _ in range(draw(st.integers(1, 2))):
                    out.append(Message(role="tool", content=draw(texts()), id=nid("r")))
            elif kind == "anthropic":
                call_id = nid("t")
                out.append(
                    Message(
                        role="assistant",
                        id=nid("c"),
                        workspace=ws,
                        pinned=pinned,
                        content=(
                            {"type": "text", "text": draw(texts(5))},
                            {"type": "tool_use", "id": call_id, "name": "search", "input": {"q": draw(texts(3))}},
                        ),
                    )
                )
                block = {"type": "tool_result", "tool_use_id": call_id, "content": draw(texts())}
                out.append(Message(role="user", id=nid("r"), workspace=ws, content=(block,)))
            else:
                call_ids = [nid("x") for _ in range(draw(st.integers(1, 3)))]
                calls = tuple(ToolCall(c, draw(st.sampled_from(["read", "write"])), draw(texts(8))) for c in call_ids)
                out.append(
                    Message(
                        role="assistant",
                        content=draw(texts(5)),
                        id=nid("c"),
                        workspace=ws,
                        tool_calls=calls,
                        pinned=pinned,
                    )
                )
                results = [Message(role="tool", content=draw(texts()), id=nid("r"), tool_call_id=c) for c in call_ids]
                order = draw(st.permutations(results))
                split = draw(st.integers(0, len(order)))
                out.extend(order[:split])
                pending.extend(order[split:])
    if draw(st.booleans()):
        out.append(Message(role="user", content=draw(texts()), id=nid("now")))
    out.extend(pending)
    return out


budgets = st.one_of(st.integers(1, 60), st.integers(60, 2_000), st.integers(2_000, 100_000))
targets = st.one_of(st.none(), st.integers(0, 200), st.integers(0, 20_000))


# -- the invariants -------------------------------------------------------------------------------------------


def check_selection(history: Sequence[Message], selection: Selection, budget: int) -> None:
    position = {m.id: i for i, m in enumerate(history)}
    folded = [position[m.id] for m in selection.fold]
    kept = [position[m.id] for m in selection.keep]
    # fold + keep is the input, each message exactly once, each side in order
    assert folded == sorted(folded) and kept == sorted(kept)
    assert sorted(folded + kept) == list(range(len(history)))
    # no tool exchange is split
    fold_set = set(folded)
    for group in ref_groups(history):
        assert all(p in fold_set for p in group) or not any(p in fold_set for p in group), group
    # the current turn stays raw
    assert not any(p >= ref_turn_start(history) for p in folded)
    # pinned messages stay raw
    assert not any(history[p].pinned for p in folded)
    if not folded:
        assert selection.reason != "selected" or not history
        return
    # the summary (placed where the first folded message was) never stands inside a kept tool exchange
    for group in ref_groups(history):
        assert not group[0] < folded[0] < group[-1], group
    # the message right after the summary is not a tool result
    after = [p for p in kept if p > folded[0]]
    if after:
        assert not ref_is_result(history[after[0]])
    # something with content and not a summary is folded: every pass makes progress
    assert any(m.source != "summary" for m in selection.fold)
    # the summarizer budget holds, or the pass is the minimal one and the prompt is shrunk to fit
    if not selection.oversized:
        assert selection.input_tokens <= budget
        prompt = build_prompt(selection.fold, budget_tokens=budget)
        assert not prompt.shrunk and prompt.user_tokens <= budget
    else:
        try:
            prompt = build_prompt(selection.fold, budget_tokens=budget)
        except SummarizerInputTooLarge as error:
            assert error.reason == "input-overflow"
        else:
            assert prompt.user_tokens <= budget
    # covers list every folded raw id and every folded summary's covers, once each, in order
    expected: list[str] = []
    for m in selection.fold:
        expected.extend(m.meta["covers"] if m.source == "summary" else [m.id])
    assert list(selection.covers) == expected


#: A pinned exchange whose result arrives after the next user message: folding that message would put the
#: summary between the kept call and its kept result.
PINNED_SPAN = [
    Message(role="assistant", content="", id="c0", tool_calls=(ToolCall("x1", "run", "{}"),), pinned=True),
    Message(role="user", content="meanwhile", id="u1"),
    Message(role="tool", content="done", id="r1", tool_call_id="x1"),
    Message(role="assistant", content="ok", id="a1"),
    Message(role="user", content="now", id="now"),
]


@FAST
@example(PINNED_SPAN, None, 1_000)
@given(sessions(), targets, budgets)
def test_a_selection_never_splits_loses_or_duplicates(history: list[Message], target: int | None, budget: int) -> None:
    selection = select_fold(history, target_tokens=target, input_budget=budget)
    check_selection(history, selection, budget)
    if target is not None and selection.fold and selection.complete:
        assert selection.pressure_after <= target
    assert selection.pressure_before == compactable_tokens(history)


def commit(history: Sequence[Message], selection: Selection, ident: str) -> list[Message]:
    """What the service does with a valid summary: it takes the place of the first folded message."""
    summary = summary_from_selection("s", selection, message_id=ident)
    folded = {m.id for m in selection.fold}
    out: list[Message] = []
    for m in history:
        if m.id == selection.fold[0].id:
            out.append(summary)
        elif m.id not in folded:
            out.append(m)
    return out


def raw_view(history: Sequence[Message]) -> list[str]:
    """Every raw id the history stands for, summaries expanded into what they cover."""
    out: list[str] = []
    for m in history:
        out.extend(m.meta["covers"] if m.source == "summary" else [m.id])
    return out


@SLOW
@given(sessions(), targets, budgets)
def test_repeated_passes_make_progress_and_terminate(history: list[Message], target: int | None, budget: int) -> None:
    original = raw_view(history)
    raw_count = sum(1 for m in history if m.source != "summary")
    passes = 0
    while True:
        selection = select_fold(history, target_tokens=target, input_budget=budget)
        check_selection(history, selection, budget)
        if selection.empty:
            break
        before = sum(1 for m in history if m.source != "summary")
        history = commit(history, selection, f"pass{passes}")
        passes += 1
        assert sum(1 for m in history if m.source != "summary") < before  # progress
        assert passes <= raw_count
        assert sorted(raw_view(history)) == sorted(original)  # nothing lost or duplicated
    if target is not None and selection.reason != NOTHING_TO_FOLD:
        assert compactable_tokens(history) <= target
    if target is None:
        assert selection.reason == NOTHING_TO_FOLD
    assert sum(1 for m in history if m.source == "summary") <= 2  # summaries roll up, they never pile up


@FAST
@given(
    sessions(),
    st.one_of(st.none(), st.text(max_size=40)),
    st.sampled_from(["stop", "end_turn", "length", "max_tokens", None, "content_filter"]),
    st.integers(0, 5_000),
)
def test_a_rejected_summary_changes_nothing(
    history: list[Message], reply: str | None, finish: str | None, summary_tokens: int
) -> None:
    selection = select_fold(history, target_tokens=None, input_budget=50_000)
    if selection.empty:
        return
    verdict = validate_summary(reply, finish, selection.fold_tokens, summary_tokens)
    after = commit(history, selection, "s") if verdict.ok else list(history)
    if verdict.ok:
        assert reply is not None and reply.strip() and finish in ("stop", "end_turn")
        assert summary_tokens < selection.fold_tokens
    else:
        assert after == history and verdict.reason in ("empty", "truncated", "not-smaller")
    assert sorted(raw_view(after)) == sorted(raw_view(history))
