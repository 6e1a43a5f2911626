"""The compatible endpoints' refusals and failures (V7), in both dialects' words (the routes translate)."""

from __future__ import annotations

from ..core.errors import ContextShiftError
from ..pipeline import ReplyReserveTooLarge
from ..providers import ProviderError
from .errors import Refusal, ServiceError

#: The error code of a call whose protected messages do not fit.
CONTEXT_LENGTH_EXCEEDED = "CONTEXT_LENGTH_EXCEEDED"


def model_not_found(name: str) -> ServiceError:
    return ServiceError(
        Refusal.NOT_FOUND, "MODEL_NOT_FOUND", f"The model {name!r} does not exist or is not enabled.", param="model"
    )


class ContextTooLong(ServiceError):
    """400: the protected messages (system messages, the last user message) alone exceed the budget, by our
    count or, after a rejection, at the rate the provider counted (``reported_tokens``)."""

    def __init__(
        self,
        audit_id: str,
        window: int,
        reserve: int,
        overhead: int,
        protected: int,
        *,
        reported_tokens: int | None = None,
    ) -> None:
        needed = protected + overhead
        counted = (
            f" (after the provider counted the prompt {reported_tokens} tokens)" if reported_tokens is not None else ""
        )
        super().__init__(
            Refusal.INVALID,
            CONTEXT_LENGTH_EXCEEDED,
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{needed} tokens that cannot be dropped (system messages, the last user message"
            f"{', tool definitions' if overhead else ''}) with {reserve} tokens reserved for the reply{counted}. "
            "Please reduce the length of the messages or of the completion.",
            param="messages",
            context_limit=window,
            response_reserve=reserve,
            prompt_tokens=needed,
        )
        self.audit_id = audit_id
        self.window = window
        self.reserve = reserve
        self.needed = needed


class ReserveTooLarge(ServiceError):
    """The request's reply reserve (its ``max_tokens``) alone takes the model's whole window, so no prompt can
    fit however short: a bot's ``RESPONSE_RESERVE_TOO_LARGE`` (:class:`~contextshift.pipeline.ReplyReserveTooLarge`),
    with its words. Decided before anything is fitted, audited or sent.

    Args:
        window: the model's context window, in tokens.
        reserve: the reply reserve, in tokens.
        field: the request field that sets it (``max_tokens`` or ``max_completion_tokens``).
    """

    def __init__(self, window: int, reserve: int, field: str) -> None:
        words = ReplyReserveTooLarge(window, reserve, setting=field)
        super().__init__(
            Refusal.UNPROCESSABLE,
            words.code,
            words.message,
            param=field,
            context_limit=window,
            response_reserve=reserve,
        )


class UpstreamFailed(ContextShiftError):
    """A provider failure, with the audit it was recorded in; ``code`` is the provider error's."""

    code: str  # instance attribute here; ContextShiftError keeps it on the class

    def __init__(self, error: ProviderError, audit_id: str, excluded: int) -> None:
        super().__init__(error.code)
        self.code = error.code
        self.error = error
        self.audit_id = audit_id
        self.excluded = excluded


__all__ = ["CONTEXT_LENGTH_EXCEEDED", "ContextTooLong", "ReserveTooLarge", "UpstreamFailed", "model_not_found"]
