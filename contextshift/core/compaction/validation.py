"""Checking a summarizer reply and building the stored summary record (C8).

A reply is rejected, with a stable reason, when it is empty (``empty``), when the model stopped for any
reason but a natural stop (``truncated``; ``stop`` and ``end_turn`` are natural, anything else — ``length``,
``max_tokens``, a content filter, or no reason at all — is not), when the summary would cost at least as
much as what it replaces (``not-smaller``), or when it is not plausibly a summary of that history
(``unfaithful``, with a ``detail`` from :mod:`.plausibility`: another script or language, almost none of its
names and numbers kept, or a content-free refusal). Nothing is stored for a rejected reply; raw history stays.

The stored summary is a core :class:`~contextshift.core.messages.Message` with role ``system`` and source
``summary``. A mid-conversation system message is what every supported provider accepts: OpenAI-compatible
servers take it in place, and the Anthropic serializer folds system messages into the request's ``system``
(a user-role summary would instead merge into the neighbouring user turn and read as something the user
said). Role ``system`` with source ``summary`` is not protected (M4), so shifting may still drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message
from ..vocabulary import SUMMARY_HEADER
from .layout import Counter, message_tokens
from .plausibility import DEFAULT_SETTINGS, PlausibilitySettings, implausibility
from .selection import Selection

NATURAL_STOPS: frozenset[str] = frozenset({"stop", "end_turn"})

#: Reason codes of a rejected summary.
EMPTY = "empty"
TRUNCATED = "truncated"
NOT_SMALLER = "not-smaller"
UNFAITHFUL = "unfaithful"

_WRAPPERS = (("<summary>", "</summary>"), ("```", "```"))


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str | None = None  # None when ok; otherwise one of EMPTY, TRUNCATED, NOT_SMALLER, UNFAITHFUL
    #: For ``unfaithful``: ``other-script``, ``other-language``, ``few-facts`` or ``refusal``.
    detail: str | None = None

    def __bool__(self) -> bool:
        return self.ok


def clean_summary(text: str | None) -> str:
    """The reply without surrounding whitespace or a wrapping ``<summary>`` tag / code fence."""
    text = (text or "").strip()
    for opening, closing in _WRAPPERS:
        if len(text) >= len(opening) + len(closing) and text.startswith(opening) and text.endswith(closing):
            text = text[len(opening) : len(text) - len(closing)].strip()
    return text


def validate_summary(text: str | None, finish_reason: str | None, original_tokens: int, summary_tokens: int) -> Verdict:
    """C8: accept a summary only if it is non-empty, naturally finished and smaller than what it replaces.

    ``original_tokens`` is what the folded messages cost in the chat prompt (``Selection.fold_tokens``);
    ``summary_tokens`` what the stored summary record will cost (count :func:`summary_message`).
    """
    if not clean_summary(text):
        return Verdict(False, EMPTY)
    if (finish_reason or "").strip().lower() not in NATURAL_STOPS:
        return Verdict(False, TRUNCATED)
    if summary_tokens >= original_tokens:
        return Verdict(False, NOT_SMALLER)
    return Verdict(True)


def summary_message(
    text: str,
    *,
    message_id: str,
    covers: Sequence[str],
    workspaces: Sequence[str] = (),
    supersedes: Sequence[str] = (),
    extra_meta: dict[str, Any] | None = None,
) -> Message:
    """The summary record to store: role ``system``, source ``summary``, ``meta.covers`` in order (C7, C8)."""
    body = clean_summary(text)
    if not body:
        raise ValueError("an empty summary is never stored (C8)")
    if not message_id:
        raise ValueError("a summary record needs an id")
    if not covers:
        raise ValueError("a summary must cover at least one message")
    spaces = list(dict.fromkeys(w for w in workspaces if w))
    meta: dict[str, Any] = dict(extra_meta or {})
    meta.update({"covers": list(dict.fromkeys(covers)), "workspaces": spaces, "supersedes": list(supersedes)})
    return Message(
        role="system",
        content=f"{SUMMARY_HEADER}\n{body}",
        id=message_id,
        source="summary",
        workspace=spaces[0] if len(spaces) == 1 else None,
        meta=meta,
    )


def summary_from_selection(text: str, selection: Selection, *, message_id: str) -> Message:
    """:func:`summary_message` for a selection's fold (covers, workspaces and superseded summaries)."""
    return summary_message(
        text,
        message_id=message_id,
        covers=selection.covers,
        workspaces=selection.workspaces,
        supersedes=selection.supersedes,
    )


def accept_summary(
    text: str | None,
    finish_reason: str | None,
    selection: Selection,
    *,
    message_id: str,
    counter: Counter | None = None,
    plausibility: PlausibilitySettings | None = DEFAULT_SETTINGS,
) -> tuple[Verdict, Message | None]:
    """C8 in one step: the verdict on a reply, and the record to commit when (and only when) it is valid.

    The summary record is priced with ``counter`` (the chat model's, as for ``Selection.fold_tokens``).
    ``plausibility`` tunes the faithfulness checks (``None`` turns them off).
    """
    if not clean_summary(text):
        return Verdict(False, EMPTY), None
    message = summary_from_selection(text or "", selection, message_id=message_id)
    cost = message_tokens([message], counter)[0]
    verdict = validate_summary(text, finish_reason, selection.fold_tokens, cost)
    if verdict.ok and plausibility is not None:
        detail = implausibility([m.text for m in selection.fold], clean_summary(text), plausibility)
        if detail is not None:
            verdict = Verdict(False, UNFAITHFUL, detail)
    return verdict, (message if verdict.ok else None)
