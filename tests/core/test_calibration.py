"""T5: the calibration estimator, the safety margin and the calibrated profile (pure core)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextshift.core.calibration import (
    CalibratedProfile,
    Calibration,
    calibrated,
    drifts,
    label,
    observe,
    raw_count,
    safety_margin,
)
from contextshift.core.messages import Message
from contextshift.core.shifting import shift_context
from contextshift.core.tokens import ApproximateProfile, prompt_tokens
from contextshift.tokenizers import get_tokenizer


def test_the_docstrings_worked_numbers() -> None:
    first = observe(Calibration(), 1000, 1540)
    assert first == Calibration(1.54, 1, 0.0)
    second = observe(first, 2000, 3000)
    assert round(second.factor, 2) == 1.52 and round(second.spread, 4) == 0.0132 and second.calls == 2


def test_an_odd_call_moves_a_settled_factor_by_at_most_the_clip() -> None:
    settled = Calibration(1.52, 30, 0.01)
    assert observe(settled, 1000, 3000).factor == pytest.approx(1.52 * math.exp(0.05 / 20))
    assert observe(settled, 1000, 500).factor == pytest.approx(1.52 * math.exp(-0.05 / 20))


def test_nothing_is_learned_from_an_empty_count() -> None:
    assert observe(Calibration(1.3, 4, 0.02), 0, 100) == Calibration(1.3, 4, 0.02)
    assert observe(Calibration(1.3, 4, 0.02), 100, 0) == Calibration(1.3, 4, 0.02)


def test_absurd_ratios_are_clamped() -> None:
    assert observe(Calibration(), 10, 10_000).factor == 4.0
    assert observe(Calibration(), 10_000, 10).factor == 0.25


@settings(max_examples=60, deadline=None)
@given(
    ratio=st.floats(min_value=0.5, max_value=2.5),
    noise=st.floats(min_value=0.0, max_value=0.08),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_the_factor_converges_to_the_true_ratio_under_noise(ratio: float, noise: float, seed: int) -> None:
    rng = random.Random(seed)
    calibration = Calibration()
    for _ in range(60):
        estimated = rng.randint(500, 5000)
        reported = round(estimated * ratio * math.exp(rng.uniform(-noise, noise)))
        calibration = observe(calibration, estimated, reported)
    assert calibration.factor == pytest.approx(ratio, rel=max(0.02, noise))
    assert calibration.spread <= noise + 0.01


def test_the_margin_is_the_base_until_calibrated_then_fades_to_the_spread() -> None:
    assert safety_margin(Calibration()) == 0.1
    assert safety_margin(Calibration(1.5, 4, 0.0)) == pytest.approx(0.05)
    assert safety_margin(Calibration(1.5, 36, 0.0)) == pytest.approx(0.01)
    assert safety_margin(Calibration(1.5, 1000, 0.03)) == pytest.approx(0.06, abs=0.001)
    assert safety_margin(Calibration(1.5, 1000, 0.5)) == pytest.approx(0.1, abs=0.001)  # capped at the base
    assert safety_margin(Calibration(), 0.2) == 0.2
    assert safety_margin(Calibration(), approximate=False) == 0.0


def test_exact_profiles_are_never_scaled_but_drift_is_reported() -> None:
    exact = get_tokenizer("gpt-4o")
    assert calibrated(exact, Calibration(1.4, 50, 0.01)) is exact
    assert drifts(Calibration(1.4, 50, 0.01)) and not drifts(Calibration(1.04, 50, 0.01))
    assert not drifts(Calibration(1.4, 2, 0.01))  # too few calls to tell


def test_a_calibrated_profile_counts_at_least_the_factor_times_the_estimate() -> None:
    base = ApproximateProfile()
    messages = [Message(role="user", content=f"line {n} " * (n + 1)) for n in range(30)]
    profile = calibrated(base, Calibration(1.5, 10, 0.0))
    assert isinstance(profile, CalibratedProfile) and profile.name == "approximate" and profile.approximate
    scaled = profile.count_messages(messages)
    raw = raw_count(profile, messages)
    assert raw == base.count_messages(messages)
    assert scaled >= raw * profile.scale
    assert scaled <= raw * profile.scale + len(messages) + 1  # one token of rounding per message at most
    assert prompt_tokens(messages, profile, 4) == scaled  # shifting's costs agree with the whole count (S6)


def test_shifting_with_a_calibrated_profile_fits_the_budget_at_the_providers_rate() -> None:
    base = ApproximateProfile()
    messages = [Message(role="user", content="a fairly ordinary sentence about the weather " * 3) for _ in range(50)]
    profile = calibrated(base, Calibration(1.6, 40, 0.0))
    result = shift_context(messages, profile, 1000)
    assert result.tokens <= 1000
    assert raw_count(profile, result.kept) * 1.6 <= 1000


def test_a_floor_raises_the_factor_for_a_retry() -> None:
    profile = calibrated(ApproximateProfile(), Calibration(1.2, 3, 0.0), floor=1.5)
    assert isinstance(profile, CalibratedProfile) and profile.calibration.factor == 1.5


def test_labels() -> None:
    assert label(Calibration(1.544, 37, 0.01), approximate=True) == "approximate, calibrated ×1.54 from 37 calls"
    assert label(Calibration(), approximate=True) == "approximate, not calibrated yet"
    assert label(Calibration(1.5, 1, 0.0), approximate=True) == "approximate, calibrated ×1.50 from 1 call"
    assert label(Calibration(1.0, 5, 0.0), approximate=False).startswith("exact")


def test_invalid_calibrations_are_rejected_at_construction() -> None:
    with pytest.raises(ValueError):
        Calibration(0.0)
    with pytest.raises(ValueError):
        Calibration(1.0, -1)
