"""A tokenizer profile that serves counts fetched from elsewhere (T1, T4, T5), with no I/O of its own.

Some counts can only come from outside the process: a local model server tokenizes with the model's own
vocabulary and chat template (llama.cpp ``/tokenize``, llama-cpp-python ``/extras/tokenize``, vLLM
``/tokenize``). The pipeline is synchronous and pure, so it cannot ask; instead an adapter fetches the counts
(batched, cached by content) and this profile serves them.

A text the profile has not been given is *estimated* with its fallback profile and remembered as missing; the
adapter takes the missing texts, fetches them, and the caller builds the prompt again. While anything is
missing the profile says it is approximate, so no report passes an estimate off as exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .tokens import ChatFormatProfile, CountCache, TokenizerProfile


@dataclass(frozen=True, slots=True)
class ChatFraming:
    """What a chat template adds: tokens per message (role markers), per name, and to prime the reply."""

    tokens_per_message: int
    reply_priming: int
    tokens_per_name: int = 1

    def __post_init__(self) -> None:
        for field_name in ("tokens_per_message", "reply_priming", "tokens_per_name"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{field_name} must be a non-negative integer, not {value!r}")

    @classmethod
    def measured(
        cls, *, one_turn: int, three_turns: int, texts_one: int, texts_three: int, tokens_per_name: int = 1
    ) -> ChatFraming:
        """The framing from two whole-prompt counts: ``[user]`` and ``[user, assistant, user]``.

        ``one_turn`` / ``three_turns`` are the server's counts of the templated prompts, ``texts_one`` /
        ``texts_three`` the counts of their message texts alone. Roles can differ by a token, so the per-message
        cost is rounded up, and everything else (BOS, a default system prompt the template adds, the reply
        priming) is the fixed cost: the framing never undercounts those two prompts.
        """
        per_message = max(0, math.ceil((three_turns - one_turn - (texts_three - texts_one)) / 2))
        priming = max(0, one_turn - texts_one - per_message)
        return cls(tokens_per_message=per_message, reply_priming=priming, tokens_per_name=tokens_per_name)


class FetchedCountsProfile(ChatFormatProfile):
    """Counts from ``cache`` (filled by an adapter); the rest estimated by ``fallback`` and listed as missing.

    One instance per prompt being built (its ``missing`` set is its own); the ``cache`` is shared by every
    instance for the same server and model, so each text is fetched at most once in its life (T4).
    """

    def __init__(
        self,
        name: str,
        *,
        cache: CountCache,
        framing: ChatFraming,
        fallback: TokenizerProfile,
    ) -> None:
        super().__init__(name, approximate=False, cache_limit=1)
        self.cache = cache
        self.fallback = fallback
        self.tokens_per_message = framing.tokens_per_message
        self.reply_priming = framing.reply_priming
        self.tokens_per_name = framing.tokens_per_name
        self.framing = framing
        self._missing: dict[str, None] = {}

    @property
    def approximate(self) -> bool:
        """True while some count in use is the fallback's estimate."""
        return bool(self._missing)

    @property
    def missing(self) -> list[str]:
        """Texts counted by estimate since the last :meth:`take_missing`, in first-use order."""
        return list(self._missing)

    def take_missing(self) -> list[str]:
        """The missing texts, forgetting them (the caller fetches them, then builds the prompt again)."""
        missing = list(self._missing)
        self._missing.clear()
        return missing

    def provide(self, counts: dict[str, int]) -> None:
        """Store fetched counts (by text)."""
        for text, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"a fetched count must be a non-negative integer, not {value!r}")
            self.cache.put(text, value)
            self._missing.pop(text, None)

    def count_text(self, text: str) -> int:
        return self.count(text)

    def count(self, text: str) -> int:
        if not text:
            return 0
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        self._missing[text] = None
        return self.fallback.count(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]


__all__ = ["ChatFraming", "FetchedCountsProfile"]
