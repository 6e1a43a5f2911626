"""The prompt pipeline (P1-P5, G7): assembly, lorebook, memory, template, shifting, interceptors, audit.

Pure like the core (no I/O), shared by generation and the live preview.
"""

from .assemble import CURRENT_INPUT_ID, Sources
from .audit import AuditEntry
from .interceptors import AuthorNote, Interceptor, InterceptorContext
from .lorebook import LoreEntry
from .memory import MemoryItem
from .run import (
    PipelineRequest,
    PipelineResult,
    PromptBudgetExceeded,
    ReplyReserveTooLarge,
    payload_tokens,
    run_pipeline,
)
from .template import BLOCKS, DEFAULT_TEMPLATE, CustomBlock, parse_template

__all__ = [
    "BLOCKS",
    "CURRENT_INPUT_ID",
    "DEFAULT_TEMPLATE",
    "AuditEntry",
    "AuthorNote",
    "CustomBlock",
    "Interceptor",
    "InterceptorContext",
    "LoreEntry",
    "MemoryItem",
    "PipelineRequest",
    "PipelineResult",
    "PromptBudgetExceeded",
    "ReplyReserveTooLarge",
    "Sources",
    "parse_template",
    "payload_tokens",
    "run_pipeline",
]
