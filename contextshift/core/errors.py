"""Errors a caller can cause, each with a stable ``UPPER_SNAKE`` code."""

from __future__ import annotations


class ContextShiftError(Exception):
    """Base of contextshift's own errors; ``code`` is stable, ``params`` explains it.

    Catch this to handle every error contextshift raises on purpose (``except ContextShiftError``).

    Args:
        message: what went wrong, in plain words (also ``str(error)``).
        **params: the values the message is about (ids, counts, limits), kept in ``params``.
    """

    code = "CONTEXT_SHIFT_ERROR"

    def __init__(self, message: str, **params: object) -> None:
        super().__init__(message)
        self.message = message
        self.params: dict[str, object] = params


class TokenBudgetExceeded(ContextShiftError):
    """S3/P2: the protected context alone (or an empty budget) does not fit; nothing may be sent.

    Args:
        protected_tokens: what the protected messages (system prompt, persona, pinned, current input) need.
        budget: the tokens the prompt may use.
        message: a message to use instead of the default, which names both numbers.
    """

    code = "TOKEN_BUDGET_EXCEEDED"

    def __init__(self, protected_tokens: int, budget: int, message: str | None = None) -> None:
        self.protected_tokens = protected_tokens
        self.budget = budget
        super().__init__(
            message
            or (
                f"The protected context needs {protected_tokens} tokens but the budget is {budget}: "
                "shorten the system prompt, persona, pinned messages or the current input."
            ),
            protected_tokens=protected_tokens,
            budget=budget,
        )


class UnknownStrategy(ContextShiftError, KeyError):
    """G1: no strategy is registered under that name (also a ``KeyError``).

    Args:
        name: the name that was asked for.
    """

    code = "UNKNOWN_CONTEXT_STRATEGY"

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown context strategy {name!r}", name=name)

    def __str__(self) -> str:
        return self.message
