"""Rows → response models. The provider's API key is never part of any view (N2).

Text a database holds but JSON cannot carry (a lone surrogate, stored by a version from before N6 refused it
at the door) is shown with U+FFFD in its place (:func:`readable`), so such a chat stays readable.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from ..core.calibration import DEFAULT_MARGIN, Calibration, calibrated, report
from ..providers import enforces_output_limit
from ..service.compaction import settings_of
from ..service.status import log_dict
from ..service.turn import profile_for
from ..storage.repositories.branches import is_branch_point
from ..storage.tables import (
    AuditRow,
    BotRow,
    ChatRow,
    CompactionLogRow,
    LorebookRow,
    MemoryRow,
    MessageRow,
    ModelRow,
    ProviderRow,
    SummaryRow,
)
from . import schemas as s

T = TypeVar("T")
_SURROGATE = re.compile("[\ud800-\udfff]")


def readable_text(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD (a pair, which JSON carries, becomes its character)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def readable(value: T) -> T:
    """A stored value (text, or JSON of lists and objects) with its texts made :func:`readable_text`.

    Args:
        value: what a row holds.

    Returns:
        The same value when it holds no surrogate (nearly always), else a copy without lone ones.
    """
    if isinstance(value, str):
        return readable_text(value)  # type: ignore[return-value]
    if isinstance(value, list):
        return [readable(item) for item in value]  # type: ignore[return-value]
    if isinstance(value, dict):
        return {readable_text(k) if isinstance(k, str) else k: readable(v) for k, v in value.items()}  # type: ignore[return-value]
    return value


def provider(row: ProviderRow) -> s.ProviderOut:
    return s.ProviderOut(
        id=row.id,
        name=row.name,
        kind=row.kind,  # type: ignore[arg-type]
        base_url=row.base_url,
        enabled=row.enabled,
        has_api_key=bool(row.api_key),
        enforces_output_limit=enforces_output_limit(row.kind),
        count_tokens=row.count_tokens,
        timeout_seconds=row.timeout_seconds,
        created_at=row.created_at,
    )


def model(
    row: ModelRow, calibrations: dict[tuple[str, str], Calibration] | None = None, *, margin: float = DEFAULT_MARGIN
) -> s.ModelOut:
    """A model; with ``calibrations`` (from ``repos.calibrations.get_many``) its calibration too (T5), reported
    with ``margin``, that of an uncalibrated estimate (``Rules.estimate_margin``)."""
    profile = profile_for(row)
    found = (calibrations or {}).get((row.id, profile.name), Calibration())
    return s.ModelOut(
        id=row.id,
        provider_id=row.provider_id,
        name=row.name,
        type=row.type,  # type: ignore[arg-type]
        context_window=row.context_window,
        max_output_tokens=row.max_output_tokens,
        enabled=row.enabled,
        tokenizer=row.tokenizer,
        tokenizer_profile=profile.name,
        tokenizer_approximate=profile.approximate,
        context_strategy=row.context_strategy,
        calibration=s.CalibrationOut(**report(found, calibrated(profile, found, margin), margin)),
        created_at=row.created_at,
    )


def bot(row: BotRow) -> s.BotOut:
    return s.BotOut(
        id=row.id,
        name=row.name,
        chat_model_id=row.chat_model_id,
        system_prompt=row.system_prompt or "",
        persona=row.persona or "",
        context_strategy=row.context_strategy,
        response_reserve=row.response_reserve,
        context_limit=row.context_limit,
        lorebook_ids=list(row.lorebook_ids or []),
        template=row.template,
        author_note=row.author_note,
        author_note_depth=row.author_note_depth,
        compaction_enabled=row.compaction_enabled,
        compaction_threshold=row.compaction_threshold,
        compaction_ratio=row.compaction_ratio,
        compaction_ratio_used=settings_of(row).ratio_used,
        compaction_model_id=row.compaction_model_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def lorebook(row: LorebookRow) -> s.LorebookOut:
    return s.LorebookOut(
        id=row.id,
        name=row.name,
        created_at=row.created_at,
        entries=[
            s.LoreEntryOut(
                id=e.id,
                keys=list(e.keys),
                secondary_keys=list(e.secondary_keys),
                content=e.content,
                constant=e.constant,
                enabled=e.enabled,
                order=e.order,
                position=e.position,  # type: ignore[arg-type]
                depth=e.depth,
            )
            for e in row.entries
        ],
    )


def memory(row: MemoryRow) -> s.MemoryOut:
    return s.MemoryOut(
        id=row.id, bot_id=row.bot_id, chat_id=row.chat_id, content=row.content, created_at=row.created_at
    )


def chat(row: ChatRow) -> s.ChatOut:
    return s.ChatOut(
        id=row.id,
        bot_id=row.bot_id,
        type=row.type,  # type: ignore[arg-type]
        title=readable_text(row.title or ""),
        model_id=row.model_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def message(row: MessageRow) -> s.MessageOut:
    return s.MessageOut(
        id=row.id,
        chat_id=row.chat_id,
        seq=row.seq,
        role=row.role,  # type: ignore[arg-type]
        content=readable(row.content),
        name=readable(row.name),
        tool_calls=readable(row.tool_calls),
        tool_call_id=readable(row.tool_call_id),
        pinned=row.pinned,
        standing=row.standing,
        meta=readable(dict(row.meta or {})),
        workspace=row.workspace,
        summarized_by=row.summary_id,
        reply_to=(row.meta or {}).get("reply_to") if row.role == "assistant" else None,
        created_at=row.created_at,
        alternatives=len(row.alternatives or []) or 1,
        alternative=row.alternative or 0,
        branch_point=is_branch_point(row),
    )


def usage(data: dict[str, Any] | None) -> s.UsageOut | None:
    return (
        s.UsageOut(
            **{k: data.get(k) for k in ("input_tokens", "output_tokens", "cached_input_tokens")},
            estimated=bool(data.get("estimated")),
        )
        if data
        else None
    )


def audit(row: AuditRow) -> s.AuditOut:
    payload = dict(row.payload or {})
    return s.AuditOut(
        **s.PreviewOut.model_validate(payload).model_dump(),
        generation_id=row.generation_id,
        chat_id=row.chat_id,
        input_message_id=payload.get("input_message_id"),
        reply_message_id=payload.get("reply_message_id"),
        status=row.status,  # type: ignore[arg-type]
        error_code=row.error_code,
        usage=usage(row.usage),
        created_at=row.created_at,
        finished_at=row.finished_at,
        attempts=[s.AttemptOut.model_validate(a) for a in payload.get("attempts") or [] if isinstance(a, dict)],
    )


def compaction_log(row: CompactionLogRow) -> s.CompactionLogOut:
    return s.CompactionLogOut(**log_dict(row))


def summary(row: SummaryRow) -> s.SummaryOut:
    return s.SummaryOut(
        id=row.id,
        content=readable_text(row.content),
        covers=list(row.covers),
        workspaces=list(row.workspaces),
        model=row.model,
        created_at=row.created_at,
    )
