"""Token counting (T1–T4): the profile protocol, the script-aware approximate profile and message costs.

A *counter* is either a plain callable ``str -> int`` or a :class:`TokenizerProfile`. Plain callables are
charged ``count(text) + per_message_overhead`` per message; a profile's own ``count_messages`` decides
(it knows the chat format's per-message and priming overhead). Exact profiles live in
``contextshift.tokenizers``; this module stays free of any tokenizer engine.
"""

from __future__ import annotations

import contextlib
import math
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Protocol, runtime_checkable

from .messages import Message

TokenCounter = Callable[[str], int]

#: T3: fixed cost of one image part and one file part, for plain callable counters.
IMAGE_PART_TOKENS = 765  # OpenAI's price of a high-detail 1024x1024 image: 85 + 4 tiles x 170
FILE_PART_TOKENS = 1024

#: OpenAI chat format: every message costs 3 tokens of framing, a ``name`` one more, and the reply is
#: primed with 3 tokens (``<|start|>assistant<|message|>``).
OPENAI_TOKENS_PER_MESSAGE = 3
OPENAI_TOKENS_PER_NAME = 1
OPENAI_REPLY_PRIMING = 3


@runtime_checkable
class TokenizerProfile(Protocol):
    """T1: a named way of counting tokens for one provider's chat format (a Protocol).

    Any object with these members is a profile; ``contextshift.get_tokenizer`` gives the built-in ones.
    ``name`` names it, ``approximate`` says whether its counts are an estimate, ``count(text)`` counts one
    text and ``count_messages(messages)`` counts a whole prompt (framing and reply priming included).
    """

    @property
    def name(self) -> str:
        """The profile's name, as audits, previews and diagnostics report it."""
        ...

    @property
    def approximate(self) -> bool:
        """Whether counts are an estimate (then the service calibrates and adds a margin, T5)."""
        ...

    def count(self, text: str) -> int:
        """Count one text.

        Args:
            text: the text (a message's content, a tool call's name and arguments...).

        Returns:
            Its tokens, without any chat framing.
        """
        ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Count a whole prompt as the provider will see it.

        Args:
            messages: the prompt, in order.

        Returns:
            Its tokens, per-message framing and reply priming included (0 for an empty prompt).
        """
        ...


class CountCache:
    """T4: counts memoized by content (a bounded LRU keyed by the text itself, i.e. by its hash)."""

    __slots__ = ("_entries", "hits", "limit", "misses")

    def __init__(self, limit: int = 200_000) -> None:
        self._entries: OrderedDict[str, int] = OrderedDict()
        self.limit = limit
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> int | None:
        value = self._entries.get(text)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        with contextlib.suppress(KeyError):  # another thread (a compaction pass) evicted it meanwhile
            self._entries.move_to_end(text)
        return value

    def get_many(self, texts: Sequence[str]) -> list[int | None]:
        """:meth:`get` of each text, in one pass (an empty text counts 0 and is not looked up)."""
        entries = self._entries
        found = entries.get
        out = [found(t) if t else 0 for t in texts]
        move = entries.move_to_end
        hits = 0
        for text, value in zip(texts, out, strict=True):
            if value is not None and text:
                hits += 1
                try:  # noqa: SIM105 (a try costs nothing here; suppress() would be a context manager per text)
                    move(text)
                except KeyError:  # another thread (a compaction pass) evicted it meanwhile
                    pass
        self.hits += hits
        self.misses += sum(1 for value in out if value is None)
        return out

    def put(self, text: str, value: int) -> None:
        self._entries[text] = value
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class ChatFormatProfile:
    """A profile that counts text with ``count_text`` and adds OpenAI-style chat framing.

    Subclasses implement :meth:`count_text` (and optionally :meth:`count_texts` for batches); this class
    adds the content cache, media costs and the whole-prompt count.

    Args:
        name: the profile's name (reported in audits and diagnostics).
        approximate: whether its counts are an estimate rather than the provider's own.
        cache_limit: how many texts the count cache (keyed by the text) holds.
    """

    image_tokens: int = IMAGE_PART_TOKENS
    file_tokens: int = FILE_PART_TOKENS
    tokens_per_message: int = OPENAI_TOKENS_PER_MESSAGE
    tokens_per_name: int = OPENAI_TOKENS_PER_NAME
    reply_priming: int = OPENAI_REPLY_PRIMING

    def __init__(self, name: str, *, approximate: bool, cache_limit: int = 200_000) -> None:
        self._name = name
        self._approximate = approximate
        self.cache = CountCache(cache_limit)

    @property
    def name(self) -> str:
        """The profile's name, as audits, previews and diagnostics report it."""
        return self._name

    @property
    def approximate(self) -> bool:
        """Whether counts are an estimate rather than the provider's own."""
        return self._approximate

    def count_text(self, text: str) -> int:
        """Count one text with the engine, uncached (subclasses implement it).

        Args:
            text: a non-empty text.

        Returns:
            Its tokens.

        Raises:
            NotImplementedError: the subclass does not count.
        """
        raise NotImplementedError

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Count many texts with the engine, uncached; subclasses with a batch call override it.

        Args:
            texts: non-empty texts.

        Returns:
            Their tokens, in the same order.
        """
        return [self.count_text(t) for t in texts]

    def count(self, text: str) -> int:
        """Count one text, through the content cache (T4).

        Args:
            text: the text.

        Returns:
            Its tokens (0 for an empty text), without chat framing.
        """
        if not text:
            return 0
        cached = self.cache.get(text)
        if cached is None:
            cached = self.count_text(text)
            self.cache.put(text, cached)
        return cached

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts for many texts, sending only the uncached ones to the engine, in one batch.

        Args:
            texts: the texts (empty ones count 0).

        Returns:
            Their tokens, in the same order.
        """
        out = self.cache.get_many(texts)
        missing = [i for i, value in enumerate(out) if value is None]
        if missing:
            fresh = self.count_texts([texts[i] for i in missing])
            for i, value in zip(missing, fresh, strict=True):
                self.cache.put(texts[i], value)
                out[i] = value
        return [v if v is not None else 0 for v in out]

    def message_tokens(self, message: Message, text_tokens: int | None = None) -> int:
        """One message's cost in this chat format: framing, name, text, media.

        Args:
            message: the message.
            text_tokens: its text's count when the caller has it already (counted here otherwise).

        Returns:
            Its tokens, without the prompt's reply priming.
        """
        tokens = self.tokens_per_message + (self.count(message.text) if text_tokens is None else text_tokens)
        if message.name:
            tokens += self.tokens_per_name + self.count(message.name)
        images, files = message.media_parts()
        return tokens + images * self.image_tokens + files * self.file_tokens

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Count a whole prompt in this chat format (T1).

        Args:
            messages: the prompt, in order.

        Returns:
            Its tokens: each message's cost plus the reply priming (0 for an empty prompt).
        """
        if not messages:
            return 0
        texts = self.count_many([m.text for m in messages])
        return self.reply_priming + sum(self.message_tokens(m, t) for m, t in zip(messages, texts, strict=True))


# -- the approximate profile ------------------------------------------------------------------------------

#: Characters per token by script. Latin text is about 4 characters a token; scripts that BPE
#: vocabularies cover thinly cost more. The rates err on the high side so an estimate rarely undercounts.
CHARS_PER_TOKEN: dict[str, float] = {
    "latin": 4.0,  # letters, spaces and punctuation of Latin-script text
    "digit": 2.0,
    "cyrillic": 2.5,  # also Greek, Armenian, Georgian
    "cjk": 1.0,  # Han, kana, Hangul
    "other": 2.0,  # Arabic, Hebrew, Indic, Thai and the rest
    "emoji": 0.5,  # pictographs and other symbols: about two tokens each
}


def _script(char: str) -> str:
    code = ord(char)
    if code < 0x80:
        return "digit" if char.isdigit() else "latin"
    if 0x0370 <= code <= 0x058F or 0x10A0 <= code <= 0x10FF:
        return "cyrillic"
    if (
        0x2E80 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF
        or 0x20000 <= code <= 0x3FFFF
    ):
        return "cjk"
    category = unicodedata.category(char)
    if category.startswith("Nd"):
        return "digit"
    if category == "So" or 0x1F000 <= code <= 0x1FAFF:
        return "emoji"
    if code <= 0x024F or category[0] in "PZ" or category in ("Mn", "Sk", "Sm", "Sc", "Cf"):
        return "latin"
    return "other"


def approximate_count(text: str) -> int:
    """The script-aware estimate of a text's tokens, offline.

    Each character costs 1/rate tokens, the rate depending on its script (Latin, digits, CJK...).

    Args:
        text: the text to count.

    Returns:
        The sum rounded up: 0 only for ``""``, at least 1 otherwise.
    """
    if not text:
        return 0
    if text.isascii():
        digits = sum(1 for c in text if c.isdigit()) if any(c.isdigit() for c in text) else 0
        total = (len(text) - digits) / CHARS_PER_TOKEN["latin"] + digits / CHARS_PER_TOKEN["digit"]
    else:
        total = 0.0
        for char in text:
            total += 1.0 / CHARS_PER_TOKEN[_script(char)]
    return max(1, math.ceil(total - 1e-9))


class ApproximateProfile(ChatFormatProfile):
    """T2: the offline estimate used for unknown models (:func:`approximate_count` plus OpenAI-style chat
    framing); every report marks it approximate.

    Args:
        name: the profile's name.
    """

    def __init__(self, name: str = "approximate") -> None:
        super().__init__(name, approximate=True)

    def count_text(self, text: str) -> int:
        """Estimate one text with :func:`approximate_count`.

        Args:
            text: the text.

        Returns:
            Its estimated tokens.
        """
        return approximate_count(text)


# -- message costs for shifting ---------------------------------------------------------------------------


def checked_count(value: object, message_id: str) -> int:
    """A counter's ``value`` for a message, if it is a count (a non-negative integer)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"message {message_id}: the token counter returned {value!r}, not an integer")
    if value < 0:
        raise ValueError(f"message {message_id}: the token counter returned a negative count ({value})")
    return value


def check_overhead(per_message_overhead: object) -> int:
    if isinstance(per_message_overhead, bool) or not isinstance(per_message_overhead, int):
        raise TypeError("per_message_overhead must be an integer")
    if per_message_overhead < 0:
        raise ValueError("per_message_overhead must not be negative")
    return per_message_overhead


def is_profile(counter: object) -> bool:
    """Whether ``counter`` is a :class:`TokenizerProfile` rather than a plain callable.

    A plain function with no attributes of its own has none of a profile's members, so it is not one; only
    another callable takes the (slower) runtime Protocol check (see "Speed notes" in docs/design.md).
    """
    if type(counter) is FunctionType and not counter.__dict__:
        return False
    return isinstance(counter, TokenizerProfile)


def check_counter(counter: object) -> None:
    """Reject a counter that is neither a callable nor a profile (a profile is checked before calling this)."""
    if not callable(counter):
        raise TypeError("count_tokens must be a callable str -> int or a tokenizer profile")


def media_tokens(message: Message) -> int:
    """T3: the fixed cost a plain callable counter is charged for a message's image and file parts."""
    images, files = message.media_parts()
    return images * IMAGE_PART_TOKENS + files * FILE_PART_TOKENS


def callable_cost(message: Message, counter: TokenCounter, per_message_overhead: int) -> int:
    """``count(text) + per_message_overhead`` for one message, plus the fixed cost of its image and file parts.

    Raises:
        TypeError: the counter returned something that is not an integer (the error names the message).
        ValueError: the counter returned a negative count.
    """
    text = message._text
    if text is None:
        text = message.text
    counted = counter(text)
    if type(counted) is not int or counted < 0:
        counted = checked_count(counted, message.id)
    content = message.content
    if content is not text and isinstance(content, tuple):  # a string content is its own text
        counted += media_tokens(message)
    return counted + per_message_overhead


def callable_costs(messages: Sequence[Message], counter: TokenCounter, per_message_overhead: int) -> list[int]:
    """:func:`callable_cost` of each message."""
    return [callable_cost(message, counter, per_message_overhead) for message in messages]


def profile_costs(profile: ChatFormatProfile, messages: Sequence[Message]) -> list[int]:
    """A chat-format profile's cost of each message, its texts counted in one batch."""
    texts = profile.count_many([m.text for m in messages])
    if type(profile).message_tokens is not ChatFormatProfile.message_tokens:
        return [profile.message_tokens(m, t) for m, t in zip(messages, texts, strict=True)]
    plain = profile.tokens_per_message  # a message with a string content and no name: framing and text only
    return [
        plain + t if type(m.content) is str and not m.name else profile.message_tokens(m, t)
        for m, t in zip(messages, texts, strict=True)
    ]


def message_costs(
    messages: Sequence[Message], counter: TokenCounter | TokenizerProfile, per_message_overhead: int
) -> tuple[list[int], int]:
    """Each message's cost and the fixed cost of the prompt as a whole (reply priming).

    A plain callable is charged ``count(text) + per_message_overhead`` per message (plus the fixed cost of
    image and file parts). A profile is asked for its own per-message cost: ``message_tokens`` where it has
    one, otherwise ``count_messages([m]) - count_messages([])`` less its priming.
    """
    check_overhead(per_message_overhead)
    if isinstance(counter, ChatFormatProfile):
        return profile_costs(counter, messages), counter.reply_priming if messages else 0
    if isinstance(counter, TokenizerProfile):
        empty = checked_count(counter.count_messages([]), "(empty prompt)")
        costs = []
        for message in messages:
            one = checked_count(counter.count_messages([message]), message.id)
            costs.append(max(0, one - empty))
        return costs, empty
    check_counter(counter)
    return callable_costs(messages, counter, per_message_overhead), 0


def prompt_tokens(
    messages: Sequence[Message], counter: TokenCounter | TokenizerProfile, per_message_overhead: int
) -> int:
    """A fresh count of a whole prompt, by the same rules shifting uses (S6)."""
    if isinstance(counter, TokenizerProfile) and not isinstance(counter, ChatFormatProfile):
        return checked_count(counter.count_messages(list(messages)), "(prompt)") if messages else 0
    costs, fixed = message_costs(messages, counter, per_message_overhead)
    return sum(costs) + fixed
