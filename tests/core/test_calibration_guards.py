"""T5: one bad report cannot break a calibration (the pure rules of :mod:`contextshift.core.calibration`).

Checked against a reference: whatever reports come, in any order, a doubted one changes nothing, every other
one moves the factor at most :data:`MAX_STEP` times, and what an approximate profile budgets with stays inside
the plausible band until :data:`EVIDENCE_CALLS` calls were observed.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from contextshift.core.calibration import (
    AT_WINDOW,
    EVIDENCE_CALLS,
    FAR_BELOW,
    MAX_STEP,
    PLAUSIBLE_HIGH,
    PLAUSIBLE_LOW,
    CalibratedProfile,
    Calibration,
    calibrated,
    doubt,
    label,
    observe,
    weigh,
)
from contextshift.core.tokens import ApproximateProfile

WINDOW = 2000


def test_the_issues_report_is_doubted_and_teaches_nothing() -> None:
    assert doubt(1900, 100, window=WINDOW) == FAR_BELOW  # prompt_tokens 100 for a 1,900-token prompt
    assert weigh(Calibration(), 1900, 100, window=WINDOW) == Calibration()
    assert observe(Calibration(), 1900, 100).factor == 0.25  # what the estimator alone would have believed


def test_a_report_at_the_window_is_a_suspected_truncation() -> None:
    assert doubt(1800, WINDOW, window=WINDOW) == AT_WINDOW
    assert doubt(1800, WINDOW + 5, window=WINDOW) == AT_WINDOW
    assert doubt(1800, WINDOW - 1, window=WINDOW) is None
    assert doubt(1800, WINDOW) is None  # the window unknown: only the share rule applies


def test_the_first_call_moves_the_factor_one_bounded_step() -> None:
    assert weigh(Calibration(), 1000, 3900).factor == MAX_STEP
    assert weigh(Calibration(), 1000, 1540).factor == 1.54  # a plausible first ratio is still taken as it is


def test_an_implausible_factor_on_thin_evidence_budgets_as_the_bands_edge() -> None:
    thin = Calibration(0.5, EVIDENCE_CALLS - 1, 0.0)
    profile = calibrated(ApproximateProfile(), thin)
    assert isinstance(profile, CalibratedProfile) and profile.calibration.factor == PLAUSIBLE_LOW
    assert "used as ×0.60 until 5 calls agree" in label(thin, approximate=True)
    proven = Calibration(0.5, EVIDENCE_CALLS, 0.0)
    profile = calibrated(ApproximateProfile(), proven)
    assert isinstance(profile, CalibratedProfile) and profile.calibration.factor == 0.5
    high = calibrated(ApproximateProfile(), Calibration(3.8, 1, 0.0))
    assert isinstance(high, CalibratedProfile) and high.calibration.factor == PLAUSIBLE_HIGH
    floored = calibrated(ApproximateProfile(), Calibration(3.8, 1, 0.0), floor=3.5)  # the provider proved 3.5
    assert isinstance(floored, CalibratedProfile) and floored.calibration.factor == 3.5


reports = st.lists(
    st.tuples(st.integers(1, 50_000), st.integers(1, 200_000)),
    min_size=1,
    max_size=40,
)


@given(reports, st.sampled_from([None, 2000, 8000, 128_000]))
def test_no_report_moves_the_factor_more_than_one_step_and_doubted_ones_not_at_all(
    calls: list[tuple[int, int]], window: int | None
) -> None:
    calibration = Calibration()
    for estimated, reported in calls:
        after = weigh(calibration, estimated, reported, window=window)
        if doubt(estimated, reported, window=window) is not None:
            assert after == calibration
        else:
            assert after.calls == calibration.calls + 1
            step = abs(math.log(after.factor) - math.log(calibration.factor))
            assert step <= math.log(MAX_STEP) + 1e-9
        budgeted = calibrated(ApproximateProfile(), after)
        assert isinstance(budgeted, CalibratedProfile)
        if after.calls < EVIDENCE_CALLS:
            assert PLAUSIBLE_LOW <= budgeted.calibration.factor <= PLAUSIBLE_HIGH
        calibration = after
