"""C1–C3, C6, C10: the compaction trigger policy, the background drain, the cooldown and the pressure estimate.

The worked figures (window 200,000) come from the issue; the window-8000 table, the legacy clamp, the tiny
window and the "compactable tokens, not all tokens" cases are the reference product's policy tests, adapted.
"""

from __future__ import annotations

import pytest

from contextshift.core.compaction import (
    FAILURE_COOLDOWN_SECONDS,
    SUMMARY_HEADER,
    CompactionSettings,
    compactable_tokens,
    cooldown_active,
    decide,
    sync_reach,
    triggers,
)
from contextshift.core.messages import Message, ToolCall
from contextshift.core.tokens import ApproximateProfile

W = 200_000
LEGACY_90K = CompactionSettings(threshold=90_000)


# -- the worked figures (window 200,000) ------------------------------------------------------------------


def test_background_pass_is_scheduled_at_half_the_window_after_a_turn() -> None:
    decision = decide(W, 100_000, phase="after_turn")
    assert (decision.action, decision.target_tokens, decision.trigger_tokens) == ("background", 80_000, 100_000)
    assert decide(W, 99_999, phase="after_turn").action == "none"


def test_synchronous_pass_runs_at_three_quarters_before_sending() -> None:
    decision = decide(W, 150_000, phase="before_send")
    assert (decision.action, decision.target_tokens, decision.trigger_tokens) == ("sync", 80_000, 150_000)
    assert decide(W, 149_999, phase="before_send").action == "none"


def test_before_sending_a_history_over_twice_the_window_is_compacted_in_the_background() -> None:
    # W = 16,000: passes of about a window each cannot bring 32,001 under 12,000 before the turn goes out.
    assert decide(16_000, 12_000, phase="before_send").action == "sync"
    assert decide(16_000, 32_000, phase="before_send").action == "sync"
    decision = decide(16_000, 32_001, phase="before_send")
    assert (decision.action, decision.target_tokens, decision.reason) == ("background", 6_400, "over-sync-reach")
    assert sync_reach(16_000) == 32_000 and sync_reach(W) == 400_000


def test_target_is_forty_percent_of_the_window() -> None:
    assert decide(W, 120_000, phase="after_turn").target_tokens == 80_000
    assert decide(W, 190_000, phase="before_send").target_tokens == 80_000
    figures = triggers(W)
    assert figures is not None
    assert (figures.background, figures.sync, figures.target, figures.sync_target_cap) == (
        100_000,
        150_000,
        80_000,
        100_000,
    )


def test_legacy_threshold_90000_triggers_at_90000() -> None:
    decision = decide(W, 90_000, LEGACY_90K, phase="after_turn")
    assert decision.action == "background"
    assert decision.reason == "legacy-threshold"
    assert decision.trigger_tokens == 90_000
    assert decide(W, 89_999, LEGACY_90K, phase="after_turn").action == "none"


def test_synchronous_target_never_exceeds_half_the_window() -> None:
    gentle = CompactionSettings(threshold=90_000, ratio=0.1)  # folds only 10%: 180,000 -> 162,000 uncapped
    decision = decide(W, 180_000, gentle, phase="before_send")
    assert decision.action == "sync"
    assert decision.target_tokens == 100_000
    for pressure in (150_000, 170_000, 200_000, 400_000, 10_000_000):
        for ratio in (0.01, 0.1, 0.5, 0.99):
            for threshold in (0, 1, 90_000, 500_000):
                settings = CompactionSettings(threshold=threshold, ratio=ratio)
                target = decide(W, pressure, settings, phase="before_send").target_tokens
                assert target is not None
                assert target <= 100_000


@pytest.mark.parametrize("window", [None, 0, -1])
@pytest.mark.parametrize("settings", [CompactionSettings(), LEGACY_90K])
def test_no_window_never_compacts_and_says_why(window: int | None, settings: CompactionSettings) -> None:
    for phase in ("after_turn", "before_send"):
        decision = decide(window, 10**9, settings, phase=phase)
        assert decision.action == "none"
        assert decision.reason == "window-unknown"
        assert decision.target_tokens is None
    assert triggers(window) is None


def test_disabled_compaction_never_runs() -> None:
    off = CompactionSettings(enabled=False)
    assert decide(W, W * 2, off, phase="before_send").reason == "disabled"
    assert decide(W, W * 2, off, phase="after_turn").action == "none"


# -- the reference product's policy cases, adapted ------------------------------------------------------


def test_legacy_threshold_moves_only_the_background_trigger() -> None:
    assert decide(W, 120_000, LEGACY_90K, phase="before_send").action == "none"  # sync stays at 75%
    assert decide(W, 150_000, LEGACY_90K, phase="before_send").action == "sync"


def test_legacy_threshold_above_the_sync_level_is_clamped_to_it() -> None:
    huge = CompactionSettings(threshold=500_000)
    figures = triggers(W, huge)
    assert figures is not None
    assert figures.background == 150_000
    assert decide(W, 150_000, huge, phase="after_turn").action == "background"
    assert decide(W, 149_999, huge, phase="after_turn").action == "none"


def test_legacy_ratio_is_the_share_of_compactable_history_folded() -> None:
    assert decide(W, 90_000, LEGACY_90K, phase="after_turn").target_tokens == 45_000
    quarter = CompactionSettings(threshold=90_000, ratio=0.25)
    assert decide(W, 100_000, quarter, phase="after_turn").target_tokens == 75_000
    most = CompactionSettings(threshold=90_000, ratio=0.75)
    assert decide(W, 100_000, most, phase="after_turn").target_tokens == 25_000


@pytest.mark.parametrize("ratio", [0, 1, 1.0, -0.5, True])
def test_a_ratio_outside_zero_to_one_is_rejected_as_the_api_and_storage_reject_it(ratio: object) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        CompactionSettings(threshold=1, ratio=ratio)  # type: ignore[arg-type]


def test_ratio_is_used_only_in_legacy_mode() -> None:
    assert not CompactionSettings().ratio_used
    assert CompactionSettings(threshold=1).ratio_used
    # automatic mode ignores it: the target stays 40%
    assert decide(W, 100_000, CompactionSettings(ratio=0.9), phase="after_turn").target_tokens == 80_000


@pytest.mark.parametrize(
    ("window", "background", "sync", "target", "cap"),
    [(8_000, 4_000, 6_000, 3_200, 4_000), (1, 1, 1, 1, 1), (10, 5, 7, 4, 5)],
)
def test_trigger_figures_for_other_windows(window: int, background: int, sync: int, target: int, cap: int) -> None:
    figures = triggers(window)
    assert figures is not None
    assert (figures.background, figures.sync, figures.target, figures.sync_target_cap) == (
        background,
        sync,
        target,
        cap,
    )


def test_a_window_of_one_token_is_still_active() -> None:
    assert decide(1, 1, phase="after_turn").action == "background"
    assert decide(1, 1, phase="before_send").action == "sync"


def test_after_a_turn_even_a_very_full_session_compacts_in_the_background() -> None:
    assert decide(W, 190_000, phase="after_turn").action == "background"  # never delays the reply (C2)


def test_one_pass_ends_below_the_next_trigger() -> None:
    for phase in ("after_turn", "before_send"):
        decision = decide(W, 180_000, phase=phase)
        assert decision.target_tokens is not None
        assert decide(W, decision.target_tokens, phase="after_turn").action == "none"


def test_settings_are_validated() -> None:
    for bad in ({"threshold": -1}, {"ratio": 0}, {"ratio": 1.5}, {"threshold": True}):
        with pytest.raises(ValueError):
            CompactionSettings(**bad)
    with pytest.raises(ValueError):
        decide(W, -1, phase="after_turn")
    with pytest.raises(ValueError):
        decide(W, 1, phase="later")  # type: ignore[arg-type]


# -- the cooldown (C6, C10) ------------------------------------------------


def test_cooldown_is_five_minutes_after_a_failure() -> None:
    assert FAILURE_COOLDOWN_SECONDS == 300
    assert cooldown_active(1_000.0, 1_000.0)
    assert cooldown_active(1_000.0, 1_299.9)
    assert not cooldown_active(1_000.0, 1_300.0)
    assert not cooldown_active(None, 1_000.0)


def test_manual_runs_bypass_the_cooldown() -> None:
    assert not cooldown_active(1_000.0, 1_001.0, manual=True)


def test_cooldown_length_is_configurable_and_a_bogus_future_stamp_expires() -> None:
    assert cooldown_active(0.0, 50.0, cooldown=60)
    assert not cooldown_active(0.0, 61.0, cooldown=60)
    assert not cooldown_active(0.0, 1.0, cooldown=0)
    assert not cooldown_active(10_000.0, 0.0)  # far in the future: clock trouble, not a recent failure


# -- pressure: compactable raw history only (C2) ----------------------------------------------------------


def _text(n: int) -> str:
    return "abcd" * (n // 4)


def test_pressure_is_about_four_characters_per_token() -> None:
    history = [
        Message(role="user", content=_text(400), id="u1"),
        Message(role="assistant", content=_text(800), id="a1"),
        Message(role="user", content="now", id="u2"),
    ]
    assert compactable_tokens(history) == 300


def test_pressure_leaves_out_summaries_and_the_current_turn() -> None:
    summary = Message(role="system", content=SUMMARY_HEADER + "\n" + _text(20_000), id="s", source="summary")
    raw = [Message(role="user", content=_text(8_000), id="u1"), Message(role="assistant", content=_text(8_000), id="a")]
    current = [Message(role="user", content=_text(20_000), id="u2"), Message(role="assistant", content="x", id="a2")]
    assert compactable_tokens([summary, *raw, *current]) == 4_000  # not 9,000+
    assert compactable_tokens([summary, *current]) == 0


def test_pressure_leaves_out_what_can_never_be_folded() -> None:
    pinned = Message(role="user", content=_text(4_000), id="p", pinned=True)
    history = [pinned, Message(role="assistant", content=_text(400), id="a"), Message(role="user", content="q", id="u")]
    assert compactable_tokens(history) == 100


def test_pressure_counts_a_tool_exchange_and_media() -> None:
    history = [
        Message(role="user", content=({"type": "text", "text": _text(40)}, {"type": "image_url"}), id="u1"),
        Message(role="assistant", content="", id="a", tool_calls=(ToolCall("c1", "f", "{}"),)),
        Message(role="tool", content=_text(400), id="r", tool_call_id="c1"),
        Message(role="user", content="q", id="u2"),
    ]
    assert compactable_tokens(history) == 10 + 765 + 1 + 100  # text, image part, "f\n{}", result


def test_pressure_uses_an_exact_counter_when_given() -> None:
    history = [Message(role="user", content="one two three", id="u1"), Message(role="user", content="q", id="u2")]
    assert compactable_tokens(history, lambda text: len(text.split())) == 3
    profile = ApproximateProfile()
    assert compactable_tokens(history, profile) == profile.message_tokens(history[0])
