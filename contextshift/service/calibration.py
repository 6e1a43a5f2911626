"""Calibrated counts in the service (T5): the profile a turn budgets with, and learning from the provider.

The model's own profile (T2) counts; its stored :class:`~contextshift.core.calibration.Calibration`
(one per model and profile, shared by every instance through the database) scales approximate counts
and adds the safety margin. After every successful call the provider's prompt tokens are compared with
the uncalibrated count of the exact request that was sent, and the ratio is folded into the stored factor.
The margin of an uncalibrated estimate is ``CONTEXTSHIFT_ESTIMATE_MARGIN`` (a share, default 0.10), handed down
by the services (``Rules.estimate_margin``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.calibration import DEFAULT_MARGIN, Calibration, calibrated, doubt, report
from ..core.messages import Message
from ..core.tokens import TokenizerProfile
from ..pipeline import payload_tokens
from ..providers import Usage
from ..storage import Database, Repositories
from ..storage.tables import ModelRow

log = logging.getLogger("contextshift.calibration")


@dataclass(frozen=True, slots=True)
class Counting:
    """How one model's prompts are counted: its own profile, its calibration and the profile that budgets."""

    base: TokenizerProfile
    calibration: Calibration
    profile: TokenizerProfile
    #: The margin of an uncalibrated estimate it was made with (``CONTEXTSHIFT_ESTIMATE_MARGIN``).
    margin: float = DEFAULT_MARGIN

    def report(self, profile: TokenizerProfile | None = None) -> dict[str, Any]:
        return report(self.calibration, profile or self.profile, self.margin)


async def counting_for(
    repos: Repositories, model: ModelRow | None, base: TokenizerProfile, margin: float = DEFAULT_MARGIN
) -> Counting:
    """The model's counting now (an unknown or unsaved model: uncalibrated, with the full ``margin``)."""
    calibration = await repos.calibrations.get(model.id, base.name) if model is not None else Calibration()
    return counting_of(base, calibration, margin)


def counting_of(base: TokenizerProfile, calibration: Calibration, margin: float = DEFAULT_MARGIN) -> Counting:
    """The counting of a model whose calibration under ``base`` is ``calibration``; ``margin``: that of an
    uncalibrated estimate (``Rules.estimate_margin``)."""
    return Counting(base, calibration, calibrated(base, calibration, margin), margin)


#: The audit key that says a provider's prompt count was not believed (a suspected truncation).
DOUBTED = "calibration_doubted"


def estimate_of(base: TokenizerProfile, sent: dict[str, Any] | Sequence[Message] | int) -> int:
    """The base profile's (uncalibrated) count of the exact request ``sent``."""
    if isinstance(sent, int):
        return sent
    return payload_tokens(sent, base) if isinstance(sent, dict) else base.count_messages(list(sent))


def doubted(model: ModelRow | None, estimated: int, usage: Usage | None) -> dict[str, Any] | None:
    """What the audit says when the provider's prompt count is not believed (T5), or None when it is.

    Args:
        model: the model called (its ``context_window`` is the server's context size).
        estimated: the uncalibrated count of the request sent.
        usage: the provider's usage.

    Returns:
        ``{"reason", "reported_tokens", "estimated_tokens"}``: the report was not folded into the factor.
    """
    if model is None or usage is None or usage.input_tokens <= 0:
        return None
    reason = doubt(estimated, usage.input_tokens, window=model.context_window)
    if reason is None:
        return None
    log.warning(
        "model %s reported %d prompt tokens for a request counted as %d (%s): not used for calibration",
        model.id,
        usage.input_tokens,
        estimated,
        reason,
    )
    return {"reason": reason, "reported_tokens": usage.input_tokens, "estimated_tokens": estimated}


def doubt_diagnostic(note: dict[str, Any]) -> str:
    """The audit's sentence for a report that was not believed (:func:`doubted`)."""
    return (
        f"the provider reported {note['reported_tokens']:,} prompt tokens for a request counted as "
        f"{note['estimated_tokens']:,}: a suspected truncation ({note['reason']}), not used to calibrate"
    )


async def learn(
    db: Database,
    model: ModelRow | None,
    base: TokenizerProfile,
    sent: dict[str, Any] | Sequence[Message] | int,
    usage: Usage | None,
) -> Calibration | None:
    """Fold one successful call into the model's factor; never fails the caller (the reply is already stored).
    A doubted report (:func:`doubted`) changes nothing.

    ``sent`` is the exact request: a serialized payload (``{"messages", "system"}``), its core messages, or
    the base profile's count of it.
    """
    if model is None or usage is None or usage.input_tokens <= 0:
        return None
    estimated = estimate_of(base, sent)
    try:
        async with db.session() as session:
            return await Repositories(session).calibrations.observe(
                model.id, base.name, estimated, usage.input_tokens, window=model.context_window
            )
    except Exception as error:  # a lost observation only delays calibration
        log.warning("could not record the calibration of model %s (%s)", model.id, type(error).__name__)
        return None
