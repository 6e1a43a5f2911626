"""The context window and output limit of well-known hosted models, to prefill a model's settings.

Only a suggestion for the model form: a model's own ``context_window`` (what the service budgets with) is
always what its admin saved. Names resolve as the tokenizer profiles do: case-insensitive, a router's prefix
(``openai/gpt-4o``) and a dated suffix (``gpt-4o-2024-08-06``) ignored; the first pattern that matches wins,
so a more specific name stands before its family. Figures are the providers' published limits (model pages
of OpenAI and Anthropic).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """Tokens: the whole context window (prompt and reply), and the longest reply the model can give."""

    context_window: int
    max_output_tokens: int | None


_KNOWN: tuple[tuple[re.Pattern[str], ModelLimits], ...] = tuple(
    (re.compile(pattern), ModelLimits(window, output))
    for pattern, window, output in (
        # OpenAI
        (r"^gpt-5", 400_000, 128_000),
        (r"^gpt-4\.1", 1_047_576, 32_768),
        (r"^(gpt-4o|chatgpt-4o)", 128_000, 16_384),
        (r"^gpt-4-turbo|^gpt-4-\d{4}-preview", 128_000, 4_096),
        (r"^gpt-4-32k", 32_768, None),
        (r"^gpt-4(-\d{4})?$", 8_192, 8_192),
        (r"^gpt-3\.5-turbo", 16_385, 4_096),
        (r"^o1-mini", 128_000, 65_536),
        (r"^(o1|o3|o4-mini)", 200_000, 100_000),
        (r"^gpt-oss", 131_072, 131_072),
        # Anthropic
        (r"^claude-(opus-4|4-opus)", 200_000, 32_000),
        (r"^claude-(sonnet-4|4-sonnet|3-7-sonnet|haiku-4)", 200_000, 64_000),
        (r"^claude-3-5-", 200_000, 8_192),
        (r"^claude-3-", 200_000, 4_096),
    )
)


def known_limits(model_name: str) -> ModelLimits | None:
    """The published limits of a well-known model, or None for a model this table does not know.

    Args:
        model_name: the provider's name for the model (``gpt-4o-mini``, ``anthropic/claude-sonnet-4-5``).

    Returns:
        Its :class:`ModelLimits`, or None.
    """
    name = model_name.strip().lower().rsplit("/", 1)[-1]
    for pattern, limits in _KNOWN:
        if pattern.match(name):
            return limits
    return None
