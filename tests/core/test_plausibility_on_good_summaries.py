"""Compaction's plausibility check (C8) rejects no good summary: every summary the `summarize` strategy writes
for the fidelity benchmark's conversations (which keep most of their facts) passes it."""

from __future__ import annotations

from benchmarks.fidelity import false_rejections
from benchmarks.fidelity_data import FAMILIES


def test_no_summary_of_the_fidelity_conversations_is_judged_implausible() -> None:
    rejected, checked = false_rejections([0, 1])
    assert checked >= len(FAMILIES) * 2 * 2  # every family, two seeds, both budgets
    assert rejected == []
