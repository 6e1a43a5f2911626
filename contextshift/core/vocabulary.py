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

# -- summaries (G3, C8) -------------------------------------------------------------------------------------

#: The first line of every summary contextshift writes, by a strategy or by compaction.
SUMMARY_HEADER: Final = "[Summary of earlier context]"

__all__ = [
    "AUDIT_REASONS",
    "BLOCK_KINDS",
    "CONTEXT_SHIFT",
    "DISABLED",
    "EMPTY",
    "FINAL_BUDGET",
    "FIT",
    "INTERCEPTOR",
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
    "SUMMARIZED",
    "SUMMARY_HEADER",
    "AuditReason",
    "BlockKind",
    "ProviderKind",
    "Role",
    "ShiftReason",
    "Source",
]
