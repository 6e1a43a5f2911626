"""Hypothesis generators of conversations, and an independent reference model of the shifting rules.

The generators build prompts the way real callers do: OpenAI Chat Completions dicts (some turned into
``Message`` objects), with random roles, sources, pins, relevance and ``meta.manualExcluded`` flags; tool
groups with parallel calls whose results arrive after unrelated messages (gaps); id-less tool results
after an assistant; Anthropic ``tool_use`` / ``tool_result`` content blocks; links through
``tool_call_id``, ``toolCallId`` or ``callId`` at the top level or in ``meta``; and budgets from tiny to
large, with extra weight near the protected cost and the total cost.

The reference model (``ref_*``) restates M3, M4 and S2 from the spec in a few lines, on the input dicts,
without using contextshift's own grouping or protection code, so the property tests check the library
against the spec rather than against itself. ``check_*`` are the invariants (S1, S3–S7) the tests share.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
from collections import Counter as Tally
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st

from contextshift import Message, ShiftResult, TokenBudgetExceeded

#: Multiply every test's ``max_examples`` (e.g. ``CONTEXTSHIFT_PROPERTY_SCALE=20`` for a deep run).
SCALE = float(os.environ.get("CONTEXTSHIFT_PROPERTY_SCALE", "1"))


def examples(count: int) -> int:
    return max(1, round(count * SCALE))


# -- the reference model ------------------------------------------------------------------------------------

LINK_KEYS = ("tool_call_id", "toolCallId", "callId")
PROTECTED_SYSTEM_SOURCES = (None, "system", "persona", "character")
KEPT_REASONS = frozenset({"protected", "fit"})
#: Kept history that the ``recall`` strategy brought back (G4a).
RECALLED = "recalled"
EXCLUDED_REASONS = frozenset({"context-shift", "manual", "low-relevance", "plugin-rejected"})
ALL_REASONS = KEPT_REASONS | EXCLUDED_REASONS | {"summarized", RECALLED}


def as_dict(item: Mapping[str, Any] | Message) -> Mapping[str, Any]:
    return item.to_dict() if isinstance(item, Message) else item


def ref_link_ids(item: Mapping[str, Any] | Message) -> set[str]:
    """M3: every tool-link id one message carries."""
    d = as_dict(item)
    ids: set[str] = set()
    top = [d[k] for k in LINK_KEYS if isinstance(d.get(k), str) and d[k]]
    meta = d.get("meta") or {}
    in_meta = [meta[k] for k in LINK_KEYS if isinstance(meta.get(k), str) and meta[k]]
    if top:
        ids.add(top[0])
    elif in_meta:
        ids.add(in_meta[0])
    for call in d.get("tool_calls") or ():
        ids.add(call["id"])
    content = d.get("content")
    if isinstance(content, list | tuple):
        for part in content:
            if part.get("type") == "tool_use":
                ids.add(part["id"])
            elif part.get("type") == "tool_result":
                ids.add(part["tool_use_id"])
    return ids


def ref_groups(items: Sequence[Mapping[str, Any] | Message]) -> list[list[int]]:
    """M3: positions of each group, ordered by earliest member.

    Messages sharing a link id are one group; a tool message without any id joins the nearest preceding
    assistant message (and so every other id-less tool message of its run).
    """
    dicts = [as_dict(i) for i in items]
    parent = list(range(len(dicts)))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_with: dict[str, int] = {}
    for i, d in enumerate(dicts):
        links = ref_link_ids(d)
        for link in links:
            if link in first_with:
                union(first_with[link], i)
            else:
                first_with[link] = i
        if d["role"] == "tool" and not links:
            anchor = next((j for j in range(i - 1, -1, -1) if dicts[j]["role"] == "assistant"), None)
            if anchor is not None:
                union(anchor, i)
    members: dict[int, list[int]] = {}
    for i in range(len(dicts)):
        members.setdefault(find(i), []).append(i)
    return sorted(members.values(), key=lambda g: g[0])


def ref_protected(item: Mapping[str, Any] | Message) -> bool:
    """M4: pinned, a system/persona/character system message, or the current input."""
    d = as_dict(item)
    if d.get("pinned") is True or d.get("source") == "input":
        return True
    return d["role"] == "system" and d.get("source") in PROTECTED_SYSTEM_SOURCES


def ref_text(item: Mapping[str, Any] | Message) -> str:
    """S2: the counted text: text parts joined by newlines, then each tool call's name and arguments."""
    d = as_dict(item)
    pieces: list[str] = []

    def parts(content: Any) -> None:
        if isinstance(content, str):
            if content:
                pieces.append(content)
            return
        for part in content or ():
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                pieces.append(part["text"])
            elif kind == "tool_use":
                pieces.append(part["name"])
                if part.get("input"):
                    pieces.append(json.dumps(part["input"], ensure_ascii=False, sort_keys=True))
            elif kind == "tool_result":
                parts(part.get("content"))

    parts(d.get("content"))
    for call in d.get("tool_calls") or ():
        function = call.get("function", call)
        pieces.append(function["name"])
        if function.get("arguments"):
            pieces.append(function["arguments"])
    return "\n".join(pieces)


def approx_tokens(text: str) -> int:
    """The counter of the property tests: about four characters a token."""
    return math.ceil(len(text) / 4)


OVERHEAD = 4


def ref_cost(item: Mapping[str, Any] | Message) -> int:
    return approx_tokens(ref_text(item)) + OVERHEAD


def fresh_count(messages: Sequence[Message]) -> int:
    """S6 with the approximate counter: sum of ceil(len(text)/4) + 4 over the messages."""
    return sum(approx_tokens(m.text) + OVERHEAD for m in messages)


# -- scenarios ----------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """One generated prompt: the dicts (the reference's view), the inputs as passed, and a budget."""

    dicts: list[dict[str, Any]]
    inputs: list[Any]
    budget: int
    manual_ids: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [d.get("id") or f"msg-{i}" for i, d in enumerate(self.dicts)]

    @property
    def groups(self) -> list[list[int]]:
        return ref_groups(self.dicts)

    def protected_group_positions(self) -> list[int]:
        return sorted(p for g in self.groups if any(ref_protected(self.dicts[q]) for q in g) for p in g)

    def group_is_protected(self, group: Sequence[int]) -> bool:
        return any(ref_protected(self.dicts[p]) for p in group)

    def protected_cost(self) -> int:
        return sum(ref_cost(self.dicts[p]) for p in self.protected_group_positions())

    def total_cost(self) -> int:
        return sum(ref_cost(d) for d in self.dicts)

    def normalized(self) -> list[Message]:
        """What the library should see: every input as a Message with its stable id."""
        return [replace(Message.from_dict(d), id=i) for d, i in zip(self.dicts, self.ids, strict=True)]

    def with_budget(self, budget: int) -> Scenario:
        return replace(self, budget=budget)

    def __repr__(self) -> str:  # a failing example, paste-able into ``@example(scenario(...))``
        return f"scenario({self.dicts!r}, budget={self.budget!r}, manual_ids={self.manual_ids!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # what hypothesis prints
        printer.text(repr(self))


def scenario(dicts: list[dict[str, Any]], budget: int, manual_ids: Sequence[str] = ()) -> Scenario:
    """A hand-written scenario (for ``@example``): every input passed as a dict."""
    return Scenario(dicts=dicts, inputs=copy.deepcopy(dicts), budget=budget, manual_ids=list(manual_ids))


SENTENCES = (
    "Alice decided to meet Bob in Paris on Friday.",
    "The deadline is 2024-05-07 at 17:00.",
    "Why did the server return error 503?",
    "ok",
    "We must remember the price: 42 euros.",
    "NASA will launch at 3.14 past noon!",
    "the cat sat on the mat and then it sat on the mat again",
    "Carol agreed to the plan.",
    "Search results for the weather in Berlin",
    "Привет, как дела? Данные готовы.",
    "東京の天気は晴れです。数据",
    "Launch 🚀 went fine 🙂",
    "naïve café résumé",
    '{"temp": 21, "unit": "C"}',
    "a" * 60,
    "word " * 30,
    "What should we do next?",
    "I will book the table for 7 people.",
    "Nothing important here, just chatting along for a while.",
    "",
)
WORDS = ("Paris", "Berlin", "Alice", "42", "weather", "数据", "naïve")

ROLES_PLAIN = ("user", "user", "user", "assistant", "assistant", "system", "tool")
SOURCES = (
    None,
    None,
    None,
    "history",
    "history",
    "history",
    "system",
    "persona",
    "character",
    "lorebook",
    "lorebook",
    "memory",
    "memory",
    "template",
    "summary",
    "plugin",
    "input",
)
TOOL_NAMES = ("search", "get_weather", "calc", "lookup")


@functools.cache
def texts(max_sentences: int = 4) -> st.SearchStrategy[str]:
    """Text of a message: a few sentences with names, numbers, decisions, questions and several scripts."""
    return st.lists(st.sampled_from(SENTENCES), max_size=max_sentences).map(lambda parts: " ".join(parts).strip())


@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.cache
def _pick(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


_BOOL = st.booleans()
_UNIT = st.floats(0.0, 1.0, allow_nan=False)
_OPTIONAL_TEXT = st.one_of(st.none(), st.just(""), texts(1))


@st.composite
def common_fields(draw: st.DrawFn, role: str) -> dict[str, Any]:
    """pinned, source, relevance, name, workspace and meta flags, each often absent."""
    out: dict[str, Any] = {}
    if draw(_ints(0, 9)) == 9:
        out["pinned"] = True
    elif draw(_ints(0, 4)) == 4:
        out["pinned"] = False
    source = draw(_pick(SOURCES))
    if role == "system" and draw(_BOOL):
        source = draw(_pick(("lorebook", "memory", "template", "summary", "plugin", "history")))
    if source is not None:
        out["source"] = source
    if draw(_ints(0, 2)) == 2:
        out["relevance"] = draw(_UNIT)
    if draw(_ints(0, 5)) == 5:
        out["meta"] = {"manualExcluded": draw(_BOOL)}
    if draw(_ints(0, 7)) == 7:
        out["workspace"] = draw(_pick(("ws-a", "ws-b")))
    return out


def _link(draw: st.DrawFn, call_id: str) -> dict[str, Any]:
    """A result's link to its call, in one of the six accepted spellings (M3)."""
    key = draw(_pick(LINK_KEYS))
    if draw(_BOOL):
        return {key: call_id}
    return {"meta": {key: call_id}}


def _merge_meta(message: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    meta = {**message.get("meta", {}), **extra.get("meta", {})}
    merged = {**message, **{k: v for k, v in extra.items() if k != "meta"}}
    if meta:
        merged["meta"] = meta
    return merged


@st.composite
def conversations(draw: st.DrawFn, max_segments: int = 9) -> list[dict[str, Any]]:
    """A prompt as OpenAI-style dicts; tool results may arrive several segments after their call."""
    out: list[dict[str, Any]] = []
    pending: list[list[Any]] = []  # [segments left to wait, message]
    serial = iter(range(10_000))

    def flush(all_of_them: bool = False) -> None:
        for item in pending:
            item[0] -= 1
        for item in [i for i in pending if all_of_them or i[0] < 0]:
            out.append(item[1])
            pending.remove(item)

    def place(message: dict[str, Any]) -> None:
        delay = draw(_pick((-1, -1, -1, 0, 1, 2)))
        if delay < 0:
            out.append(message)
        else:
            pending.append([delay, message])

    if draw(_BOOL):
        system: dict[str, Any] = {"role": "system", "content": draw(texts(2))}
        source = draw(_pick((None, "system", "persona", "character", "lorebook")))
        if source is not None:
            system["source"] = source
        out.append(system)
    for _ in range(draw(_ints(0, max_segments))):
        kind = draw(_pick(("plain", "plain", "plain", "openai", "openai", "anthropic", "idless", "stray")))
        if kind == "plain":
            role = draw(_pick(ROLES_PLAIN))
            message = {"role": role, "content": draw(texts()), **draw(common_fields(role))}
            if role == "tool" and draw(_BOOL):
                message["name"] = draw(_pick(TOOL_NAMES))
            out.append(message)
        elif kind == "openai":
            calls = []
            for _ in range(draw(_ints(1, 3))):
                arguments = json.dumps({"q": draw(_pick(WORDS)), "n": draw(_ints(0, 99))})
                calls.append(
                    {
                        "id": f"call_{next(serial)}",
                        "type": "function",
                        "function": {"name": draw(_pick(TOOL_NAMES)), "arguments": arguments},
                    }
                )
            content = draw(_OPTIONAL_TEXT)
            out.append(
                {"role": "assistant", "content": content, "tool_calls": calls, **draw(common_fields("assistant"))}
            )
            for call in calls:
                if draw(_ints(0, 7)) == 7:
                    continue  # a call whose result never came
                result = {"role": "tool", "content": draw(texts(2))}
                if draw(_BOOL):
                    result["name"] = call["function"]["name"]
                result = _merge_meta(_merge_meta(result, draw(common_fields("tool"))), _link(draw, call["id"]))
                place(result)
        elif kind == "anthropic":
            uses = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(serial)}",
                    "name": draw(_pick(TOOL_NAMES)),
                    "input": {"q": draw(_pick(WORDS))},
                }
                for _ in range(draw(_ints(1, 3)))
            ]
            lead = [{"type": "text", "text": draw(texts(1))}] if draw(_BOOL) else []
            out.append({"role": "assistant", "content": lead + uses, **draw(common_fields("assistant"))})
            results = []
            for use in uses:
                inner: Any = draw(texts(1))
                if draw(_BOOL):
                    inner = [{"type": "text", "text": inner}]
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": inner})
            if draw(_BOOL):
                place({"role": "user", "content": results, **draw(common_fields("user"))})
            else:
                for block in results:
                    role = draw(_pick(("user", "tool")))
                    place({"role": role, "content": [block], **draw(common_fields(role))})
        elif kind == "idless":
            out.append({"role": "assistant", "content": draw(texts(1)), **draw(common_fields("assistant"))})
            for _ in range(draw(_ints(1, 3))):
                if draw(_ints(0, 3)) == 3:  # an unrelated message inside the run's reach
                    role = draw(_pick(("user", "system")))
                    out.append({"role": role, "content": draw(texts(1)), **draw(common_fields(role))})
                result = {"role": "tool", "content": draw(texts(1))}
                out.append({**result, **draw(common_fields("tool"))})
        else:  # a tool result whose call is not in the prompt at all
            out.append(_merge_meta({"role": "tool", "content": draw(texts(1))}, _link(draw, f"ghost_{next(serial)}")))
        flush()
    flush(all_of_them=True)
    if draw(_ints(0, 9)) < 6:
        out.append({"role": "user", "content": draw(texts(2)), "source": "input"})
    for index, message in enumerate(out):
        if draw(_ints(0, 6)) > 0:
            out[index] = {"id": f"m{index}", **message}
    return out


@st.composite
def budgets_for(draw: st.DrawFn, protected: int, total: int) -> int:
    """Budgets from tiny to large, weighted near the protected cost and near the total."""
    return draw(
        st.one_of(
            st.integers(1, 30),
            st.integers(max(1, protected - 3), protected + 3),
            st.integers(protected + 8, protected + 20),  # room for little more than a summary
            st.integers(max(1, protected), max(1, total)),
            st.integers(max(1, total - 3), total + 3),
            st.integers(max(1, total), 4 * total + 50),
        )
    )


@st.composite
def scenarios(
    draw: st.DrawFn, max_segments: int = 9, with_manual_ids: bool = False, squeezed: bool = False
) -> Scenario:
    """A conversation and a budget; ``squeezed``: a budget over the protected cost but under the total."""
    dicts = draw(conversations(max_segments))
    inputs: list[Any] = []
    for d in dicts:  # callers pass dicts and Message objects alike (M2)
        inputs.append(Message.from_dict(d) if draw(st.integers(0, 3)) == 0 else copy.deepcopy(d))
    probe = Scenario(dicts=dicts, inputs=inputs, budget=1)
    protected, total = probe.protected_cost(), probe.total_cost()
    if squeezed and total - 1 >= protected + 12:
        budget = draw(st.integers(protected + 12, total - 1))
    else:
        budget = draw(budgets_for(protected, total))
    manual_ids: list[str] = []
    if with_manual_ids and draw(st.booleans()):
        manual_ids = draw(st.lists(st.sampled_from([*probe.ids, "no-such-id"]), max_size=3, unique=True))
    return Scenario(dicts=dicts, inputs=inputs, budget=budget, manual_ids=manual_ids)


# -- running and checking -----------------------------------------------------------------------------------


Attempt = tuple[ShiftResult | None, TokenBudgetExceeded | None]


def attempt(call: Callable[[], ShiftResult]) -> Attempt:
    """Run a shift: its result, or the TokenBudgetExceeded it raised (anything else propagates)."""
    try:
        return call(), None
    except TokenBudgetExceeded as error:
        return None, error


def check_protected_or_raised(
    s: Scenario, result: ShiftResult | None, error: TokenBudgetExceeded | None, protected_cost: int
) -> None:
    """S3: protected context is kept whole, or TokenBudgetExceeded, raised exactly when it cannot fit."""
    if protected_cost > s.budget:
        assert error is not None, f"protected cost {protected_cost} > budget {s.budget} but nothing was raised"
        assert error.code == "TOKEN_BUDGET_EXCEEDED"
        assert error.budget == s.budget
        assert error.protected_tokens == protected_cost, (
            f"the error reports {error.protected_tokens} protected tokens, they cost {protected_cost}"
        )
        return
    assert error is None, f"raised although protected cost {protected_cost} <= budget {s.budget}: {error}"
    assert result is not None
    kept = {m.id: m for m in result.kept}
    normalized = s.normalized()
    for position in s.protected_group_positions():
        original = normalized[position]
        assert original.id in kept, f"protected {original.id} was removed"
        assert kept[original.id] == original, f"protected {original.id} was changed"


def check_no_orphans(s: Scenario, result: ShiftResult) -> None:
    """S5: every group is kept whole or not at all; no result without its call, no call without its results."""
    kept = {m.id for m in result.kept}
    ids = s.ids
    for group in s.groups:
        present = [ids[p] for p in group if ids[p] in kept]
        assert not present or len(present) == len(group), f"group {[ids[p] for p in group]} split: only {present} kept"


def check_fresh_count(s: Scenario, result: ShiftResult, profile: Any = None) -> None:
    """S6: ``tokens`` is a fresh count of ``kept`` and fits the budget."""
    fresh = fresh_count(result.kept) if profile is None else profile.count_messages(result.kept)
    assert result.tokens == fresh, f"reported {result.tokens} tokens, a fresh count of kept is {fresh}"
    assert result.tokens <= s.budget, f"{result.tokens} tokens over the budget {s.budget}"


def check_coverage(s: Scenario, result: ShiftResult) -> None:
    """S1: each input id is kept, excluded or summarized, exactly once, with a reason that says which."""
    ids = s.ids
    known = set(ids)
    protected = {ids[p] for p in s.protected_group_positions()}
    replacements = [t.replacement.id for t in result.truncated]
    assert len(set(replacements)) == len(replacements), "two truncations share a replacement id"
    assert not known.intersection(replacements), "a replacement reuses an input id"
    kept_ids = [m.id for m in result.kept]
    assert len(set(kept_ids)) == len(kept_ids), f"a message is kept twice: {kept_ids}"
    stray = [i for i in kept_ids if i not in known and i not in replacements]
    assert not stray, f"kept messages that are neither input nor a declared replacement: {stray}"
    missing_replacements = [r for r in replacements if r not in kept_ids]
    assert not missing_replacements, f"truncation replacements not kept: {missing_replacements}"
    kept_inputs = [i for i in kept_ids if i in known]
    assert kept_inputs == [i for i in ids if i in set(kept_inputs)], "kept is not in the original order"
    normalized = dict(zip(ids, s.normalized(), strict=True))
    for message in result.kept:
        if message.id in known:
            assert message == normalized[message.id], f"kept {message.id} differs from its input"
    excluded = [m.id for m in result.excluded]
    assert all(i in known for i in excluded), f"excluded holds unknown ids: {excluded}"
    sources = [i for t in result.truncated for i in t.source_ids]
    placed = Tally(kept_inputs + excluded + sources)
    assert set(placed) == known, f"not accounted for: {sorted(known - set(placed))}"
    twice = sorted(i for i, n in placed.items() if n > 1)
    assert not twice, f"accounted for more than once: {twice}"
    reasons = result.reasons
    for i in ids:
        code = reasons.get(i)
        assert code in ALL_REASONS, f"{i}: reason {code!r} is not a valid code"
        if i in set(kept_inputs):
            if code == RECALLED:  # only recall brings excluded history back, and never protected context
                assert result.strategy == "recall" and i not in protected, f"kept {i} has reason {code!r}"
            else:
                assert code == ("protected" if i in protected else "fit"), f"kept {i} has reason {code!r}"
        elif i in set(sources):
            assert code == "summarized", f"summarized {i} has reason {code!r}"
        else:
            assert code in EXCLUDED_REASONS, f"excluded {i} has reason {code!r}"


def check_all(s: Scenario, result: ShiftResult | None, error: TokenBudgetExceeded | None, profile: Any = None) -> None:
    protected_cost = (
        s.protected_cost()
        if profile is None
        else profile.count_messages([s.normalized()[p] for p in s.protected_group_positions()])
    )
    check_protected_or_raised(s, result, error, protected_cost)
    if result is not None:
        check_no_orphans(s, result)
        check_fresh_count(s, result, profile)
        check_coverage(s, result)


def check_oldest_first(s: Scenario, result: ShiftResult) -> None:
    """S4 (truncate): nothing goes when the input fits; else the oldest unprotected groups, just enough."""
    ids = s.ids
    excluded = [m.id for m in result.excluded]
    total = s.total_cost()
    if total <= s.budget:
        assert excluded == [], f"input fits ({total} <= {s.budget}) but {excluded} were removed"
        return
    gone = set(excluded)
    unprotected = [g for g in s.groups if not s.group_is_protected(g)]
    removed = [g for g in unprotected if ids[g[0]] in gone]
    kept = [g for g in unprotected if ids[g[0]] not in gone]
    if removed and kept:
        assert max(g[0] for g in removed) < min(g[0] for g in kept), (
            f"kept group starting at {ids[min(g[0] for g in kept)]} is older than removed group "
            f"starting at {ids[max(g[0] for g in removed)]}"
        )
    assert excluded == [ids[p] for g in removed for p in g], "excluded is not in removal (oldest-first) order"
    if removed:  # just enough: without the last group removed, it would not have fitted
        before_last = total - sum(ref_cost(s.dicts[p]) for g in removed[:-1] for p in g)
        assert before_last > s.budget, f"removed {ids[removed[-1][0]]}'s group although {before_last} fit"


def snapshot(s: Scenario) -> list[Any]:
    return copy.deepcopy(s.inputs)


def outcome_key(result: ShiftResult | None, error: TokenBudgetExceeded | None) -> Any:
    """What S7 compares between two runs."""
    if error is not None:
        return ("raised", error.protected_tokens, error.budget)
    assert result is not None
    return (
        [m.id for m in result.kept],
        [m.id for m in result.excluded],
        [(t.replacement, list(t.source_ids), t.tokens_before, t.tokens_after) for t in result.truncated],
        dict(result.reasons),
        result.tokens,
    )
