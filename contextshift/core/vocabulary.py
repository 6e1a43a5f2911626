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

# -- statuses (issue 24): one word per meaning, one Literal per kind of record -----------------------------
#
# Every status set is built from the same words, so "did it succeed?" is ``status == COMPLETED`` for an audit, a
# compaction pass, a job and an attempt alike (until migration 0023 success was spelled ``completed``, ``ok`` and
# ``succeeded``, failure ``failed`` and ``error``). The sets stay distinct Literals: a job can be ``queued``, an
# audit ``prepared``, a turn neither.
#
# A compaction run that had nothing to do (it was off, cooling down, below its target, or another run held the
# chat) is ``skipped``, not ``noop``: "skipped" says to a reader of the log or the API that the run was passed
# over on purpose and changed nothing, where "no-op" is programmer's jargon; ``reason`` says why.

#: Written before the work starts, until it ends (an audit).
PREPARED: Final = "prepared"
#: Waiting for a worker (a job).
QUEUED: Final = "queued"
#: Under way.
RUNNING: Final = "running"
#: Ended well: the one word for success.
COMPLETED: Final = "completed"
#: Ended by an error: the one word for failure.
FAILED: Final = "failed"
#: Stopped by the user before it ended.
CANCELLED: Final = "cancelled"
#: Cut off because its worker or instance stopped during it.
INTERRUPTED: Final = "interrupted"
#: Passed over on purpose: nothing to do, or not now (``reason`` says why).
SKIPPED: Final = "skipped"

#: A generation's or an endpoint call's audit (A4, V7): ``prepared`` until the call ends.
AuditStatus: TypeAlias = Literal["prepared", "completed", "failed", "cancelled"]
AUDIT_STATUSES: Final[tuple[str, ...]] = get_args(AuditStatus)
#: The statuses an audit may end in.
FinishedAuditStatus: TypeAlias = Literal["completed", "failed", "cancelled"]
FINISHED_AUDIT_STATUSES: Final[tuple[str, ...]] = get_args(FinishedAuditStatus)

#: A compaction log row (C12): ``running`` while the pass runs.
CompactionStatus: TypeAlias = Literal["running", "completed", "failed", "skipped"]
COMPACTION_STATUSES: Final[tuple[str, ...]] = get_args(CompactionStatus)
#: The outcome of a compaction run (``POST /chats/{id}/compact``, ``/compact``).
CompactionOutcome: TypeAlias = Literal["completed", "skipped", "failed"]
COMPACTION_OUTCOMES: Final[tuple[str, ...]] = get_args(CompactionOutcome)
#: What started a compaction pass.
CompactionTrigger: TypeAlias = Literal["background", "sync", "manual"]
COMPACTION_TRIGGERS: Final[tuple[str, ...]] = get_args(CompactionTrigger)

#: A background job, as ``GET /api/v2/jobs`` names it.
JobStatus: TypeAlias = Literal["queued", "running", "completed", "failed"]
JOB_STATUSES: Final[tuple[str, ...]] = get_args(JobStatus)
#: The statuses a job may end in.
ENDED_JOB_STATUSES: Final[tuple[str, ...]] = ("completed", "failed")
#: One attempt of a job: ``interrupted`` when its worker stopped during it.
AttemptStatus: TypeAlias = Literal["running", "completed", "failed", "interrupted"]
ATTEMPT_STATUSES: Final[tuple[str, ...]] = get_args(AttemptStatus)
#: The statuses of an attempt that did not succeed (a job's ``errors``).
FailedAttemptStatus: TypeAlias = Literal["failed", "interrupted"]
FAILED_ATTEMPT_STATUSES: Final[tuple[str, ...]] = get_args(FailedAttemptStatus)

#: Every status word of every set: the words above, and no other.
STATUS_WORDS: Final[tuple[str, ...]] = (PREPARED, QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED, INTERRUPTED, SKIPPED)

#: The words each set spelled differently before migration 0023 (old → new), for the migration and its tests.
RENAMED_STATUSES: Final[dict[str, dict[str, str]]] = {
    "compaction_logs": {"ok": COMPLETED, "error": FAILED, "noop": SKIPPED},
    "jobs": {"succeeded": COMPLETED},
    "job_attempts": {"ok": COMPLETED, "error": FAILED},
}

# -- other reasons: kebab-case too ---------------------------------------------------------------------------

#: A reply's ``meta.partial_reason``, when the provider failed while it streamed.
PROVIDER_ERROR: Final = "provider-error"
#: Why a reply was kept partial (``meta.partial_reason``): stored while streaming and the process died
#: (``interrupted``), stopped by the user (``cancelled``), or the provider failed mid-stream.
PartialReason: TypeAlias = Literal["interrupted", "cancelled", "provider-error"]
PARTIAL_REASONS: Final[tuple[str, ...]] = get_args(PartialReason)

#: The reasons migration 0023 rewrote in stored JSON (old → new): a reply's ``meta.partial_reason`` and an
#: audit's ``calibration_doubted.reason`` (``core/calibration.py``'s ``doubt``).
RENAMED_REASONS: Final[dict[str, str]] = {
    "provider_error": PROVIDER_ERROR,
    "report_at_window": "report-at-window",
    "report_far_below_count": "report-far-below-count",
}

# -- compaction reasons (C5, C8, C14): kebab-case, as every reason code (the style of ``ShiftResult``'s) ---------

#: Why a bot's compaction model cannot summarize (``compaction.model_unavailable``'s ``reason``).
CompactionUnavailableReason: TypeAlias = Literal[
    "not-configured",
    "not-chat-model",
    "model-disabled",
    "provider-disabled",
    "provider-host-not-allowed",
    "output-limit-unsupported",
    "window-unknown",
]
COMPACTION_UNAVAILABLE_REASONS: Final[tuple[str, ...]] = get_args(CompactionUnavailableReason)
#: Why automatic compaction is off (the status's ``automatic.reason``): the model's reasons, and two more.
CompactionOffReason: TypeAlias = Literal[
    "not-configured",
    "not-chat-model",
    "model-disabled",
    "provider-disabled",
    "provider-host-not-allowed",
    "output-limit-unsupported",
    "window-unknown",
    "disabled",
    "cooldown",
]
COMPACTION_OFF_REASONS: Final[tuple[str, ...]] = get_args(CompactionOffReason)
#: Why the summary check refused a summary as unfaithful (core/compaction/plausibility.py).
SummaryRejection: TypeAlias = Literal["other-script", "other-language", "few-facts", "refusal"]
SUMMARY_REJECTIONS: Final[tuple[str, ...]] = get_args(SummaryRejection)
#: Why a compaction run was ``skipped`` (its outcome's ``reason``): no summarizer, the cooldown, another run
#: holds the chat (``running``; ``busy`` when a synchronous caller stopped waiting for it), or history too far
#: over the window for passes before the turn.
CompactionSkipReason: TypeAlias = Literal["model-unavailable", "cooldown", "running", "busy", "over-sync-reach"]
COMPACTION_SKIP_REASONS: Final[tuple[str, ...]] = get_args(CompactionSkipReason)

# -- summaries (G3, C8) -------------------------------------------------------------------------------------

#: The first line of every summary contextshift writes, by a strategy or by compaction.
SUMMARY_HEADER: Final = "[Summary of earlier context]"

__all__ = [
    "ATTEMPT_STATUSES",
    "AUDIT_REASONS",
    "AUDIT_STATUSES",
    "BLOCK_KINDS",
    "CANCELLED",
    "COMPACTION_OFF_REASONS",
    "COMPACTION_OUTCOMES",
    "COMPACTION_SKIP_REASONS",
    "COMPACTION_STATUSES",
    "COMPACTION_TRIGGERS",
    "COMPACTION_UNAVAILABLE_REASONS",
    "COMPLETED",
    "CONTEXT_SHIFT",
    "DISABLED",
    "EMPTY",
    "ENDED_JOB_STATUSES",
    "FAILED",
    "FAILED_ATTEMPT_STATUSES",
    "FINAL_BUDGET",
    "FINISHED_AUDIT_STATUSES",
    "FIT",
    "INTERCEPTOR",
    "INTERRUPTED",
    "JOB_STATUSES",
    "LORE_BUDGET",
    "LOW_RELEVANCE",
    "MANUAL",
    "NOT_TRIGGERED",
    "OPENAI_KINDS",
    "PARTIAL_REASONS",
    "PLUGIN_REJECTED",
    "PREPARED",
    "PROTECTED",
    "PROTECTED_SYSTEM_SOURCES",
    "PROVIDER_ERROR",
    "PROVIDER_KINDS",
    "QUEUED",
    "REASONS",
    "RECALLED",
    "RENAMED_REASONS",
    "RENAMED_STATUSES",
    "ROLES",
    "RUNNING",
    "SKIPPED",
    "SOURCES",
    "STANDING",
    "STATUS_WORDS",
    "SUMMARIZED",
    "SUMMARY_HEADER",
    "SUMMARY_REJECTIONS",
    "AttemptStatus",
    "AuditReason",
    "AuditStatus",
    "BlockKind",
    "CompactionOffReason",
    "CompactionOutcome",
    "CompactionSkipReason",
    "CompactionStatus",
    "CompactionTrigger",
    "CompactionUnavailableReason",
    "FailedAttemptStatus",
    "FinishedAuditStatus",
    "JobStatus",
    "PartialReason",
    "ProviderKind",
    "Role",
    "ShiftReason",
    "Source",
    "SummaryRejection",
]
