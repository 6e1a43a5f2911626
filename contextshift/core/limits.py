"""The limits every layer enforces alike (the core, the API schemas and storage take them from here)."""

from __future__ import annotations

from typing import Final

#: C4: the legacy compaction ratio, the share of compactable history folded, lies strictly between these.
RATIO_ABOVE: Final = 0.0
RATIO_BELOW: Final = 1.0

#: The reply reserve when a bot sets none: at most this, the model's output limit and a quarter of the window.
DEFAULT_REPLY_RESERVE: Final = 1024
#: A bot's reply reserve: 0 means "not set" (the default above applies); anything else is taken as it is.
RESPONSE_RESERVE_MIN: Final = 0
RESPONSE_RESERVE_MAX: Final = 1_000_000


def ratio_ok(value: object) -> bool:
    """Whether ``value`` is a legacy compaction ratio (a number strictly between 0 and 1)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and RATIO_ABOVE < value < RATIO_BELOW


def reply_reserve(window: int, configured: int | None = None, max_output_tokens: int | None = None) -> int:
    """The tokens kept free for the reply in a context window of ``window`` tokens.

    Args:
        window: the model's context window (or the bot's context limit).
        configured: the bot's own reserve; None or 0 when it sets none.
        max_output_tokens: the model's output limit, when known.

    Returns:
        ``configured`` when it is set, else the smallest of :data:`DEFAULT_REPLY_RESERVE`, ``max_output_tokens``
        and a quarter of ``window`` (at least 1).
    """
    if configured:
        return configured
    candidates = [DEFAULT_REPLY_RESERVE, window // 4]
    if max_output_tokens:
        candidates.append(max_output_tokens)
    return max(1, min(candidates))
