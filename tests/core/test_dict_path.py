"""M2: plain dicts and ``Message`` objects are the same prompt.

The dicts most prompts are made of take a one-look path into ``Message``; everything else goes through
``Message.from_dict``. Whatever the path, the message and every shift of it must be the same.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextshift import Message, get_tokenizer, shift_context, shift_with_strategy
from contextshift.core.messages import normalize_messages

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
        lambda: shift_context(
            [Message.from_dict(d) for d in s.dicts], counter, s.budget, per_message_overhead=OVERHEAD
        )
    )
    _same(as_dicts, as_objects)


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
