"""M2: plain dicts and ``Message`` objects are the same prompt.

The dicts most prompts are made of take a one-look path into ``Message``; everything else goes through
``Message.from_dict``. Whatever the path, the message and every shift of it must be the same.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contextshift import Message, get_tokenizer, shift_context, shift_with_strategy
from contextshift.core.messages import normalize_messages, with_id

from .strategies_gen import OVERHEAD, Attempt, Scenario, approx_tokens, attempt, examples, scenarios

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPT4O = get_tokenizer("gpt-4o")


def _same(left: Attempt, right: Attempt) -> None:
    (a, a_error), (b, b_error) = left, right
    assert (a_error is None) == (b_error is None)
    if a_error is not None and b_error is not None:
        assert (a_error.protected_tokens, a_error.budget) == (b_error.protected_tokens, b_error.budget)
        return
    assert a is not None and b is not None
    assert a.to_dict() == b.to_dict()
    assert a.kept == b.kept and a.excluded == b.excluded


@SETTINGS
@given(s=scenarios(max_segments=8), exact=st.booleans())
def test_dicts_and_messages_shift_identically(s: Scenario, exact: bool) -> None:
    counter: Any = GPT4O if exact else approx_tokens
    as_dicts = attempt(lambda: shift_context(copy.deepcopy(s.dicts), counter, s.budget, per_message_overhead=OVERHEAD))
    as_objects = attempt(
        lambda: shift_context([Message.from_dict(d) for d in s.dicts], counter, s.budget, per_message_overhead=OVERHEAD)
    )
    _same(as_dicts, as_objects)


@SETTINGS
@given(s=scenarios(max_segments=8), exact=st.booleans(), drop=st.data())
def test_id_less_messages_shift_as_their_numbered_copies(s: Scenario, exact: bool, drop: st.DataObject) -> None:
    # Message objects without ids (as the factories make them) take the lazy path: each gets its msg-<index>
    # copy only when it is counted, kept or read, and the shift is the one of the copies made up front.
    counter: Any = GPT4O if exact else approx_tokens
    objects = [Message.from_dict(d) for d in s.dicts]
    id_less = [replace(m, id="") if drop.draw(st.booleans()) else m for m in objects]
    try:
        numbered = normalize_messages(id_less)
    except ValueError as error:  # a msg-<index> id another message has: the shift says the same
        with pytest.raises(ValueError, match=re.escape(str(error))):
            shift_context(id_less, counter, s.budget, per_message_overhead=OVERHEAD)
        return
    _same(
        attempt(lambda: shift_context(id_less, counter, s.budget, per_message_overhead=OVERHEAD)),
        attempt(lambda: shift_context(numbered, counter, s.budget, per_message_overhead=OVERHEAD)),
    )


@SETTINGS
@given(s=scenarios(max_segments=8), ident=st.text(max_size=8))
def test_with_id_is_replace_without_checking_again(s: Scenario, ident: str) -> None:
    for message in [Message.from_dict(d) for d in s.dicts]:
        copied, replaced = with_id(message, ident), replace(message, id=ident)
        assert copied == replaced and type(copied) is Message
        assert (copied._text, copied._links, copied._kind) == (replaced._text, replaced._links, replaced._kind)


@SETTINGS
@given(s=scenarios(max_segments=6), strategy=st.sampled_from(["truncate", "summarize", "vector-recall", "manual"]))
def test_every_builtin_strategy_treats_dicts_and_messages_alike(s: Scenario, strategy: str) -> None:
    objects = [Message.from_dict(d) for d in s.dicts]
    _same(
        attempt(lambda: shift_with_strategy(copy.deepcopy(s.dicts), approx_tokens, s.budget, strategy=strategy)),
        attempt(lambda: shift_with_strategy(objects, approx_tokens, s.budget, strategy=strategy)),
    )


@SETTINGS
@given(s=scenarios(max_segments=8))
def test_the_one_look_path_makes_the_message_from_dict_makes(s: Scenario) -> None:
    fast = normalize_messages(copy.deepcopy(s.dicts))
    slow = normalize_messages([Message.from_dict(d) for d in s.dicts])
    assert fast == slow
    for one, other in zip(fast, slow, strict=True):
        assert one.text == other.text and one.protected == other.protected and hash(one) == hash(other)
        assert one._links == other._links and one._kind == other._kind


_CORRUPTIONS: list[tuple[str, Any]] = [
    ("content", 123),
    ("pinned", "yes"),
    ("role", "narrator"),
    ("source", "somewhere"),
    ("name", 7),
    ("tool_call_id", 5),
    ("meta", [1]),
    ("tool_calls", [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]),
    ("tool_calls", [{"id": "c", "function": {"name": 3, "arguments": "{}"}}]),
    ("tool_calls", "f()"),
]


def _error(call: Any) -> tuple[str, str] | None:
    try:
        call()
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)
    except Exception:
        return None
    return None


@SETTINGS
@given(s=scenarios(max_segments=6), data=st.data())
def test_a_bad_dict_raises_the_same_error_on_the_lazy_dict_path_as_on_the_object_path(
    s: Scenario, data: st.DataObject
) -> None:
    # The dict path builds the Message of a dict only when it is counted or kept, but it checks every dict
    # first: a bad one among those that would be dropped still fails, with the error from_dict gives.
    assume(s.dicts)
    dicts = copy.deepcopy(s.dicts)
    index = data.draw(st.integers(0, len(dicts) - 1))
    if data.draw(st.booleans()) and len(dicts) > 1:
        other = data.draw(st.integers(0, len(dicts) - 1).filter(lambda i: i != index))
        dicts[index]["id"] = dicts[other]["id"] = "same"
    else:
        key, value = data.draw(st.sampled_from(_CORRUPTIONS))
        dicts[index][key] = value
    lazy = _error(lambda: shift_context(copy.deepcopy(dicts), approx_tokens, s.budget))
    objects = _error(lambda: shift_context([Message.from_dict(d) for d in dicts], approx_tokens, s.budget))
    assert lazy is not None
    assert lazy == objects


def test_a_shift_of_dicts_builds_only_the_messages_it_counts() -> None:
    from contextshift.core.shifting import Prompt, build_result, excluded_note, shift_prompt

    dicts: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in range(1, 500):
        dicts.append({"role": "user", "content": f"question {turn} " * 5})
        if turn % 7 == 0:
            call_id = f"call_{turn}"
            dicts.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "look", "arguments": "{}"}}
                    ],
                }
            )
            dicts.append({"role": "tool", "tool_call_id": call_id, "content": "found " * 10})
        dicts.append({"role": "assistant", "content": f"answer {turn} " * 8})
    prompt = Prompt(copy.deepcopy(dicts), lambda text: len(text) // 4, lazy=True)
    outcome = shift_prompt(prompt, 2_000)
    built = [p for p in range(len(dicts)) if prompt.messages._built[p] is not None]  # type: ignore[attr-defined]
    # Built = counted: the protected system prompt, the newest groups that stay, and the one group before
    # them that no longer fits (a plain callable counts each group as it is walked; a tool exchange, call and
    # result, is one group).
    sizes: list[int] = []
    for d in dicts[1:]:
        if d["role"] == "tool":
            sizes[-1] += 1
        else:
            sizes.append(1)
    staying, groups_kept = len(outcome.kept) - 1, 0
    while staying > 0:
        groups_kept += 1
        staying -= sizes[-groups_kept]
    assert staying == 0
    assert built == sorted(prompt._costs)
    assert len(built) == len(outcome.kept) + sizes[-(groups_kept + 1)] < len(dicts) // 10
    result = build_result(prompt, outcome, 2_000, diagnostics=excluded_note(len(outcome.removed)))
    assert len(result.kept) == len(dicts) - len(outcome.removed) < len(built)
    # The excluded are built when read, and are the messages the object path excludes.
    objects = shift_context([Message.from_dict(d) for d in dicts], lambda text: len(text) // 4, 2_000)
    assert result.excluded == objects.excluded and list(result.excluded) == objects.excluded
    assert result.to_dict() == objects.to_dict()
    assert copy.deepcopy(result.excluded) == objects.excluded and type(copy.deepcopy(result.excluded)) is list


def test_a_shift_of_id_less_messages_copies_only_the_ones_it_counts() -> None:
    from contextshift.core.shifting import Prompt, build_result, shift_prompt

    messages = [Message.system("be brief")]
    for turn in range(1, 400):
        messages += [Message.user(f"question {turn} " * 5), Message.assistant(f"answer {turn} " * 8)]
    prompt = Prompt(messages, lambda text: len(text) // 4, lazy=True)
    outcome = shift_prompt(prompt, 1_000)
    copied = [p for p in range(len(messages)) if prompt.messages._built[p] is not None]  # type: ignore[attr-defined]
    # Counted: the system prompt and the newest messages down to the first that no longer fits; no other copy.
    assert copied == sorted(prompt._costs) == [0, *range(len(messages) - len(outcome.kept), len(messages))]
    result = build_result(prompt, outcome, 1_000)
    assert [m.id for m in result.kept][:2] == ["msg-0", f"msg-{len(messages) - len(outcome.kept) + 1}"]
    assert list(result.reasons)[:2] == ["msg-0", "msg-1"] and result.excluded[0].id == "msg-1"
