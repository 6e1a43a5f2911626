"""Property tests: every built-in strategy keeps the shifting invariants with standing instructions on (G4b).

Generated conversations get standing instructions, conflicts and retractions written into some of their plain
user messages. The reference: the instructions in force are those :func:`active_standing` names (checked by
hand in ``test_standing.py``); every one whose group fits the share is kept with the reason ``standing``.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextshift import Message, shift_with_strategy
from contextshift.core.standing import STANDING_SHARE, active_standing

from .strategies_gen import (
    Attempt,
    Scenario,
    approx_tokens,
    attempt,
    check_all,
    examples,
    outcome_key,
    ref_cost,
    ref_protected,
    scenarios,
    snapshot,
)

BUILTINS = ("truncate", "summarize", "vector-recall", "manual", "recall")
STANDING = (
    "Always cite sources.",
    "Never use emoji.",
    "I'm lactose intolerant.",
    "Call me Ada.",
    "Call me Dr. Okafor.",
    "Reply in German from now on.",
    "Отвечай по-французски.",
    "Меня зовут Анна.",
    "Forget that.",
    "You can use spaces again.",
    "Indent with tabs, never spaces.",
)
SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def standing_scenarios(draw: st.DrawFn) -> Scenario:
    """A generated scenario with some plain user messages rewritten as instructions or retractions."""
    s = draw(scenarios(with_manual_ids=True))
    dicts = copy.deepcopy(s.dicts)
    for d in dicts:
        plain = d["role"] == "user" and isinstance(d.get("content"), str) and d.get("source") in (None, "history")
        if plain and draw(st.integers(0, 2)) > 0:
            d["content"] = draw(st.sampled_from(STANDING))
    for n in range(draw(st.integers(0, 3))):  # and a few instructions of their own, anywhere
        at = draw(st.integers(0, len(dicts)))
        dicts.insert(at, {"role": "user", "content": draw(st.sampled_from(STANDING)), "id": f"standing-{n}"})
    as_objects = draw(st.booleans())  # callers pass dicts and Message objects alike
    inputs = [Message.from_dict(d) if as_objects else copy.deepcopy(d) for d in dicts]
    probe = Scenario(dicts=dicts, inputs=inputs, budget=s.budget, manual_ids=s.manual_ids)
    # Often a larger budget than the shared generator's (which hugs the protected cost): a tenth of it must hold
    # an instruction or two for the share to matter.
    return replace(probe, budget=max(1, s.budget + draw(st.sampled_from((0, 40, 150, 300)))))


def run(s: Scenario, name: str) -> Attempt:
    return attempt(
        lambda: shift_with_strategy(
            s.inputs, approx_tokens, s.budget, strategy=name, manual_excluded_ids=s.manual_ids, standing=True
        )
    )


def as_plain(result: Any) -> Any:
    """The result with ``standing`` read as ``fit`` (what the shared coverage check expects of kept history)."""
    return replace(result, reasons={k: "fit" if v == "standing" else v for k, v in result.reasons.items()})


@pytest.mark.parametrize("name", BUILTINS)
@SETTINGS
@given(s=standing_scenarios())
def test_every_strategy_keeps_every_invariant_with_standing_instructions_on(name: str, s: Scenario) -> None:
    result, error = run(s, name)
    check_all(s, None if result is None else as_plain(result), error)
    if result is None:
        return
    active = active_standing(s.normalized())
    marked = [i for i, why in result.reasons.items() if why == "standing"]
    kept = {m.id for m in result.kept}
    assert set(marked) <= set(active) and set(marked) <= kept
    groups = {p: g for g in s.groups for p in g}
    at = {i: p for p, i in enumerate(s.ids)}
    chosen_groups = {tuple(groups[at[i]]) for i in marked}
    used = sum(ref_cost(s.dicts[p]) for g in chosen_groups for p in g)
    assert used <= int(s.budget * STANDING_SHARE), f"standing took {used} of {s.budget}"
    # Reference: when every active instruction's (unprotected) group fits the share and the room the protected
    # context leaves, every one of them is kept as standing.
    wanted = {tuple(groups[at[i]]) for i in active}
    wanted = {g for g in wanted if not any(ref_protected(s.dicts[p]) for p in g)}
    need = sum(ref_cost(s.dicts[p]) for g in wanted for p in g)
    if need <= min(int(s.budget * STANDING_SHARE), s.budget - s.protected_cost()):
        assert {i for i in active if tuple(groups[at[i]]) in wanted} <= set(marked)


@pytest.mark.parametrize("name", BUILTINS)
@SETTINGS
@given(s=standing_scenarios())
def test_every_strategy_with_standing_on_is_deterministic_and_leaves_its_input_untouched(
    name: str, s: Scenario
) -> None:
    before = snapshot(s)
    assert outcome_key(*run(s, name)) == outcome_key(*run(s, name))
    assert s.inputs == before
