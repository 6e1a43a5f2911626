"""Lorebook activation (P3): which entries enter the prompt, with what relevance.

A keyed entry activates when one of its keys appears, case-insensitively and as a whole word, in the scan
text (the current input and the last ``scan_depth`` history messages). An entry with secondary keys also
needs one of those. Its relevance is the share of its primary keys that matched. A ``constant`` entry is
always active, relevance 1, and mandatory: the pipeline pins it. A switched-off entry is ``disabled``; a keyed
entry whose keys did not match is ``not-triggered`` (nothing is wrong with it; the scan text did not name it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ..core.vocabulary import DISABLED, EMPTY, FIT, NOT_TRIGGERED

Position = Literal["before", "after", "depth"]
POSITIONS: frozenset[str] = frozenset({"before", "after", "depth"})


@dataclass(frozen=True, slots=True)
class LoreEntry:
    id: str
    content: str
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    constant: bool = False
    enabled: bool = True
    order: int = 100
    position: Position = "before"
    depth: int | None = None


@dataclass(frozen=True, slots=True)
class Activation:
    """One entry's verdict: active (with relevance) or the reason it is not (``disabled``, ``empty``,
    ``not-triggered``)."""

    entry: LoreEntry
    active: bool
    relevance: float
    reason: str = FIT
    matched: tuple[str, ...] = field(default_factory=tuple)


@lru_cache(maxsize=4096)
def _pattern(key: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(key.strip()) + r"(?!\w)", re.IGNORECASE)


def _matches(keys: Sequence[str], text: str) -> tuple[str, ...]:
    return tuple(k for k in keys if k.strip() and _pattern(k).search(text))


def activate(entries: Sequence[LoreEntry], scan_text: str) -> list[Activation]:
    """Every entry's verdict, in prompt order (``order`` ascending, then id)."""
    verdicts = []
    for entry in sorted(entries, key=lambda e: (e.order, e.id)):
        if not entry.enabled:
            verdicts.append(Activation(entry, False, 0.0, DISABLED))
        elif not entry.content.strip():
            verdicts.append(Activation(entry, False, 0.0, EMPTY))
        elif entry.constant:
            verdicts.append(Activation(entry, True, 1.0))
        else:
            matched = _matches(entry.keys, scan_text)
            keys = [k for k in entry.keys if k.strip()]
            secondary_ok = not entry.secondary_keys or bool(_matches(entry.secondary_keys, scan_text))
            if matched and secondary_ok:
                verdicts.append(Activation(entry, True, round(len(matched) / len(keys), 6), matched=matched))
            else:
                verdicts.append(Activation(entry, False, 0.0, NOT_TRIGGERED))
    return verdicts
