"""When to compact and how far (C1, C2, C3, C6, C10): the trigger policy, the drain bound, the cooldown.

Automatic mode (threshold ``0``), relative to the chat model's window ``W``:

* after a turn, pressure ``>= 50% W`` schedules a **background** pass;
* before sending a turn, pressure ``>= 75% W`` runs a **synchronous** pass first;
* both aim at ``40% W`` of raw history; the synchronous target never exceeds ``50% W``, so one pass ends
  below the next trigger. A background run makes at most :data:`MAX_BACKGROUND_PASSES` passes.
* before sending, a history of more than ``200% W`` (an imported chat, or one whose summarizer was down for
  long) is **not** compacted synchronously: passes of about a window each cannot bring it under the trigger,
  and the turn would wait for all of them. It is compacted in the background instead, a run after each
  turn, and shifting fits the turn meanwhile. With ``W = 16,000``: 12,000 runs a pass before the turn,
  40,000 schedules one behind it.

Legacy mode (threshold ``> 0``): after a turn, pressure ``>= min(threshold, 75% W)`` schedules a background
pass that folds ``ratio`` of the compactable history (target ``pressure × (1 − ratio)``); the synchronous
backstop stays at ``75% W`` with its target capped at ``50% W``.

Without a declared window (or with compaction disabled) nothing runs automatically, and the decision says
why (C1). Pressure is the compactable raw history (:func:`.layout.compactable_tokens`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..limits import ratio_ok

Phase: TypeAlias = Literal["after_turn", "before_send"]
Action: TypeAlias = Literal["none", "background", "sync"]

BACKGROUND_TRIGGER_PERCENT = 50
SYNC_TRIGGER_PERCENT = 75
TARGET_PERCENT = 40
SYNC_TARGET_CAP_PERCENT = 50
#: C2: a background run makes at most this many passes.
MAX_BACKGROUND_PASSES = 3
#: Before sending, a history over this share of the window is compacted in the background, not before the turn.
SYNC_REACH_PERCENT = 200
#: C6/C10: seconds an automatic pass waits after a failed one (manual runs bypass it).
FAILURE_COOLDOWN_SECONDS = 300.0
DEFAULT_RATIO = 0.5

#: Reason codes of a decision.
DISABLED = "disabled"
WINDOW_UNKNOWN = "window-unknown"
BELOW_TRIGGER = "below-trigger"
BACKGROUND_TRIGGER = "background-trigger"  # automatic, after a turn, >= 50%
SYNC_TRIGGER = "sync-trigger"  # before sending, >= 75%
OVER_SYNC_REACH = "over-sync-reach"  # before sending, > 200%: too far over for passes before the turn
LEGACY_THRESHOLD = "legacy-threshold"  # legacy, after a turn, >= threshold


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """C4: per-bot settings. ``threshold`` 0 = automatic; ``ratio`` (0 < ratio < 1) is used in legacy mode only."""

    enabled: bool = True
    threshold: int = 0
    ratio: float = DEFAULT_RATIO

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < 0:
            raise ValueError("compaction threshold must be a non-negative integer (0 = automatic)")
        if not ratio_ok(self.ratio):
            raise ValueError("compaction ratio must be a number between 0 and 1 (exclusive)")

    @property
    def automatic(self) -> bool:
        return self.threshold == 0

    @property
    def ratio_used(self) -> bool:
        """C3/C4: the ratio only matters (and is only shown) in legacy mode."""
        return not self.automatic


@dataclass(frozen=True, slots=True)
class Triggers:
    """The figures of one window and settings (for status panels and tests)."""

    background: int  # pressure that schedules a background pass after a turn
    sync: int  # pressure that runs a synchronous pass before sending
    target: int  # automatic target (legacy: the cap; the real target depends on the pressure)
    sync_target_cap: int


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do now: ``none``, a ``background`` pass or a ``sync`` pass, towards ``target_tokens``."""

    action: Action
    target_tokens: int | None
    reason: str
    trigger_tokens: int | None = None
    pressure: int = 0

    @property
    def compact(self) -> bool:
        return self.action != "none"


def _percent(window: int, percent: int) -> int:
    return max(1, window * percent // 100)


def _window(window: int | None) -> int | None:
    if window is None or isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    return window


def triggers(window: int | None, settings: CompactionSettings | None = None) -> Triggers | None:
    """The trigger figures for ``window`` (None when the window is unknown)."""
    settings = settings or CompactionSettings()
    size = _window(window)
    if size is None:
        return None
    sync = _percent(size, SYNC_TRIGGER_PERCENT)
    background = _percent(size, BACKGROUND_TRIGGER_PERCENT) if settings.automatic else min(settings.threshold, sync)
    cap = _percent(size, SYNC_TARGET_CAP_PERCENT)
    return Triggers(background, sync, _percent(size, TARGET_PERCENT), cap)


def sync_reach(window: int) -> int:
    """The most pressure a synchronous pass still takes on before a turn (:data:`SYNC_REACH_PERCENT` of it)."""
    return _percent(window, SYNC_REACH_PERCENT)


def _legacy_target(pressure: int, ratio: float) -> int:
    return max(0, pressure - math.ceil(pressure * ratio - 1e-9))


def decide(window: int | None, pressure: int, settings: CompactionSettings | None = None, *, phase: Phase) -> Decision:
    """C1–C3: whether to compact at this ``phase`` and towards which target (compactable raw tokens)."""
    if phase not in ("after_turn", "before_send"):
        raise ValueError(f"unknown phase {phase!r}")
    if isinstance(pressure, bool) or not isinstance(pressure, int) or pressure < 0:
        raise ValueError("pressure must be a non-negative integer")
    settings = settings or CompactionSettings()
    if not settings.enabled:
        return Decision("none", None, DISABLED, pressure=pressure)
    size = _window(window)
    figures = triggers(size, settings)
    if size is None or figures is None:
        return Decision("none", None, WINDOW_UNKNOWN, pressure=pressure)
    base = figures.target if settings.automatic else _legacy_target(pressure, settings.ratio)
    if phase == "before_send":
        capped = min(base, figures.sync_target_cap)
        if pressure > sync_reach(size):
            return Decision("background", capped, OVER_SYNC_REACH, figures.sync, pressure)
        if pressure >= figures.sync:
            return Decision("sync", capped, SYNC_TRIGGER, figures.sync, pressure)
        return Decision("none", None, BELOW_TRIGGER, figures.sync, pressure)
    if pressure >= figures.background:
        reason = BACKGROUND_TRIGGER if settings.automatic else LEGACY_THRESHOLD
        return Decision("background", base, reason, figures.background, pressure)
    return Decision("none", None, BELOW_TRIGGER, figures.background, pressure)


def cooldown_active(
    last_failure_at: float | None, now: float, cooldown: float = FAILURE_COOLDOWN_SECONDS, manual: bool = False
) -> bool:
    """C6/C10: whether an automatic pass must wait after a failure at ``last_failure_at`` (seconds)."""
    if manual or last_failure_at is None or cooldown <= 0:
        return False
    return -cooldown < now - last_failure_at < cooldown
