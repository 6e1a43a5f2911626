"""Context compaction, pure core (C1–C3, C6–C10): policy, typed records, selection, prompt, validation.

A pass, as the service runs it::

    decision = decide(window, compactable_tokens(history), settings, phase="after_turn")
    budget = input_budget(summarizer_window)              # <= 0: fail before any call (C9)
    selection = select_fold(history, target_tokens=decision.target_tokens, input_budget=budget)
    prompt = build_prompt(selection.fold, budget_tokens=budget)
    ... call the summarizer with prompt.system / prompt.user, max_tokens=max_output_tokens(summarizer_window)
    verdict, summary = accept_summary(reply_text, finish_reason, selection, message_id=new_id)
    if verdict.ok: commit summary (it takes the place of selection.fold[0]); else change nothing (C8)

Nothing here does I/O.
"""

from ..vocabulary import SUMMARY_HEADER
from .layout import (
    Layout,
    analyze,
    compactable_tokens,
    current_turn_start,
    is_summary,
    is_tool_result,
    is_user_turn,
    message_tokens,
)
from .plausibility import PlausibilitySettings, implausibility
from .policy import (
    DEFAULT_RATIO,
    FAILURE_COOLDOWN_SECONDS,
    MAX_BACKGROUND_PASSES,
    OVER_SYNC_REACH,
    CompactionSettings,
    Decision,
    Triggers,
    cooldown_active,
    decide,
    sync_reach,
    triggers,
)
from .records import (
    FILE_LABEL,
    IMAGE_LABEL,
    Record,
    SummaryRecord,
    TextItem,
    TextRecord,
    ToolCallItem,
    ToolExchange,
    ToolResultItem,
    build_records,
    content_text,
    record_of,
    summary_body,
    summary_covers,
)
from .rendering import (
    SYSTEM_PROMPT,
    TOOL_ARGS_CAP,
    TOOL_RESULT_CAP,
    SummarizerInputTooLarge,
    SummarizerPrompt,
    build_prompt,
    input_budget,
    max_output_tokens,
    render_transcript,
)
from .selection import BELOW_TARGET, BUDGET_LIMITED, NOTHING_TO_FOLD, SELECTED, Selection, select_fold
from .validation import (
    EMPTY,
    NATURAL_STOPS,
    NOT_SMALLER,
    TRUNCATED,
    UNFAITHFUL,
    Verdict,
    accept_summary,
    clean_summary,
    summary_from_selection,
    summary_message,
    validate_summary,
)

__all__ = [
    "BELOW_TARGET",
    "BUDGET_LIMITED",
    "DEFAULT_RATIO",
    "EMPTY",
    "FAILURE_COOLDOWN_SECONDS",
    "FILE_LABEL",
    "IMAGE_LABEL",
    "MAX_BACKGROUND_PASSES",
    "NATURAL_STOPS",
    "NOTHING_TO_FOLD",
    "NOT_SMALLER",
    "OVER_SYNC_REACH",
    "SELECTED",
    "SUMMARY_HEADER",
    "SYSTEM_PROMPT",
    "TOOL_ARGS_CAP",
    "TOOL_RESULT_CAP",
    "TRUNCATED",
    "UNFAITHFUL",
    "CompactionSettings",
    "Decision",
    "Layout",
    "PlausibilitySettings",
    "Record",
    "Selection",
    "SummarizerInputTooLarge",
    "SummarizerPrompt",
    "SummaryRecord",
    "TextItem",
    "TextRecord",
    "ToolCallItem",
    "ToolExchange",
    "ToolResultItem",
    "Triggers",
    "Verdict",
    "accept_summary",
    "analyze",
    "build_prompt",
    "build_records",
    "clean_summary",
    "compactable_tokens",
    "content_text",
    "cooldown_active",
    "current_turn_start",
    "decide",
    "implausibility",
    "input_budget",
    "is_summary",
    "is_tool_result",
    "is_user_turn",
    "max_output_tokens",
    "message_tokens",
    "record_of",
    "render_transcript",
    "select_fold",
    "summary_body",
    "summary_covers",
    "summary_from_selection",
    "summary_message",
    "sync_reach",
    "triggers",
    "validate_summary",
]
