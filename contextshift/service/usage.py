"""The usage of a reply, when the provider reports none (V3, C14).

Some servers ignore ``stream_options.include_usage`` (llama-cpp-python), so a streamed reply can end without
any usage. Then the prompt's count is what the pipeline measured with the turn's best profile (exact when the
server tokenized it) and the reply is counted with the same profile; the usage is marked ``estimated``.
"""

from __future__ import annotations

from typing import Any

from ..core.tokens import TokenizerProfile
from ..pipeline import PipelineResult
from ..providers import ChatResult


def reported_usage(reply: ChatResult) -> dict[str, Any] | None:
    if reply.usage is None:
        return None
    return {
        "input_tokens": reply.usage.input_tokens,
        "output_tokens": reply.usage.output_tokens,
        "cached_input_tokens": reply.usage.cached_input_tokens,
    }


def estimated_usage(reply: ChatResult, result: PipelineResult, profile: TokenizerProfile) -> dict[str, Any]:
    """Usage from the turn's own counts; ``estimated`` says the provider did not report it."""
    return {
        "input_tokens": int(result.budget["prompt_tokens"]),
        "output_tokens": profile.count(reply.text) if reply.text else 0,
        "cached_input_tokens": 0,
        "estimated": True,
    }


def usage_of(reply: ChatResult, result: PipelineResult, profile: TokenizerProfile | None) -> dict[str, Any] | None:
    """The provider's usage, or (with a profile) the estimate."""
    reported = reported_usage(reply)
    if reported is not None or profile is None:
        return reported
    return estimated_usage(reply, result, profile)
