"""contextshift: keep long LLM conversations inside a model's context window without losing what matters.

The public API. ``contextshift.core`` is the pure core (no I/O); ``contextshift.tokenizers`` adds the
exact offline tokenizer profiles; ``contextshift.embeddings`` the embedding model of the ``embeddings`` extra.
The requirement ids cited in docstrings (S3, T5, G4a, …) are explained in ``docs/design.md``.
"""

from .core import (
    ApproximateProfile,
    ContextShiftError,
    ContextStrategyRegistry,
    Embedder,
    Message,
    ShiftResult,
    StrategyRequest,
    TokenBudgetExceeded,
    TokenizerProfile,
    ToolCall,
    Truncation,
    UnknownStrategy,
    default_registry,
    shift_context,
    shift_with_strategy,
)
from .core.wire import to_anthropic_messages, to_openai_messages
from .tokenizers import get_tokenizer

__version__ = "0.1.0"

__all__ = [
    "ApproximateProfile",
    "ContextShiftError",
    "ContextStrategyRegistry",
    "Embedder",
    "Message",
    "ShiftResult",
    "StrategyRequest",
    "TokenBudgetExceeded",
    "TokenizerProfile",
    "ToolCall",
    "Truncation",
    "UnknownStrategy",
    "__version__",
    "default_registry",
    "get_tokenizer",
    "shift_context",
    "shift_with_strategy",
    "to_anthropic_messages",
    "to_openai_messages",
]
