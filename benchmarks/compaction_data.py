"""The scripted session of the compaction benchmark, and the rule its fake summarizer follows.

The session is a list of exchanges: a user message of 20–120 words and the reply the fake chat model gives
to it (40–60 words), over the same seeded vocabulary as the service benchmark (``service_data.Words``), so
practically every text is distinct. The same exchanges drive the service (compaction on and off) and the
simulated Codex-like baseline.

The fake summarizer must behave alike for contextshift's passes and for the baseline, so its rule lives
here: a summary is :data:`SUMMARY_SHARE` of the transcript it was given (at least
:data:`SUMMARY_MIN_TOKENS`, at most the request's ``max_tokens`` less one, so that it always stops
naturally), made of the transcript's own words. Rolling a summary up with newer messages therefore gives a
summary of the same share of the whole, as a real model merging "earlier summary + new messages" would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .service_data import SYSTEM_PROMPT, Words

__all__ = ["SYSTEM_PROMPT", "Exchange", "session", "summary_length", "summary_text", "transcript_body"]

#: A summary is this share of the transcript it condenses (both policies, same rule).
SUMMARY_SHARE = 0.15
SUMMARY_MIN_TOKENS = 40
TRANSCRIPT_OPEN = "<transcript>"
TRANSCRIPT_CLOSE = "</transcript>"
#: Transcript lines that are framing, not content (contextshift's renderer writes them around a summary).
_MARKERS = ("[earlier summary", "[end of earlier summary]", "=== workspace:")


@dataclass(frozen=True, slots=True)
class Exchange:
    user: str
    reply: str


def session(turns: int, seed: str = "compaction") -> list[Exchange]:
    """``turns`` exchanges (user 20–120 words, reply 40–60 words), deterministic for a seed; users distinct."""
    words = Words(f"contextshift-compaction-bench:{seed}", rare_words=3000)
    out: list[Exchange] = []
    seen: set[str] = set()
    while len(out) < turns:
        user = words.text(20, 120)
        reply = words.text(40, 60)
        if user in seen:  # the fake finds a reply by its user message: keep them unique
            continue
        seen.add(user)
        out.append(Exchange(user, reply))
    return out


def transcript_body(user_message: str) -> str:
    """The part of a summarizer request's user message between ``<transcript>`` and ``</transcript>``."""
    start = user_message.find(TRANSCRIPT_OPEN)
    end = user_message.rfind(TRANSCRIPT_CLOSE)
    if start < 0 or end < start:
        return user_message
    return user_message[start + len(TRANSCRIPT_OPEN) : end].strip()


def summary_length(transcript_tokens: int, max_tokens: int | None) -> int:
    """Tokens of the summary of a transcript of ``transcript_tokens`` (capped by the request's max_tokens)."""
    wanted = max(SUMMARY_MIN_TOKENS, round(SUMMARY_SHARE * transcript_tokens))
    if max_tokens is not None and max_tokens > 1:
        wanted = min(wanted, max_tokens - 1)
    return max(1, wanted)


def summary_text(body: str, tokens: int, count: Callable[[str], int]) -> str:
    """A deterministic "summary" of about ``tokens`` tokens (never more), from the transcript's own words."""
    words: list[str] = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith(_MARKERS):
            continue
        head, sep, rest = line.partition(": ")
        if sep and head in ("user", "assistant", "system", "tool"):
            line = rest
        words.extend(line.split())
    prefix = "Summary:"
    if not words:
        return f"{prefix} nothing to keep."
    low, high = 1, len(words)  # the most words whose text fits ``tokens``
    while low < high:
        mid = (low + high + 1) // 2
        if count(f"{prefix} {' '.join(words[:mid])}") <= tokens:
            low = mid
        else:
            high = mid - 1
    return f"{prefix} {' '.join(words[:low])}"
