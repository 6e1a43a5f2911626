"""Is a summary at least plausible for the history it replaces? (C8, beyond empty / truncated / not smaller)

A weak model (a 135M local one, say) answers a summarization request with text that is well-formed, short
and naturally finished, and still no summary: an apology, a made-up story in another language, an echo of
the instruction. Three cheap checks catch those without judging style:

- **script** — the summary is written in another script (Latin, Cyrillic, CJK, ...) than a history that is
  clearly in one; or, for Latin-script text, in another language (by common function words) than a history
  whose language is clear;
- **facts** — it keeps almost none of the history's salient names and numbers (those mentioned in at least
  two messages, each weighted by how many mention it; numbers of one digit are list markers and counters,
  not facts; the kept share must reach ``min_fact_share``, 10% by default: the fidelity benchmark's summaries at a
  tenth of their history keep 18% of them);
- **refusal** — it is a refusal or an apology ("I'm sorry…", "As an AI…") that keeps none of those facts.

A history too short or too mixed to tell is not judged by that check: a summary is only rejected for what is
clearly wrong. Everything here is pure and deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Reason details of an unfaithful summary.
OTHER_SCRIPT = "other-script"
OTHER_LANGUAGE = "other-language"
FEW_FACTS = "few-facts"
REFUSAL = "refusal"


@dataclass(frozen=True, slots=True)
class PlausibilitySettings:
    #: The share of the history's salient names and numbers the summary must keep.
    min_fact_share: float = 0.1
    #: Fewer salient facts than this and the facts check does not judge.
    min_facts: int = 5
    #: At most this many facts (the most frequent) are salient.
    max_salient: int = 40
    #: A history's script counts as clear when this share of its letters is in it.
    clear_script_share: float = 0.6
    #: A summary is in the history's script when at least this share of its letters is.
    summary_script_share: float = 0.2
    #: Letters needed on each side before scripts are compared.
    min_letters: int = 40

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_fact_share <= 1.0:
            raise ValueError("min_fact_share must be between 0 and 1")
        if self.min_facts < 1 or self.max_salient < self.min_facts:
            raise ValueError("need 1 <= min_facts <= max_salient")


DEFAULT_SETTINGS = PlausibilitySettings()


# -- scripts --------------------------------------------------------------------------------------------


def _script_of(char: str) -> str | None:
    """The script family of a letter (None for anything that is not a letter)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    code = ord(char)
    if code < 0x0250 or 0x1E00 <= code <= 0x1EFF:
        return "latin"
    if 0x0370 <= code <= 0x03FF:
        return "greek"
    if 0x0400 <= code <= 0x052F:
        return "cyrillic"
    if 0x0590 <= code <= 0x05FF:
        return "hebrew"
    if 0x0600 <= code <= 0x06FF or 0x0750 <= code <= 0x077F:
        return "arabic"
    if 0x0900 <= code <= 0x0DFF:
        return "indic"
    if 0x0E00 <= code <= 0x0E7F:
        return "thai"
    if 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if 0x3040 <= code <= 0x30FF or 0x2E80 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or code >= 0x20000:
        return "cjk"
    return "other"


def script_shares(text: str) -> tuple[Counter[str], int]:
    """Letters per script family in ``text``, and their total (each distinct character classified once)."""
    counts: Counter[str] = Counter()
    for char, times in Counter(text).items():  # in order of first appearance, as a walk of the text
        script = _script_of(char)
        if script is not None:
            counts[script] += times
    return counts, sum(counts.values())


#: Common function words of Latin-script languages (lower case); enough to tell a clear case.
_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        [
            "the",
            "and",
            "is",
            "are",
            "was",
            "were",
            "of",
            "to",
            "in",
            "on",
            "at",
            "a",
            "that",
            "it",
            "for",
            "with",
            "this",
            "you",
            "not",
            "have",
            "be",
            "what",
        ]
    ),
    "fr": frozenset(
        [
            "le",
            "les",
            "et",
            "est",
            "des",
            "une",
            "du",
            "qui",
            "pour",
            "dans",
            "pas",
            "sur",
            "avec",
            "il",
            "elle",
            "nous",
            "vous",
            "je",
            "ce",
            "au",
            "aux",
        ]
    ),
    "de": frozenset(
        [
            "der",
            "die",
            "das",
            "und",
            "ist",
            "nicht",
            "ein",
            "eine",
            "ich",
            "sie",
            "es",
            "mit",
            "den",
            "dem",
            "zu",
            "auf",
            "für",
            "von",
            "wir",
        ]
    ),
    "es": frozenset(
        [
            "el",
            "los",
            "las",
            "y",
            "es",
            "que",
            "en",
            "un",
            "una",
            "por",
            "con",
            "para",
            "no",
            "del",
            "se",
            "lo",
            "como",
            "está",
        ]
    ),
    "it": frozenset(
        ["il", "lo", "gli", "e", "è", "che", "di", "un", "una", "per", "con", "non", "della", "sono", "questo"]
    ),
    "pt": frozenset(["o", "os", "as", "e", "é", "que", "em", "um", "uma", "para", "com", "não", "do", "da", "são"]),
}
_WORD = re.compile(r"[^\W\d_]+")
#: Each function word with the languages it belongs to, in the order of ``_FUNCTION_WORDS``.
_LANGUAGES_OF: dict[str, tuple[str, ...]] = {
    word: tuple(language for language, words in _FUNCTION_WORDS.items() if word in words)
    for word in sorted(set().union(*_FUNCTION_WORDS.values()))
}


def latin_language(text: str, min_hits: int = 8) -> str | None:
    """The language of Latin-script ``text`` when its function words say so clearly, else None."""
    hits: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        for language in _LANGUAGES_OF.get(word, ()):
            hits[language] += 1
    if not hits:
        return None
    ranked = hits.most_common(2)
    best, best_hits = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0
    return best if best_hits >= min_hits and best_hits >= 2 * runner_up else None


def script_problem(history: str, summary: str, settings: PlausibilitySettings = DEFAULT_SETTINGS) -> str | None:
    """``other-script`` / ``other-language`` when the summary is clearly not in the history's writing."""
    h_counts, h_total = script_shares(history)
    s_counts, s_total = script_shares(summary)
    if h_total < settings.min_letters or s_total < min(settings.min_letters, 12):
        return None
    script, count = h_counts.most_common(1)[0]
    if count / h_total < settings.clear_script_share:
        return None
    if s_counts[script] / s_total < settings.summary_script_share:
        return OTHER_SCRIPT
    if script == "latin":
        h_lang, s_lang = latin_language(history), latin_language(summary, min_hits=5)
        if h_lang and s_lang and h_lang != s_lang:
            return OTHER_LANGUAGE
    return None


# -- names and numbers ----------------------------------------------------------------------------------

#: A number standing alone (not the digits inside an identifier such as ``word12x3``).
_NUMBER = re.compile(r"(?<![A-Za-z0-9])\d+(?:[.,:/]\d+)*(?![A-Za-z0-9])")
#: Identifiers (snake_case / camelCase) count as names too.
_IDENTIFIER = re.compile(r"\b[A-Za-z]+(?:_[A-Za-z0-9]+)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]|\s-\s)\s*$")


def _names(text: str) -> Iterable[str]:
    """Capitalized words that do not start a sentence (names, places, acronyms), then identifiers."""
    for match in re.finditer(r"[^\W\d_][^\W_]*", text):
        word = match.group()
        if len(word) < 2 or not word[0].isupper():
            continue
        if _script_of(word[0]) not in ("latin", "cyrillic", "greek"):
            continue
        if _SENTENCE_START.search(text[max(0, match.start() - 4) : match.start()]) or match.start() == 0:
            continue
        yield word
    yield from _IDENTIFIER.findall(text)


def _normalize_number(raw: str) -> str:
    return re.sub(r"[.,:/-]", "", raw).lstrip("0") or "0"


def facts(text: str) -> list[str]:
    """The names and numbers of ``text``, in order, with repeats (numbers normalized, names as written)."""
    # Single digits are mostly list markers, steps and counters ("1.", "turn 3"): not facts a summary keeps.
    out = [f"#{n}" for n in map(_normalize_number, _NUMBER.findall(text)) if len(n) >= 2]
    out += list(_names(text))
    return out


def salient_facts(texts: Sequence[str], settings: PlausibilitySettings = DEFAULT_SETTINGS) -> list[tuple[str, int]]:
    """The facts that recur: those in at least two of the texts, with how many texts mention each, most
    mentioned first (ties: first seen first), at most ``max_salient`` of them.

    A fact said once (a message counter, a number in one tool result) is what any summary may drop; the names
    and numbers a conversation keeps coming back to are what it must not.
    """
    mentions: Counter[str] = Counter()
    for text in texts:
        mentions.update(set(facts(text)))
    recurring = [(fact, n) for fact, n in mentions.items() if n >= 2]
    ranked = sorted(recurring, key=lambda item: -item[1])  # stable: first-seen order among ties
    return ranked[: settings.max_salient]


def _stem(word: str) -> str:
    """Inflected names still match ("Москва" / "Москве", "Alice's"): compare a prefix of long words."""
    lowered = word.lower()
    return lowered if len(lowered) <= 4 else lowered[: max(4, len(lowered) - 2)]


def kept_share(salient: Sequence[tuple[str, int]], summary: str) -> float:
    """The share of the salient facts the summary mentions, each weighted by how many messages mention it
    (a name the whole conversation revolves around counts for more than one said twice)."""
    total = sum(count for _, count in salient)
    if not total:
        return 1.0
    numbers = {f"#{_normalize_number(n)}" for n in _NUMBER.findall(summary)}
    lowered = summary.lower()
    kept = 0
    for fact, count in salient:
        found = fact in numbers if fact.startswith("#") else _stem(fact) in lowered
        kept += count if found else 0
    return kept / total


# -- refusals -------------------------------------------------------------------------------------------

_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry|i apologi[sz]e|my apologies|apologies|i can(?:no|')t|i cannot|"
    r"i'?m unable|i am unable|i'?m not able|as an ai|unfortunately,? i|i don'?t have|i do not have|"
    r"извините|простите|к сожалению|я не могу|"
    r"抱歉|对不起|很抱歉|我无法|我不能|すみません|申し訳)",
    re.IGNORECASE,
)


def is_refusal(summary: str) -> bool:
    return bool(_REFUSAL.search(summary.strip().replace("\u2019", "'")))


# -- the verdict ----------------------------------------------------------------------------------------


def implausibility(
    history: Sequence[str], summary: str, settings: PlausibilitySettings = DEFAULT_SETTINGS
) -> str | None:
    """Why ``summary`` is not a plausible summary of ``history`` (one of the details above), or None."""
    joined = "\n".join(history)
    salient = salient_facts(history, settings)
    share = kept_share(salient, summary)
    if is_refusal(summary) and (share == 0.0 or len(summary.split()) < 12):
        return REFUSAL
    problem = script_problem(joined, summary, settings)
    if problem is not None:
        return problem
    if len(salient) >= settings.min_facts and share < settings.min_fact_share:
        return FEW_FACTS
    return None


__all__ = [
    "DEFAULT_SETTINGS",
    "FEW_FACTS",
    "OTHER_LANGUAGE",
    "OTHER_SCRIPT",
    "REFUSAL",
    "PlausibilitySettings",
    "facts",
    "implausibility",
    "is_refusal",
    "kept_share",
    "latin_language",
    "salient_facts",
    "script_problem",
]
