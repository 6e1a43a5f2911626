"""Audit entries (A2): every prompt block in its actual order, with tokens and a stable reason.

Included blocks say ``protected``, ``fit``, ``recalled`` (excluded history that the ``recall`` strategy
brought back) or ``standing`` (a standing instruction of the user's, G4b). Left-out blocks say why:
``disabled``, ``not-triggered`` (a keyed lorebook entry whose keys did not match), ``lore-budget`` (lorebook
and memory blocks filled their share of the budget), ``empty``,
``low-relevance`` (before counting, or dropped by ``vector-recall``), ``manual``, ``context-shift``,
``summarized`` (and the summary block names what it stands for), ``plugin-rejected``, ``interceptor``
(an interceptor removed it) or ``final-budget`` (the last shift after the interceptors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.messages import Message
from ..core.shifting import ShiftResult
from ..core.tokens import TokenizerProfile, message_costs
from ..core.vocabulary import CONTEXT_SHIFT, FINAL_BUDGET, FIT, INTERCEPTOR, MANUAL, PROTECTED, RECALLED, STANDING
from .assemble import Assembly

MAX_ENTRIES = 500
MAX_CONTENT_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    identifier: str
    role: str
    source: str
    content: str
    tokens: int
    included: bool
    reason: str
    order: int
    name: str | None = None
    relevance: float | None = None
    stands_for: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "identifier": self.identifier,
            "role": self.role,
            "source": self.source,
            "content": self.content,
            "tokens": self.tokens,
            "included": self.included,
            "reason": self.reason,
            "order": self.order,
            "name": self.name,
            "relevance": self.relevance,
        }
        if self.stands_for:
            out["stands_for"] = list(self.stands_for)
        return out


def _entry(message: Message, tokens: int, included: bool, reason: str, **extra: Any) -> AuditEntry:
    covers = message.meta.get("covers") if message.source == "summary" else None
    if not extra.get("stands_for") and isinstance(covers, list):
        extra["stands_for"] = [str(c) for c in covers]  # a stored compaction summary (C8)
    text = message.text
    if len(text) > MAX_CONTENT_CHARS:
        text = text[:MAX_CONTENT_CHARS] + "…"
    return AuditEntry(
        identifier=message.id,
        role=message.role,
        source=message.source or ("system" if message.role == "system" else "history"),
        content=text,
        tokens=tokens,
        included=included,
        reason=reason,
        order=0,
        name=message.name,
        relevance=message.relevance,
        **extra,
    )


def build_entries(
    *,
    assembly: Assembly,
    costs: Mapping[str, int],
    manual: set[str],
    shifted: ShiftResult,
    dropped: Mapping[str, str] | None = None,
    standing: set[str] | None = None,
    intercepted_removed: set[str],
    added: set[str],
    final_removed: set[str],
    intercepted: Sequence[Message],
    final: Sequence[Message],
    profile: TokenizerProfile,
) -> list[AuditEntry]:
    final_ids = {m.id for m in final}
    summaries = {t.replacement.id: t for t in shifted.truncated}
    ordered: list[AuditEntry] = []
    skipped = sorted(assembly.skipped, key=lambda s: s.slot)
    cursor = 0
    for slot, message in enumerate(assembly.messages):
        while cursor < len(skipped) and skipped[cursor].slot <= slot:
            item = skipped[cursor]
            ordered.append(_entry(item.message, 0, False, item.reason))
            cursor += 1
        tokens = costs.get(message.id, 0)
        if message.id in manual:
            reason, included = MANUAL, False
        elif dropped and message.id in dropped:
            reason, included = dropped[message.id], False
        elif message.id in final_ids:
            if standing and message.id in standing:
                reason = STANDING
            elif message.protected:
                reason = PROTECTED
            else:  # history ``recall`` brought back says so (G4a)
                reason = RECALLED if shifted.reasons.get(message.id) == RECALLED else FIT
            included = True
        elif message.id in final_removed:
            reason, included = FINAL_BUDGET, False
        elif message.id in intercepted_removed and message.id not in shifted.reasons:
            reason, included = INTERCEPTOR, False
        else:
            reason = shifted.reasons.get(message.id, CONTEXT_SHIFT)
            if reason in (PROTECTED, FIT):
                reason = INTERCEPTOR if message.id in intercepted_removed else FINAL_BUDGET
            included = False
        ordered.append(_entry(message, tokens, included, reason))
    ordered.extend(_entry(s.message, 0, False, s.reason) for s in skipped[cursor:])
    # Blocks that exist only after assembly: summaries and interceptor additions, where they stand.
    extras = [m for m in final if m.id in summaries or m.id in added]
    late = {t.replacement.id: t.replacement for t in shifted.truncated}
    late.update((m.id, m) for m in intercepted if m.id in added)
    extras_removed = [m for m in late.values() if m.id not in final_ids]
    if extras or extras_removed:
        extra_costs, _ = message_costs([*extras, *extras_removed], profile, 4)
        cost_of = dict(zip((m.id for m in [*extras, *extras_removed]), extra_costs, strict=True))
        position = {e.identifier: i for i, e in enumerate(ordered)}
        for message in extras:
            following = _next_original(final, message.id, position)
            entry = _entry(
                message,
                cost_of[message.id],
                True,
                FIT,
                stands_for=list(summaries[message.id].source_ids) if message.id in summaries else [],
            )
            at = position.get(following, len(ordered)) if following else len(ordered)
            ordered.insert(at, entry)
            position = {e.identifier: i for i, e in enumerate(ordered)}
        for message in extras_removed:
            reason = FINAL_BUDGET if message.id in final_removed else INTERCEPTOR
            ordered.append(_entry(message, cost_of[message.id], False, reason))
    return [_numbered(entry, order) for order, entry in enumerate(ordered[:MAX_ENTRIES])]


def _numbered(e: AuditEntry, order: int) -> AuditEntry:
    """``e`` at position ``order``: ``dataclasses.replace(e, order=order)`` without its per-call field walk
    (a turn numbers every block of its prompt)."""
    return AuditEntry(
        e.identifier,
        e.role,
        e.source,
        e.content,
        e.tokens,
        e.included,
        e.reason,
        order,
        e.name,
        e.relevance,
        e.stands_for,
    )


def _next_original(final: Sequence[Message], message_id: str, position: Mapping[str, int]) -> str | None:
    seen = False
    for message in final:
        if seen and message.id in position:
            return message.id
        if message.id == message_id:
            seen = True
    return None
