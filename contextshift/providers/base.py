"""Provider-neutral request, result, stream-event and error types, and the ``ProviderClient`` protocol (V3).

Everything a caller codes against lives here; the HTTP clients in :mod:`.openai` and :mod:`.anthropic`
implement :class:`ProviderClient`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from contextshift.core.errors import ContextShiftError
from contextshift.core.messages import ToolCall
from contextshift.core.vocabulary import PROVIDER_KINDS

#: Normalized finish reasons. Providers' own values are mapped onto these; an unknown value is passed
#: through lower-cased, so anything other than ``"stop"`` means "did not end naturally" (C8).
FINISH_STOP: Final = "stop"
FINISH_LENGTH: Final = "length"
FINISH_TOOL_CALLS: Final = "tool_calls"
FINISH_CONTENT_FILTER: Final = "content_filter"

# -- error codes (A2) --------------------------------------------------------------------------------------
PROVIDER_AUTH: Final = "PROVIDER_AUTH"
PROVIDER_RATE_LIMITED: Final = "PROVIDER_RATE_LIMITED"
PROVIDER_TIMEOUT: Final = "PROVIDER_TIMEOUT"
PROVIDER_UNAVAILABLE: Final = "PROVIDER_UNAVAILABLE"
#: Why a provider could not be reached, each in words a user can act on (a connection test, a failed turn).
PROVIDER_CONNECTION_REFUSED: Final = "PROVIDER_CONNECTION_REFUSED"
PROVIDER_DNS_FAILED: Final = "PROVIDER_DNS_FAILED"
PROVIDER_TLS_FAILED: Final = "PROVIDER_TLS_FAILED"
#: The provider answered with an HTTP 5xx (a fault on its side, not in the request).
PROVIDER_SERVER_ERROR: Final = "PROVIDER_SERVER_ERROR"
PROVIDER_CONTEXT_LENGTH: Final = "PROVIDER_CONTEXT_LENGTH"
PROVIDER_BAD_REQUEST: Final = "PROVIDER_BAD_REQUEST"
GENERATION_FAILED: Final = "GENERATION_FAILED"
#: ``ChatResult.cut`` of a streamed reply that outgrew its cap: stopped there and kept. (A whole JSON reply
#: over the hard byte limit cannot be cut: it fails with ``GENERATION_FAILED``.)
REPLY_TOO_LARGE: Final = "reply_too_large"

ERROR_CODES: frozenset[str] = frozenset(
    {
        PROVIDER_AUTH,
        PROVIDER_RATE_LIMITED,
        PROVIDER_TIMEOUT,
        PROVIDER_UNAVAILABLE,
        PROVIDER_CONNECTION_REFUSED,
        PROVIDER_DNS_FAILED,
        PROVIDER_TLS_FAILED,
        PROVIDER_SERVER_ERROR,
        PROVIDER_CONTEXT_LENGTH,
        PROVIDER_BAD_REQUEST,
        GENERATION_FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat call. ``messages`` (and ``system``) are already in the provider's wire format.

    Build it with :func:`contextshift.providers.serialize.chat_request`, which serializes core messages for
    the right protocol. ``extra`` is merged into the JSON body last (e.g. ``{"top_p": 0.9}``).
    """

    model: str
    messages: list[dict[str, Any]]
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    tools: list[dict[str, Any]] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one call. ``input_tokens`` is the whole prompt, cached part included."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: Prompt tokens served from the provider's prompt cache (OpenAI ``cached_tokens``, Anthropic
    #: ``cache_read_input_tokens``).
    cached_input_tokens: int = 0
    #: Prompt tokens written to the cache (Anthropic ``cache_creation_input_tokens``); 0 elsewhere.
    cache_write_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ChatResult:
    """The finished reply."""

    text: str
    finish_reason: str
    tool_calls: tuple[ToolCall, ...] = ()
    #: ``None`` when the provider did not report usage.
    usage: Usage | None = None
    model: str | None = None
    #: The provider's own finish value (``end_turn``, ``stop``, ...), for diagnostics.
    raw_finish_reason: str | None = None
    #: Why contextshift itself stopped the reply before the provider ended it (:data:`REPLY_TOO_LARGE`: the
    #: reply outgrew its cap, see :func:`contextshift.providers.http.reply_cap`); None when it ended on its own.
    cut: str | None = None


@dataclass(frozen=True, slots=True)
class ListedModel:
    """One model of a provider's own list (``GET /models``). The limits are what the provider stated, or
    contextshift's table of known models (:mod:`contextshift.core.known_models`) when it stated none."""

    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text, as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The last event of every successful stream."""

    result: ChatResult


StreamEvent: TypeAlias = TextDelta | Finished


class UnknownProviderKind(ContextShiftError, ValueError):
    """A provider kind contextshift has no client for (V3)."""

    code = "UNKNOWN_PROVIDER_KIND"

    def __init__(self, kind: str) -> None:
        super().__init__(f"Unknown provider kind {kind!r}; expected one of {', '.join(PROVIDER_KINDS)}.", kind=kind)

    def __str__(self) -> str:
        return self.message


class ProviderError(ContextShiftError):
    """A normalized provider failure (A2).

    ``message`` is contextshift's own wording: it never carries the upstream body, headers or the API key,
    and neither does ``str``, ``repr``, ``params`` or the exception chain (errors are raised ``from None``).
    """

    code: str  # instance attribute here; ContextShiftError keeps it on the class

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        retryable: bool = False,
        *,
        retry_after: float | None = None,
        reported_tokens: int | None = None,
        reported_limit: int | None = None,
    ) -> None:
        params: dict[str, object] = {}
        if status is not None:
            params["status"] = status
        if retry_after is not None:
            params["retry_after"] = retry_after
        super().__init__(message, **params)
        self.code = code
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        #: T5: a context-length rejection's own numbers (prompt tokens, the model's limit) when it gave them;
        #: numbers only, read from the body, never its text.
        self.reported_tokens = reported_tokens
        self.reported_limit = reported_limit

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"ProviderError(code={self.code!r}, message={self.message!r}, status={self.status!r}, "
            f"retryable={self.retryable!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_error,
            (
                self.code,
                self.message,
                self.status,
                self.retryable,
                self.retry_after,
                self.reported_tokens,
                self.reported_limit,
            ),
        )


def _rebuild_error(
    code: str,
    message: str,
    status: int | None,
    retryable: bool,
    retry_after: float | None,
    reported_tokens: int | None = None,
    reported_limit: int | None = None,
) -> ProviderError:
    return ProviderError(
        code,
        message,
        status,
        retryable,
        retry_after=retry_after,
        reported_tokens=reported_tokens,
        reported_limit=reported_limit,
    )


@runtime_checkable
class ChatStream(Protocol):
    """What ``ProviderClient.stream`` returns: an async iterator of events that closes its HTTP stream.

    Use it as ``async with client.stream(request) as events: async for event in events: ...`` (or call
    ``aclose``) so that breaking out early closes the connection at once rather than at garbage collection.
    Cancelling the consuming task closes it too.
    """

    def __aiter__(self) -> AsyncIterator[StreamEvent]: ...

    async def __anext__(self) -> StreamEvent: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> ChatStream: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


@runtime_checkable
class ProviderClient(Protocol):
    """A chat provider over HTTP. Every failure is raised as :class:`ProviderError`."""

    @property
    def kind(self) -> str: ...

    @property
    def enforces_output_limit(self) -> bool:
        """False when the provider may ignore ``max_tokens`` (``openai-codex``, C5)."""
        ...

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The exact JSON body ``complete``/``stream`` will send for ``request`` (``stream`` flag honoured)."""
        ...

    async def complete(self, request: ChatRequest) -> ChatResult:
        """One non-streaming call (``request.stream`` is ignored)."""
        ...

    def stream(self, request: ChatRequest) -> ChatStream:
        """A streaming call: ``TextDelta`` events, then exactly one ``Finished``."""
        ...

    async def list_models(self) -> list[ListedModel]:
        """The provider's model list: one ``GET``, the cheapest call that proves address, TLS and key."""
        ...

    async def aclose(self) -> None: ...
