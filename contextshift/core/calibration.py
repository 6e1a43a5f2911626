"""Calibrating token estimates from the provider's reported usage (T5), pure.

After every successful call the provider says how many prompt tokens the request really had; dividing by
contextshift's own (uncalibrated) count of the exact request gives one *ratio*. :func:`observe` folds the
ratios of one model into a :class:`Calibration`: a robust running estimate of the factor (its log is a
running mean for the first :data:`WINDOW_CALLS` calls, then an exponential average that follows drift;
each step is clipped to :data:`CLIP_SPREADS` times the typical deviation so that one odd request cannot
swing it) and of the ratios' spread.

Worked numbers, from nothing (``Calibration()``: factor 1, 0 calls, spread 0):

- call 1: estimated 1000, reported 1540 → ratio 1.54; the first ratio is taken as it is: factor **1.54**.
- call 2: estimated 2000, reported 3000 → ratio 1.50; log residual ln 1.50 − ln 1.54 = −0.0263 lies within
  the clip (at least :data:`MIN_CLIP` = 0.05), weight 1/2 → factor e^(0.4318 − 0.0132) = **1.52**, spread
  0.0132 (half of the residual 0.0263).
- a later odd call (say a request whose estimate missed an image) with ratio 3.0 moves the log by at most
  the clip times the weight: after 30 calls near 1.52 (weight 1/20) the factor moves to at most
  1.52 · e^(0.05/20) ≈ 1.524.

One bad report cannot break it. :func:`doubt` names a report that is not a density at all but a suspected
truncation (a count at or over the model's window, or under :data:`TRUNCATION_SHARE` of what was sent: servers
that cut the prompt to their own context, or leave cached tokens out of usage): it is not folded in. Each call
moves the stored factor by at most :data:`MAX_STEP` times (:func:`weigh`), the first one included; and until
:data:`EVIDENCE_CALLS` calls agree, :func:`calibrated` holds an approximate profile's factor inside the
plausible band :data:`PLAUSIBLE_LOW`–:data:`PLAUSIBLE_HIGH`. The issue's case, ``prompt_tokens: 100`` for a
1,900-token prompt, is doubted and changes nothing; a real first ratio of 0.3 moves the factor to 0.5, which
budgets as 0.6 until five calls have said so.

Approximate profiles budget with the factor and a *safety margin* (:func:`safety_margin`): the configured
share (default 10%) while uncalibrated, fading with the calls (``base · 4 / (4 + calls)``: 10%, 5% after 4
calls, 1% after 36) into twice the observed spread (capped at the base), which covers how much the ratio
varies from one request to the next. Exact profiles get no margin and no scaling: for them the factor is
a diagnostic only (:func:`drifts`: a tokenizer mapping that is wrong for the model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .messages import Message
from .tokens import ChatFormatProfile, TokenizerProfile

#: The safety margin of an uncalibrated approximate count (T5): a share of the count.
DEFAULT_MARGIN = 0.10
#: The margin fades as ``base · FADE_CALLS / (FADE_CALLS + calls)``.
FADE_CALLS = 4
#: Calls over which the factor is a plain running mean; after that an exponential average (alpha 1/20).
WINDOW_CALLS = 20
#: A step is clipped to this many spreads (and to at least MIN_CLIP in log space, about 5%).
CLIP_SPREADS = 3.0
MIN_CLIP = 0.05
#: Ratios outside these bounds are clamped: no real tokenizer is 4x off a characters estimate.
MIN_FACTOR = 0.25
MAX_FACTOR = 4.0
#: The factors an approximate (characters) profile can plausibly need; outside them only on enough evidence.
PLAUSIBLE_LOW = 0.6
PLAUSIBLE_HIGH = 3.0
#: Calls before a factor outside the plausible band is applied as it is.
EVIDENCE_CALLS = 5
#: One call moves the stored factor at most this many times up (or down).
MAX_STEP = 2.0
#: A report under this share of the sent count is a suspected truncation, not a density.
TRUNCATION_SHARE = 0.5
#: :func:`doubt`'s reasons.
AT_WINDOW = "report-at-window"
FAR_BELOW = "report-far-below-count"
#: An exact profile whose factor is this far from 1 after DRIFT_CALLS calls is reported as drifting.
DRIFT_TOLERANCE = 0.10
DRIFT_CALLS = 5


@dataclass(frozen=True, slots=True)
class Calibration:
    """One model's correction: ``real tokens ≈ factor × estimated tokens``, from ``calls`` observations.

    ``spread`` is the running mean absolute deviation of the ratios' logarithm (0.05 ≈ ratios vary ±5%).
    """

    factor: float = 1.0
    calls: int = 0
    spread: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ValueError("factor must be a positive number")
        if self.calls < 0 or not (math.isfinite(self.spread) and self.spread >= 0):
            raise ValueError("calls and spread must not be negative")


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def observe(calibration: Calibration, estimated: int, reported: int) -> Calibration:
    """The calibration after one more call whose request we counted ``estimated`` and the provider ``reported``.

    Args:
        calibration: the model's calibration so far.
        estimated: contextshift's uncalibrated count of the exact request sent (> 0).
        reported: the provider's prompt tokens for it (> 0; cached and cache-write tokens included).

    Returns:
        The updated calibration (unchanged when either count is not positive: nothing was learned).
    """
    if estimated <= 0 or reported <= 0:
        return calibration
    x = math.log(_clamp(reported / estimated, MIN_FACTOR, MAX_FACTOR))
    if calibration.calls == 0:
        return Calibration(math.exp(x), 1, 0.0)
    mean = math.log(calibration.factor)
    weight = max(1.0 / (calibration.calls + 1), 1.0 / WINDOW_CALLS)
    clip = max(CLIP_SPREADS * calibration.spread, MIN_CLIP)
    residual = x - mean
    step = _clamp(residual, -clip, clip)
    spread = calibration.spread + weight * (min(abs(residual), clip) - calibration.spread)
    factor = _clamp(math.exp(mean + weight * step), MIN_FACTOR, MAX_FACTOR)
    return Calibration(factor, calibration.calls + 1, spread)


def doubt(estimated: int, reported: int, *, window: int | None = None) -> str | None:
    """Why a provider's prompt count is not believed (a suspected truncation), or None when it is.

    Args:
        estimated: contextshift's uncalibrated count of the request sent.
        reported: the provider's prompt tokens for it.
        window: the model's context window, when known.

    Returns:
        :data:`AT_WINDOW` when the report reaches the window (a prompt that size leaves no room for a reply: the
        server cut it to its context), :data:`FAR_BELOW` when it is under :data:`TRUNCATION_SHARE` of the sent
        count, else None.

    >>> doubt(1900, 100)
    'report-far-below-count'
    >>> doubt(1900, 2000, window=2000)
    'report-at-window'
    >>> doubt(1000, 1540, window=8000) is None
    True
    """
    if estimated <= 0 or reported <= 0:
        return None
    if window is not None and window > 0 and reported >= window:
        return AT_WINDOW
    if reported < estimated * TRUNCATION_SHARE:
        return FAR_BELOW
    return None


def weigh(calibration: Calibration, estimated: int, reported: int, *, window: int | None = None) -> Calibration:
    """:func:`observe`, unless the report is doubted (:func:`doubt`: unchanged), with the step bounded to
    :data:`MAX_STEP` times the factor so far (the first call's too).

    Args:
        calibration: the model's calibration so far.
        estimated: contextshift's uncalibrated count of the exact request sent.
        reported: the provider's prompt tokens for it.
        window: the model's context window, when known.

    Returns:
        The calibration to store.

    >>> weigh(Calibration(), 1900, 100)  # believed by observe alone: factor 0.25
    Calibration(factor=1.0, calls=0, spread=0.0)
    >>> weigh(Calibration(), 1000, 3900).factor  # a first ratio of 3.9 moves the factor to 2 only
    2.0
    """
    if doubt(estimated, reported, window=window) is not None:
        return calibration
    updated = observe(calibration, estimated, reported)
    factor = _clamp(updated.factor, calibration.factor / MAX_STEP, calibration.factor * MAX_STEP)
    return Calibration(factor, updated.calls, updated.spread)


def plausible(calibration: Calibration) -> float:
    """The factor an approximate profile budgets with: held inside the plausible band until
    :data:`EVIDENCE_CALLS` calls have been observed, then the factor as it is."""
    if calibration.calls >= EVIDENCE_CALLS:
        return calibration.factor
    return _clamp(calibration.factor, PLAUSIBLE_LOW, PLAUSIBLE_HIGH)


def safety_margin(calibration: Calibration, base: float = DEFAULT_MARGIN, *, approximate: bool = True) -> float:
    """The share added to an approximate count: ``base`` uncalibrated, fading into ``2 · spread``; 0 if exact.

    >>> safety_margin(Calibration())
    0.1
    >>> round(safety_margin(Calibration(1.5, 36, 0.0)), 4)
    0.01
    """
    if not approximate or base <= 0:
        return 0.0
    fresh = FADE_CALLS / (FADE_CALLS + calibration.calls)
    return base * fresh + (1.0 - fresh) * min(base, 2.0 * calibration.spread)


def drifts(calibration: Calibration) -> bool:
    """True when an exact profile's counts disagree with the provider's: the tokenizer mapping is wrong."""
    return calibration.calls >= DRIFT_CALLS and abs(calibration.factor - 1.0) > DRIFT_TOLERANCE


def _up(value: float) -> int:
    return max(0, math.ceil(value - 1e-9))


class CalibratedProfile(ChatFormatProfile):
    """An approximate profile whose counts are multiplied by ``scale`` (factor × (1 + margin)), rounded up.

    Counts come from the base profile (and its cache, so stored per-message counts stay the raw estimate).
    A message's whole cost (framing, name, text, media) is scaled and rounded up once, since the factor was
    measured on whole prompts; so is the reply priming. ``name`` and ``approximate`` are the base's: it is
    still the same estimate, corrected.
    """

    def __init__(self, base: ChatFormatProfile, calibration: Calibration, margin: float) -> None:
        super().__init__(base.name, approximate=base.approximate)
        self.base = base
        self.calibration = calibration
        self.margin = margin
        self.scale = calibration.factor * (1.0 + margin)
        self.reply_priming = _up(base.reply_priming * self.scale)

    def count_text(self, text: str) -> int:
        return _up(self.base.count(text) * self.scale)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        return [_up(n * self.scale) for n in self.base.count_many(texts)]

    def message_tokens(self, message: Message, text_tokens: int | None = None) -> int:
        """The base profile's cost of the message, scaled (``text_tokens``, a scaled text count, is unused)."""
        return _up(self.base.message_tokens(message) * self.scale)

    def count_messages(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        raw = self.base.count_many([m.text for m in messages])  # one batch for the engine
        costs = (self.base.message_tokens(m, t) for m, t in zip(messages, raw, strict=True))
        return self.reply_priming + sum(_up(cost * self.scale) for cost in costs)


def calibrated(
    profile: TokenizerProfile, calibration: Calibration, base_margin: float = DEFAULT_MARGIN, *, floor: float = 0.0
) -> TokenizerProfile:
    """The profile to budget with: an approximate chat-format profile scaled, any other one unchanged.

    Args:
        profile: the model's own profile (T2).
        calibration: the model's calibration.
        base_margin: the configured margin of an uncalibrated estimate.
        floor: a lower bound for the factor (a context-length error just proved the real ratio this high).

    Returns:
        A :class:`CalibratedProfile` for approximate profiles, ``profile`` itself for exact ones.
    """
    if not profile.approximate or not isinstance(profile, ChatFormatProfile):
        return profile
    if isinstance(profile, CalibratedProfile):
        profile = profile.base
    effective = calibration
    factor = max(plausible(calibration), floor)  # a floor was proven by the provider: it wins over the band
    if factor != calibration.factor:
        effective = Calibration(factor, calibration.calls, calibration.spread)
    return CalibratedProfile(profile, effective, safety_margin(calibration, base_margin))


def uncalibrated(profile: TokenizerProfile) -> TokenizerProfile:
    """The profile under a calibration (the one whose counts ratios are measured against)."""
    return profile.base if isinstance(profile, CalibratedProfile) else profile


def raw_count(profile: TokenizerProfile, messages: Sequence[Message]) -> int:
    """The uncalibrated whole-prompt count of ``messages``: the denominator of a ratio."""
    return uncalibrated(profile).count_messages(messages) if messages else 0


def label(calibration: Calibration, *, approximate: bool) -> str:
    """How reports name the count: ``approximate, calibrated ×1.54 from 37 calls`` (or why not)."""
    if not approximate:
        return f"exact, provider agrees ×{calibration.factor:.2f} over {calibration.calls} calls"
    if calibration.calls == 0:
        return "approximate, not calibrated yet"
    calls = "call" if calibration.calls == 1 else "calls"
    held = plausible(calibration)
    if held != calibration.factor:  # an implausible factor on thin evidence budgets as the band's edge
        return (
            f"approximate, calibrated ×{calibration.factor:.2f} from {calibration.calls} {calls}, "
            f"used as ×{held:.2f} until {EVIDENCE_CALLS} calls agree"
        )
    return f"approximate, calibrated ×{calibration.factor:.2f} from {calibration.calls} {calls}"


def report(calibration: Calibration, profile: TokenizerProfile, base_margin: float = DEFAULT_MARGIN) -> dict[str, Any]:
    """The calibration as the audit, preview, status and model view show it."""
    approximate = profile.approximate
    applied = isinstance(profile, CalibratedProfile)
    margin = profile.margin if isinstance(profile, CalibratedProfile) else 0.0
    scale = profile.scale if isinstance(profile, CalibratedProfile) else 1.0
    return {
        "factor": round(calibration.factor, 4),
        "calls": calibration.calls,
        "spread": round(calibration.spread, 4),
        "margin": round(margin if applied else safety_margin(calibration, base_margin, approximate=approximate), 4),
        "scale": round(scale, 4),
        "applied": applied,
        "drift": (not approximate) and drifts(calibration),
        "label": label(calibration, approximate=approximate),
    }


__all__ = [
    "DEFAULT_MARGIN",
    "CalibratedProfile",
    "Calibration",
    "calibrated",
    "doubt",
    "drifts",
    "label",
    "observe",
    "plausible",
    "raw_count",
    "report",
    "safety_margin",
    "uncalibrated",
    "weigh",
]
