"""The one step after a context-length rejection (T5): learn the real size, and say how to fit again.

When a provider rejects a prompt as too long, the rejection usually states the real count ("your messages
resulted in 3077 tokens"). That count over our uncalibrated count of the same prompt is the ratio: it is
stored as a calibration observation of the model, and the prompt is fitted again at that ratio (never below
the stored factor). Without a stated count the prompt is assumed :data:`RETRY_GROWTH` larger than the count
that was sent. A smaller limit stated by the provider replaces the window.

Every caller (a chat turn, an endpoint call, a compaction pass) fits its own way; what they share is
:func:`learn_refit` and its :class:`Refit`, and the one resend :mod:`.engine` allows.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from ...core.calibration import CalibratedProfile, Calibration, uncalibrated
from ...core.tokens import ChatFormatProfile, TokenizerProfile
from ...providers import ProviderError
from ...storage import Database, Repositories

log = logging.getLogger("contextshift.calls")

#: Without a stated count: the prompt was at least this much larger than the count that was sent.
RETRY_GROWTH = 1.25
#: On top of a stated ratio: the provider's count of the shorter prompt may round differently.
RETRY_MARGIN = 0.02
#: The audit's name of an attempt that was rejected as too long and fitted again.
CONTEXT_LENGTH_RETRY = "context-length-retry"


def corrected(profile: TokenizerProfile, calibration: Calibration, ratio: float) -> TokenizerProfile | None:
    """The profile that counts at ``ratio`` (never below the stored factor), or None if it cannot scale."""
    base = uncalibrated(profile)
    if not isinstance(base, ChatFormatProfile):
        return None
    factor = max(calibration.factor, ratio)
    return CalibratedProfile(base, Calibration(factor, calibration.calls, calibration.spread), RETRY_MARGIN)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the rejected prompt was: our uncalibrated count (``estimated``), the count we fitted it with
    (``sent``), and the window and reserve it was fitted to."""

    estimated: int
    sent: int
    window: int
    reserve: int = 0


@dataclass(frozen=True, slots=True)
class Refit:
    """How to fit again: at ``ratio``, with ``profile`` (None: the base profile cannot scale, so fit to
    :attr:`shrunk_window` instead) within ``window``; ``attempt`` is the audit's record of the rejection."""

    ratio: float
    calibration: Calibration
    profile: TokenizerProfile | None
    window: int
    reserve: int
    attempt: dict[str, Any]

    @property
    def shrunk_window(self) -> int:
        """The window that leaves room for the prompt at ``ratio`` when the profile cannot be scaled."""
        return self.reserve + math.floor((self.window - self.reserve) / (self.ratio * 1.02))


async def learn_refit(
    db: Database,
    *,
    model_id: str | None,
    base: TokenizerProfile,
    calibration: Calibration,
    seen: Seen,
    reported: int | None,
    reported_limit: int | None = None,
    outcome: str = CONTEXT_LENGTH_RETRY,
    code: str | None = None,
) -> Refit:
    """The refit after the provider counted ``reported`` tokens (None: it did not say) of a prompt we saw as
    ``seen``; a stated count is stored as a calibration observation of ``model_id`` (a failure to store it is
    logged: the refit still uses the ratio)."""
    if reported and seen.estimated:
        ratio = reported / seen.estimated
        if model_id is not None:
            try:
                async with db.session() as session:
                    calibration = await Repositories(session).calibrations.observe(
                        model_id, base.name, seen.estimated, reported
                    )
            except Exception as failure:
                log.warning("could not record the calibration of %s (%s)", model_id, type(failure).__name__)
    else:
        ratio = (seen.sent / seen.estimated if seen.estimated else 1.0) * RETRY_GROWTH
    window = seen.window
    if reported_limit and reported_limit < window:
        window = reported_limit
    attempt = {
        "outcome": outcome,
        "error_code": code,
        "prompt_tokens": seen.sent,
        "estimated_tokens": seen.estimated,
        "reported_tokens": reported,
        "reported_limit": reported_limit,
        "ratio": round(ratio, 4),
    }
    profile = corrected(base, calibration, ratio)
    return Refit(ratio, calibration, profile, window, seen.reserve, attempt)


async def refit_after(
    db: Database,
    error: ProviderError,
    *,
    model_id: str | None,
    base: TokenizerProfile,
    calibration: Calibration,
    seen: Seen,
) -> Refit:
    """:func:`learn_refit` after a provider's context-length rejection ``error``."""
    return await learn_refit(
        db,
        model_id=model_id,
        base=base,
        calibration=calibration,
        seen=seen,
        reported=error.reported_tokens,
        reported_limit=error.reported_limit,
        code=error.code,
    )


__all__ = [
    "CONTEXT_LENGTH_RETRY",
    "RETRY_GROWTH",
    "RETRY_MARGIN",
    "Refit",
    "Seen",
    "corrected",
    "learn_refit",
    "refit_after",
]
