"""T1-T4: tokenizer profiles, exact counts against tiktoken, the approximate estimate, caching, media."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import pytest

from contextshift import Message, get_tokenizer, shift_context
from contextshift.core.tokens import (
    FILE_PART_TOKENS,
    IMAGE_PART_TOKENS,
    ApproximateProfile,
    approximate_count,
)
from contextshift.tokenizers import resolve_encoding

SAMPLES = [
    "Hello, world! 你好",
    "The quick brown fox jumps over the lazy dog. " * 20,
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "def shift(messages):\n    return [m for m in messages if m.pinned]\n",
    "東京都の天気は晴れです。明日は雨が降るでしょう。",
    "Prices: 1234567 + 89.50 = 1234656.50 🎉🎉 done",
    "مرحبا بالعالم",
    "",
]


def _tiktoken_encoding(name: str):  # type: ignore[no-untyped-def]
    """tiktoken, offline, from the vocabulary cache llama-index-core ships."""
    try:  # find_spec of a submodule imports its parent package, and raises when that is missing
        spec = importlib.util.find_spec("llama_index.core")
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        pytest.skip("llama-index-core (the offline tiktoken vocabulary cache) is not installed")
    cache = Path(spec.origin).parent / "_static" / "tiktoken_cache"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    import tiktoken

    return tiktoken.get_encoding(name)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_exact_profiles_count_exactly_what_tiktoken_counts(encoding: str) -> None:
    reference = _tiktoken_encoding(encoding)
    profile = get_tokenizer(encoding)
    assert profile.name == encoding and profile.approximate is False
    for text in SAMPLES:
        assert profile.count(text) == len(reference.encode_ordinary(text)), text


def test_whole_prompt_count_adds_openai_chat_framing() -> None:
    reference = _tiktoken_encoding("o200k_base")
    profile = get_tokenizer("gpt-4o")
    messages = [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Hi there", name="ann"),
    ]
    expected = 3  # reply priming
    for m in messages:
        expected += 3 + len(reference.encode_ordinary(str(m.content)))
        if m.name:
            expected += 1 + len(reference.encode_ordinary(m.name))
    assert profile.count_messages(messages) == expected


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("qwen3.5-27b", "qwen3.5"),
        ("llama-3-70b", "approximate"),
        ("claude-sonnet-4", "approximate"),
    ],
)
def test_model_names_resolve_to_the_best_profile(model: str, profile: str) -> None:
    assert resolve_encoding(model) == profile
    assert get_tokenizer(model).name == profile


def test_unknown_models_get_the_approximate_profile_and_say_so() -> None:
    profile = get_tokenizer("some-local-model")
    assert profile.name == "approximate" and profile.approximate is True
    assert get_tokenizer(None).approximate is True


def test_approximate_count_is_four_latin_characters_a_token() -> None:
    assert approximate_count("") == 0
    assert approximate_count("a") == 1
    assert approximate_count("abcd" * 25) == 25
    assert approximate_count("12345678") == 4  # digits at 2 per token


def test_approximate_count_charges_other_scripts_at_their_own_rates() -> None:
    assert approximate_count("你好世界") == 4  # CJK: one a character
    assert approximate_count("привет") == 3  # Cyrillic: 2.5 a token, rounded up
    assert approximate_count("🎉🎉") == 4  # emoji: two tokens each


def test_approximate_estimate_rarely_undercounts_the_exact_count() -> None:
    exact = get_tokenizer("o200k_base")
    for text in SAMPLES[:-1]:
        assert approximate_count(text) >= 0.85 * exact.count(text), text


def test_counts_are_cached_by_content_so_text_is_tokenized_once() -> None:
    profile = ApproximateProfile()
    text = "a message that is counted once " * 3
    profile.count(text)
    misses = profile.cache.misses
    for _ in range(5):
        profile.count(text)
    assert profile.cache.misses == misses
    assert profile.cache.hits >= 5


def test_images_and_files_cost_a_fixed_documented_amount() -> None:
    message = {
        "id": "m",
        "role": "user",
        "content": [
            {"type": "text", "text": "abcd"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "file", "file": {"file_id": "f1"}},
        ],
    }
    result = shift_context([message], lambda s: math.ceil(len(s) / 4), 10_000)
    assert result.tokens == 1 + 4 + IMAGE_PART_TOKENS + FILE_PART_TOKENS
    profile = get_tokenizer("gpt-4o")
    with_image = profile.count_messages([Message.from_dict(message)])
    text_only = profile.count_messages([Message(role="user", content="abcd")])
    assert with_image - text_only == profile.image_tokens + profile.file_tokens  # type: ignore[attr-defined]


def test_shifting_with_a_profile_reports_its_whole_prompt_count() -> None:
    profile = get_tokenizer("gpt-4o")
    messages = [{"id": f"m{i}", "role": "user", "content": f"message number {i} " * 10} for i in range(20)]
    result = shift_context(messages, profile, 150)
    assert result.tokens == profile.count_messages(result.kept) <= 150
    assert result.excluded


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100", None])
def test_budget_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="budget"):
        shift_context([{"role": "user", "content": "x"}], len, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (1.5, TypeError), ("3", TypeError), (None, TypeError)])
def test_a_counter_returning_a_bad_count_names_the_message(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="bad-one"):
        shift_context([{"id": "bad-one", "role": "user", "content": "x"}], lambda _s: value, 100)  # type: ignore[arg-type,return-value]


def test_a_non_additive_profile_is_shifted_until_its_whole_prompt_count_fits() -> None:
    class Quadratic:
        """A profile whose whole-prompt count grows faster than the sum of its messages."""

        name = "quadratic"
        approximate = False

        def count(self, text: str) -> int:
            return len(text)

        def count_messages(self, messages: list[Message]) -> int:
            return sum(len(m.text) for m in messages) + len(messages) ** 2

    messages = [{"id": f"m{i}", "role": "user", "content": "x" * 10} for i in range(10)]
    result = shift_context(messages, Quadratic(), 60)
    assert result.tokens == Quadratic().count_messages(result.kept) <= 60
    assert [m.id for m in result.kept] == ["m6", "m7", "m8", "m9"]
