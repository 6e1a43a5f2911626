"""Exact tokenizer profiles (T2) and model-name resolution, all offline.

- ``o200k_base`` and ``cl100k_base`` (and Qwen 3.5's vocabulary) count with ``toktok``, whose BPE
  vocabularies are compiled into the wheel: nothing is downloaded, ever. Counts equal tiktoken's.
- A Hugging Face ``tokenizer.json`` on disk gives an exact profile through the ``tokenizers`` package.
- Anything else resolves to the script-aware ``approximate`` profile, which says so.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import toktok

from ..core.tokens import ApproximateProfile, ChatFormatProfile, TokenizerProfile
from . import chat_template

__all__ = [
    "ApproximateProfile",
    "HuggingFaceProfile",
    "TiktokenProfile",
    "get_tokenizer",
    "resolve_encoding",
]


class TiktokenProfile(ChatFormatProfile):
    """An exact OpenAI BPE encoding with the chat format's framing (3 per message, 1 per name, 3 priming)."""

    def __init__(self, encoding: str, *, tokens_per_message: int = 3) -> None:
        super().__init__(encoding, approximate=False)
        self.encoding = encoding
        self.tokens_per_message = tokens_per_message
        toktok.batch_count([""], encoding, 1)  # fail now on an unknown encoding, and load it once

    def count_text(self, text: str) -> int:
        """Count one text with the BPE encoding, uncached.

        Args:
            text: a non-empty text.

        Returns:
            Its tokens, as tiktoken counts them.

        Raises:
            TypeError: ``text`` is not a ``str``.
            UnicodeEncodeError: ``text`` holds a lone surrogate, which has no UTF-8 form (a ``ValueError``).
        """
        return int(toktok.batch_count([text], self.encoding, 1)[0])

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Count many texts with the BPE encoding in one call (on every core from 512 texts), uncached.

        Args:
            texts: non-empty texts.

        Returns:
            Their tokens, in the same order.

        Raises:
            TypeError: one of ``texts`` is not a ``str``.
            UnicodeEncodeError: one holds a lone surrogate, which has no UTF-8 form (a ``ValueError``).
        """
        threads = 1 if len(texts) < 512 else 0
        return [int(n) for n in toktok.batch_count(list(texts), self.encoding, threads)]


class HuggingFaceProfile(ChatFormatProfile):
    """An exact profile from a local Hugging Face ``tokenizer.json``.

    The chat framing comes from the model's own ``chat_template`` in the ``tokenizer_config.json`` beside it,
    rendered with Jinja and measured (``template_measured`` is then True); without one, ChatML-style framing
    (``tokens_per_message``, 3 to prime the reply) is assumed.
    """

    def __init__(self, path: str | Path, *, name: str | None = None, tokens_per_message: int = 5) -> None:
        from tokenizers import Tokenizer

        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"no tokenizer.json at {file}")
        super().__init__(name or f"hf:{file.parent.name or file.name}", approximate=False)
        self._tokenizer = Tokenizer.from_file(str(file))
        self.tokens_per_message = tokens_per_message
        self.template_measured = False
        try:
            config = chat_template.load_config(file)
            if config is not None and chat_template.chat_template_of(config) is not None:
                framing = chat_template.measure(config, self.count_text, self.count_prompt)
                self.tokens_per_message = framing.tokens_per_message
                self.reply_priming = framing.reply_priming
                self.template_measured = True
        except chat_template.TemplateError:
            pass  # the default framing stays

    def count_prompt(self, prompt: str) -> int:
        """Tokens of a rendered prompt, its special tokens (``<|im_start|>``, BOS, ...) parsed as such."""
        return len(self._tokenizer.encode(prompt, add_special_tokens=False).ids)

    def count_text(self, text: str) -> int:
        """Count one text with the model's own tokenizer, uncached (special tokens in it count as text).

        Args:
            text: a non-empty text.

        Returns:
            Its tokens.

        Raises:
            TypeError: ``text`` is not a ``str``, or holds a lone surrogate, which has no UTF-8 form.
        """
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Count many texts with the model's own tokenizer in one batch, uncached.

        Args:
            texts: non-empty texts.

        Returns:
            Their tokens, in the same order.

        Raises:
            TypeError: one of ``texts`` is not a ``str``, or holds a lone surrogate.
        """
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]


_O200K = re.compile(r"^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o1|o3|o4|gpt-oss|codex)")
_CL100K = re.compile(r"^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)")
_QWEN35 = re.compile(r"^qwen3\.[56]")

_lock = threading.Lock()
_profiles: dict[str, TokenizerProfile] = {}


def resolve_encoding(model_name: str) -> str:
    """The profile name a model resolves to: an encoding, or ``approximate``."""
    name = model_name.strip().lower()
    if name in ("o200k_base", "cl100k_base", "qwen3.5", "approximate"):
        return name
    name = name.rsplit("/", 1)[-1]  # "openai/gpt-4o", "azure/gpt-4o-mini"
    if _O200K.match(name):
        return "o200k_base"
    if _CL100K.match(name):
        return "cl100k_base"
    if _QWEN35.match(name):
        return "qwen3.5"
    return "approximate"


def get_tokenizer(model_name: str | None) -> TokenizerProfile:
    """The best offline profile for a model name (or an encoding name, or ``hf:/path/tokenizer.json``).

    Profiles are shared, so their count caches serve every caller. Unknown models get ``approximate``.

    Args:
        model_name: e.g. ``"gpt-4o"``, ``"o200k_base"``, ``"hf:/models/tokenizer.json"``; None for the estimate.

    Returns:
        A :class:`~contextshift.core.tokens.TokenizerProfile` to pass to ``shift_context`` as its counter.

    Raises:
        FileNotFoundError: an ``hf:`` path names no file.
        Exception: the ``tokenizers`` package cannot read the ``hf:`` file (it raises a plain ``Exception``,
            e.g. for a file that is not a tokenizer's JSON). Model and encoding names never raise.
    """
    name = (model_name or "approximate").strip()
    key = name if name.startswith("hf:") else resolve_encoding(name)
    with _lock:
        found = _profiles.get(key)
        if found is not None:
            return found
    profile: TokenizerProfile
    if key.startswith("hf:"):
        profile = HuggingFaceProfile(key[3:])
    elif key == "approximate":
        profile = ApproximateProfile()
    else:
        profile = TiktokenProfile(key, tokens_per_message=5 if key == "qwen3.5" else 3)
    with _lock:
        return _profiles.setdefault(key, profile)
