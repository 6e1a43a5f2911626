"""The pipeline's shares (G4b, P3, P4): standing instructions and triggered lore outlive old history.

Counter: ceil(len / 4) + 4 tokens a message, no priming. Context 110, reply reserve 10: a budget of 100, of
which standing instructions may take 10 and lorebook/memory blocks 25.
"""

from __future__ import annotations

import math

from contextshift import Message
from contextshift.core.tokens import ChatFormatProfile
from contextshift.pipeline import LoreEntry, MemoryItem, PipelineRequest, Sources, run_pipeline
from contextshift.pipeline.run import LORE_SHARE


class ExactTestProfile(ChatFormatProfile):
    tokens_per_message = 4
    reply_priming = 0

    def __init__(self) -> None:
        super().__init__("test-exact", approximate=False)

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / 4)


EXACT = ExactTestProfile()
FILLER = "x" * 36  # 9 + 4 = 13 tokens


def old_history(count: int = 16, first: Message | None = None) -> list[Message]:
    out = [first] if first is not None else []
    out += [
        Message(id=f"h{n}", role="user" if n % 2 else "assistant", content=FILLER, source="history")
        for n in range(count)
    ]
    return out


def run(sources: Sources, **overrides: object) -> tuple[list[str], dict[str, tuple[bool, str]], list[str]]:
    settings: dict[str, object] = {"profile": EXACT, "context_limit": 110, "response_reserve": 10}
    settings.update(overrides)
    result = run_pipeline(PipelineRequest(sources=sources, **settings))  # type: ignore[arg-type]
    assert result.budget["prompt_tokens"] <= 100
    audit = {e.identifier: (e.included, e.reason) for e in result.entries}
    return [m.id for m in result.messages], audit, result.diagnostics


def test_an_activated_lorebook_entry_outlives_sixteen_old_history_messages() -> None:
    # Lore 25 chars: 11 tokens (within 25); input 11; 78 left for history: the 6 newest (13 each).
    lore = [LoreEntry(id="dragon", content="Vermax is a green dragon.", keys=("dragon",))]
    sources = Sources(lore=lore, history=old_history(), user_input="Tell me about the dragon.")
    ids, audit, _ = run(sources)
    assert LORE_SHARE == 0.25
    assert ids == ["lore.dragon", "h10", "h11", "h12", "h13", "h14", "h15", "core.current-input"]
    assert audit["lore.dragon"] == (True, "fit")
    assert [audit[f"h{n}"] for n in range(10)] == [(False, "context-shift")] * 10


def test_lore_and_memory_over_their_share_leave_first_with_the_reason_lore_budget() -> None:
    # Both keys of "a" match (relevance 1): 16 + 4 = 20 tokens. "b" (one of two keys, 0.5): 11 tokens; the
    # memory 10 tokens. 25 tokens of share: "a" goes in, then neither "b" (31) nor the memory (30) fits.
    lore = [
        LoreEntry(id="b", content="The harbour is closed at night", keys=("dragon", "harbour")),
        LoreEntry(id="a", content="y" * 64, keys=("dragon", "green")),
    ]
    memories = [MemoryItem("m1", "Green dragon seen in May.")]
    sources = Sources(lore=lore, memories=memories, history=old_history(4), user_input="The green dragon?")
    ids, audit, diagnostics = run(sources)
    assert audit["lore.a"] == (True, "fit")
    assert audit["lore.b"] == (False, "lore-budget")
    assert audit["memory.m1"] == (False, "lore-budget")
    assert ids == ["lore.a", "h0", "h1", "h2", "h3", "core.current-input"]
    assert '"lore.b" left out: lorebook and memory blocks filled their share of the budget' in diagnostics


def test_an_entry_whose_keys_did_not_match_is_not_triggered_and_a_switched_off_one_disabled() -> None:
    lore = [
        LoreEntry(id="sea", content="The sea is calm.", keys=("sea",)),
        LoreEntry(id="off", content="Never shown.", keys=("door",), enabled=False),
    ]
    _, audit, _ = run(Sources(lore=lore, user_input="I open the door"))
    assert audit["lore.sea"] == (False, "not-triggered")
    assert audit["lore.off"] == (False, "disabled")


def test_an_old_standing_instruction_stays_in_its_place_with_the_reason_standing() -> None:
    # The instruction: 23 chars, 10 tokens = the whole standing share of 100. Input 8; 82 for history: 6 of 13.
    fact = Message(id="fact", role="user", content="I'm lactose intolerant.", source="history")
    sources = Sources(history=old_history(first=fact), user_input="Suggest a dessert.")
    ids, audit, _ = run(sources, standing="detect")
    assert ids == ["fact", "h10", "h11", "h12", "h13", "h14", "h15", "core.current-input"]
    assert audit["fact"] == (True, "standing")
    _, audit, _ = run(sources)  # off by default
    assert audit["fact"] == (False, "context-shift")


def test_the_service_mode_takes_only_flagged_messages() -> None:
    plain = Message(id="fact", role="user", content="I'm lactose intolerant.", source="history")
    flagged = Message(id="fact", role="user", content="Cook for me.", source="history", meta={"standing": True})
    _, audit, _ = run(Sources(history=old_history(first=plain), user_input="Dessert?"), standing="flagged")
    assert audit["fact"] == (False, "context-shift")
    _, audit, _ = run(Sources(history=old_history(first=flagged), user_input="Dessert?"), standing="flagged")
    assert audit["fact"] == (True, "standing")
