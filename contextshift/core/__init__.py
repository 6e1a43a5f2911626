"""The pure core of contextshift: no I/O, no dependency on the rest of the package."""

from .embedding import Embedder
from .errors import ContextShiftError, TokenBudgetExceeded, UnknownStrategy
from .groups import Group, build_groups
from .host import default_registry, shift_with_strategy
from .messages import Message, ToolCall, as_message, normalize_messages
from .request import Strategy, StrategyRequest
from .shifting import ShiftResult, Truncation, shift_context
from .strategies import ContextStrategyRegistry
from .tokens import ApproximateProfile, ChatFormatProfile, TokenizerProfile, approximate_count

__all__ = [
    "ApproximateProfile",
    "ChatFormatProfile",
    "ContextShiftError",
    "ContextStrategyRegistry",
    "Embedder",
    "Group",
    "Message",
    "ShiftResult",
    "Strategy",
    "StrategyRequest",
    "TokenBudgetExceeded",
    "TokenizerProfile",
    "ToolCall",
    "Truncation",
    "UnknownStrategy",
    "approximate_count",
    "as_message",
    "build_groups",
    "default_registry",
    "normalize_messages",
    "shift_context",
    "shift_with_strategy",
]
