"""Compaction never folds a standing instruction (G4b, C7): three passes by a summarizer that drops it.

The passes run in memory as the service runs them (select, build the prompt, "call" the summarizer, put the
summary in place of the fold); the summarizer here answers with a text that never mentions the instruction.
"""

from __future__ import annotations

from contextshift.core.compaction import build_prompt, select_fold, summary_from_selection
from contextshift.core.compaction.rendering import STANDING_INTRO
from contextshift.core.messages import Message

BIG = 100_000
FACT = "I'm lactose intolerant."


def turns(start: int, count: int) -> list[Message]:
    out = []
    for n in range(start, start + count):
        out.append(Message(role="user", content=f"question {n} " + "abc " * 40, id=f"u{n}"))
        out.append(Message(role="assistant", content=f"answer {n} " + "def " * 40, id=f"a{n}"))
    return out


def test_a_standing_instruction_survives_three_compactions_by_a_summarizer_that_drops_it() -> None:
    fact = Message(role="user", content=FACT, id="fact", meta={"standing": True})
    history = [fact, *turns(0, 6), Message(role="user", content="now?", id="now")]
    for n in range(3):
        selection = select_fold(history, target_tokens=None, input_budget=BIG)
        assert not selection.empty
        assert "fact" not in {m.id for m in selection.fold}
        assert selection.standing == (FACT,)
        prompt = build_prompt(selection.fold, budget_tokens=BIG, standing=selection.standing)
        assert prompt.system.endswith(f"{STANDING_INTRO}\n- {FACT}")
        assert FACT not in prompt.user
        summary = summary_from_selection(
            f"Many numbered questions were answered (pass {n}).", selection, message_id=f"s{n}"
        )
        folded = {m.id for m in selection.fold}
        at = history.index(selection.fold[0])
        history = [*history[:at], summary, *(m for m in history[at:] if m.id not in folded)]
        history = [*history[:-1], *turns(10 * (n + 1), 4), history[-1]]
    assert history[0] is fact
    assert [m.id for m in history if m.source == "summary"] == ["s2"]


def test_without_the_flag_the_same_message_is_folded_and_the_instruction_lists_nothing() -> None:
    history = [
        Message(role="user", content=FACT, id="fact"),
        *turns(0, 6),
        Message(role="user", content="now?", id="now"),
    ]
    selection = select_fold(history, target_tokens=None, input_budget=BIG)
    assert "fact" in {m.id for m in selection.fold} and selection.standing == ()
    assert STANDING_INTRO not in build_prompt(selection.fold, standing=selection.standing).system
