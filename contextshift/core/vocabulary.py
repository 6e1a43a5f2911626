"""The words contextshift uses, defined once: roles, sources, reasons, template blocks and provider kinds.

Every layer takes its lists from here: the message type, the shifting reasons, the audit, the API schemas
(as ``Literal`` types) and the storage check constraints (as tuples). A new word is added here and nowhere
else.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, get_args

# -- message roles and sources (M1, M4) -------------------------------------------------------------------

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: Final[tuple[str, ...]] = get_args(Role)

Source: TypeAlias = Literal[
    "system", "persona", "character", "lorebook", "memory", "template", "history", "summary", "input", "plugin"
]
SOURCES: Final[tuple[str, ...]] = get_args(Source)

#: The sources whose system-role messages are protected (M4).
PROTECTED_SYSTEM_SOURCES: Final[frozenset[str | None]] = frozenset({None, "system", "persona", "character"})

# -- reasons (S5, A2): one for every message of a shift, and for every block of an audit -------------------

#: Kept: protected context (M4).
PROTECTED: Final = "protected"
#: Kept: it fit the budget.
FIT: Final = "fit"
#: Left out by context shifting (the oldest unprotected tool groups leave first).
CONTEXT_SHIFT: Final = "context-shift"
#: Left out because the user excluded it (G5).
MANUAL: Final = "manual"
#: Stands in a summary that was kept instead (G3, C8).
SUMMARIZED: Final = "summarized"
#: A lorebook or memory block of low relevance (G4), before counting or dropped by ``vector-recall``.
LOW_RELEVANCE: Final = "low-relevance"
#: A strategy's message the host refused (G6).
PLUGIN_REJECTED: Final = "plugin-rejected"
#: Kept: excluded history that ``recall`` brought back because the current input needs it (G4a).
RECALLED: Final = "recalled"
#: Kept: a standing instruction of the user's, protected within its share of the budget (G4b).
STANDING: Final = "standing"
#: Audit only: a block that is switched off (a disabled lorebook entry).
DISABLED: Final = "disabled"
#: Audit only: a block with nothing in it.
EMPTY: Final = "empty"
#: Audit only: an interceptor removed it (P3).
INTERCEPTOR: Final = "interceptor"
#: Audit only: the last shift after the interceptors removed it (P2).
FINAL_BUDGET: Final = "final-budget"
#: Audit only: a keyed lorebook entry whose keys did not match the scan text (P3).
NOT_TRIGGERED: Final = "not-triggered"
#: Audit only: an active lorebook or memory block left out because those blocks filled their share (P3, P4).
LORE_BUDGET: Final = "lore-budget"

ShiftReason: TypeAlias = Literal[
    "protected",
    "fit",
    "context-shift",
    "manual",
    "summarized",
    "low-relevance",
    "plugin-rejected",
    "recalled",
    "standing",
]
#: The reasons a :class:`~contextshift.core.shifting.ShiftResult` may give.
REASONS: Final[frozenset[str]] = frozenset(get_args(ShiftReason))

AuditReason: TypeAlias = Literal[
    "protected",
    "fit",
    "context-shift",
    "manual",
    "summarized",
    "low-relevance",
    "plugin-rejected",
    "recalled",
    "standing",
    "disabled",
    "empty",
    "interceptor",
    "final-budget",
    "not-triggered",
    "lore-budget",
]
#: The reasons an audit entry may give: a shift's, and the pipeline's own.
AUDIT_REASONS: Final[frozenset[str]] = frozenset(get_args(AuditReason))

# -- template blocks (P1) ----------------------------------------------------------------------------------

BlockKind: TypeAlias = Literal[
    "system_prompt",
    "persona",
    "character",
    "lorebook_before",
    "memory",
    "history",
    "lorebook_after",
    "post_history",
    "input",
]
BLOCK_KINDS: Final[tuple[str, ...]] = get_args(BlockKind)

# -- provider kinds (V3) -----------------------------------------------------------------------------------

ProviderKind: TypeAlias = Literal["openai", "anthropic", "openai-codex"]
PROVIDER_KINDS: Final[tuple[str, ...]] = get_args(ProviderKind)
#: The kinds that speak OpenAI's Chat Completions wire format.
OPENAI_KINDS: Final[frozenset[str]] = frozenset({"openai", "openai-codex"})

# -- statuses (issue 24): one Literal per kind of record; the storage check constraints use the same tuples ------
#
# Success is spelled as each record has always stored it (changing a stored or API value would need a migration
# and a deprecation): a prompt audit ``completed``, a compaction pass or a job attempt ``ok``, a job
# ``succeeded``. :data:`SUCCESS` names the one spelling of each, so code asks "did it succeed?" in one place.

#: A generation's or an endpoint call's audit (A4, V7): ``prepared`` until the call ends.
AuditStatus: TypeAlias = Literal["prepared", "completed", "failed", "cancelled"]
AUDIT_STATUSES: Final[tuple[str, ...]] = get_args(AuditStatus)
#: The statuses an audit may end in.
FinishedAuditStatus: TypeAlias = Literal["completed", "failed", "cancelled"]
FINISHED_AUDIT_STATUSES: Final[tuple[str, ...]] = get_args(FinishedAuditStatus)

#: A compaction log row (C12): ``running`` while the pass runs.
CompactionStatus: TypeAlias = Literal["running", "ok", "error", "noop"]
COMPACTION_STATUSES: Final[tuple[str, ...]] = get_args(CompactionStatus)
#: The outcome of a compaction run (``POST /chats/{id}/compact``, ``/compact``).
CompactionOutcome: TypeAlias = Literal["ok", "noop", "error"]
COMPACTION_OUTCOMES: Final[tuple[str, ...]] = get_args(CompactionOutcome)
#: What started a compaction pass.
CompactionTrigger: TypeAlias = Literal["background", "sync", "manual"]
COMPACTION_TRIGGERS: Final[tuple[str, ...]] = get_args(CompactionTrigger)

#: A background job, as ``GET /api/v2/jobs`` names it.
JobStatus: TypeAlias = Literal["queued", "running", "succeeded", "failed"]
JOB_STATUSES: Final[tuple[str, ...]] = get_args(JobStatus)
#: One attempt of a job: ``interrupted`` when its worker stopped during it.
AttemptStatus: TypeAlias = Literal["running", "ok", "error", "interrupted"]
ATTEMPT_STATUSES: Final[tuple[str, ...]] = get_args(AttemptStatus)

#: How each kind of record spells success.
SUCCESS: Final[dict[str, str]] = {"audit": "completed", "compaction": "ok", "job": "succeeded", "attempt": "ok"}

# -- compaction reasons (C5, C8, C14) -------------------------------------------------------------------------

#: Why a bot's compaction model cannot summarize (``compaction.model_unavailable``'s ``reason``).
CompactionUnavailableReason: TypeAlias = Literal[
    "not_configured",
    "not_chat_model",
    "model_disabled",
    "provider_disabled",
    "provider_host_not_allowed",
    "output_limit_unsupported",
    "window_unknown",
]
COMPACTION_UNAVAILABLE_REASONS: Final[tuple[str, ...]] = get_args(CompactionUnavailableReason)
#: Why automatic compaction is off (the status's ``automatic.reason``): the model's reasons, and two more.
CompactionOffReason: TypeAlias = Literal[
    "not_configured",
    "not_chat_model",
    "model_disabled",
    "provider_disabled",
    "provider_host_not_allowed",
    "output_limit_unsupported",
    "window_unknown",
    "disabled",
    "cooldown",
]
COMPACTION_OFF_REASONS: Final[tuple[str, ...]] = get_args(CompactionOffReason)
#: Why the summary check refused a summary as unfaithful (core/compaction/plausibility.py).
SummaryRejection: TypeAlias = Literal["other_script", "other_language", "few_facts", "refusal"]
SUMMARY_REJECTIONS: Final[tuple[str, ...]] = get_args(SummaryRejection)

# -- summaries (G3, C8) -------------------------------------------------------------------------------------

#: The first line of every summary contextshift writes, by a strategy or by compaction.
SUMMARY_HEADER: Final = "[Summary of earlier context]"

__all__ = [
    "ATTEMPT_STATUSES",
    "AUDIT_REASONS",
    "AUDIT_STATUSES",
    "BLOCK_KINDS",
    "COMPACTION_OFF_REASONS",
    "COMPACTION_OUTCOMES",
    "COMPACTION_STATUSES",
    "COMPACTION_TRIGGERS",
    "COMPACTION_UNAVAILABLE_REASONS",
    "CONTEXT_SHIFT",
    "DISABLED",
    "EMPTY",
    "FINAL_BUDGET",
    "FINISHED_AUDIT_STATUSES",
    "FIT",
    "INTERCEPTOR",
    "JOB_STATUSES",
    "LORE_BUDGET",
    "LOW_RELEVANCE",
    "MANUAL",
    "NOT_TRIGGERED",
    "OPENAI_KINDS",
    "PLUGIN_REJECTED",
    "PROTECTED",
    "PROTECTED_SYSTEM_SOURCES",
    "PROVIDER_KINDS",
    "REASONS",
    "RECALLED",
    "ROLES",
    "SOURCES",
    "STANDING",
    "SUCCESS",
    "SUMMARIZED",
    "SUMMARY_HEADER",
    "SUMMARY_REJECTIONS",
    "AttemptStatus",
    "AuditReason",
    "AuditStatus",
    "BlockKind",
    "CompactionOffReason",
    "CompactionOutcome",
    "CompactionStatus",
    "CompactionTrigger",
    "CompactionUnavailableReason",
    "FinishedAuditStatus",
    "JobStatus",
    "ProviderKind",
    "Role",
    "ShiftReason",
    "Source",
    "SummaryRejection",
]
