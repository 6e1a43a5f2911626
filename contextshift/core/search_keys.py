"""The keys a search looks for in messages, in any language (issue 27).

A query is cut into words at spaces and punctuation; everything else stays part of a word (letters of any
script, digits, emoji). Each word becomes a *key* a message must hold as a substring, case-folded:

* Where a Snowball stemmer knows the word's script (Latin: English; Cyrillic: Russian; Greek), the key is the
  longest common beginning of the word and its stem, when that is at least ``MIN_STEM`` characters:
  ``пятница`` → ``пятниц`` (so ``пятницу`` matches), ``zebras`` → ``zebra``, ``happy`` (stem ``happi``) →
  ``happ``.
* Any other word (Chinese, Japanese, Korean, emoji, …) is its own key, matched inside longer runs of text:
  ``山姆`` is found in ``你好，我叫山姆。``.

Pure: no I/O; PyStemmer is imported on first use.
"""

from __future__ import annotations

import unicodedata
from functools import cache, lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import Stemmer

#: A stem shorter than this would match too much: the whole word is the key instead.
MIN_STEM = 3
#: At most this many keys are taken from one query.
MAX_KEYS = 12

_SCRIPT_STEMMERS = {"LATIN": "english", "CYRILLIC": "russian", "GREEK": "greek"}


@cache
def _stemmer(language: str) -> Stemmer.Stemmer:
    import Stemmer

    return Stemmer.Stemmer(language)


def _is_separator(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def query_words(query: str) -> list[str]:
    """The query's words, lower-cased, in order, each once: cut at spaces and punctuation only."""
    words: list[str] = []
    current: list[str] = []
    for ch in query.lower() + " ":
        if _is_separator(ch):
            word = "".join(current)
            if word and word not in words:
                words.append(word)
            current = []
        else:
            current.append(ch)
    return words


def _language(word: str) -> str | None:
    """The stemmer for the word's script, when every letter of it is of one script a stemmer knows."""
    scripts = {unicodedata.name(ch, "").split(" ")[0] for ch in word if ch.isalpha()}
    if len(scripts) != 1:
        return None
    return _SCRIPT_STEMMERS.get(scripts.pop())


@lru_cache(maxsize=1 << 12)
def word_key(word: str) -> str:
    """The substring a message must hold to match ``word`` (already case-folded)."""
    language = _language(word)
    if language is None:
        return word
    stem = str(_stemmer(language).stemWord(word))
    common = 0
    for a, b in zip(word, stem, strict=False):
        if a != b:
            break
        common += 1
    return word[:common] if common >= MIN_STEM else word


def search_keys(query: str) -> list[str]:
    """The keys of ``query``'s words (each once, at most ``MAX_KEYS``), in the order of the words."""
    keys: list[str] = []
    for word in query_words(query):
        key = word_key(word)
        if key not in keys:
            keys.append(key)
    return keys[:MAX_KEYS]


__all__ = ["MAX_KEYS", "MIN_STEM", "query_words", "search_keys", "word_key"]
