"""What a test can script the fake provider to do: replies, errors and raw answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

#: Put into every default error body and an error header; it must never appear anywhere outside the fake.
SECRET = "sk-upstream-SECRET-123"


@dataclass(frozen=True)
class FakeToolCall:
    id: str
    name: str
    #: A JSON string (OpenAI style) or an object (turned into JSON).
    arguments: str | Mapping[str, Any] = "{}"

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """A successful answer, rendered in whichever protocol the request used.

    ``text=None`` echoes the last user message (``"Echo: ..."``). ``finish_reason`` is the normalized value
    (``stop``, ``length``, ``tool_calls``, ``content_filter``) and is mapped to the protocol's own
    (``end_turn``, ``max_tokens``, ``tool_use``, ``refusal`` for Anthropic). ``input_tokens`` is the whole
    prompt including ``cached_input_tokens`` (for Anthropic it is split into ``input_tokens`` and
    ``cache_read_input_tokens``); ``None`` estimates it from the request body. ``usage=False`` reports none.
    """

    text: str | None = None
    finish_reason: str = "stop"
    tool_calls: Sequence[FakeToolCall] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int = 0
    usage: bool = True
    #: Seconds before the response starts (use with a short read timeout to test timeouts).
    delay: float = 0.0
    #: Seconds between streamed text chunks.
    chunk_delay: float = 0.0
    #: How the text is split into stream chunks; default: word by word.
    chunks: Sequence[str] | None = None
    #: Drop the connection after this many streamed text chunks (a broken stream).
    abort_after: int | None = None
    #: Stop sending (without closing) after this many streamed text chunks, until the client goes away.
    hang_after: int | None = None
    model: str | None = None
    #: Answer only once the test sets this event (after ``delay``), or never if the client goes away first: a
    #: reply held open for exactly as long as the test needs, with no clock involved.
    hold: threading.Event | None = None


@dataclass(frozen=True)
class Error:
    """An HTTP error answer with a provider-shaped body that (by default) contains :data:`SECRET`."""

    status: int
    message: str | None = None
    #: OpenAI ``error.code`` (e.g. ``context_length_exceeded``).
    code: str | None = None
    #: The ``error.type``; default depends on the status (``rate_limit_error``, ``api_error``, ...).
    error_type: str | None = None
    #: A raw body that replaces the provider-shaped one.
    body: str | bytes | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_after: float | None = None
    delay: float = 0.0

    @classmethod
    def context_length(cls) -> Error:
        """The 400 both protocols send when the prompt is too long."""
        return cls(
            400,
            message=f"prompt is too long: maximum context length is 8192 tokens ({SECRET})",
            code="context_length_exceeded",
            error_type="invalid_request_error",
        )


@dataclass(frozen=True)
class Raw:
    """Any answer at all (e.g. a malformed 200)."""

    status: int = 200
    body: str | bytes = b"this is not json"
    content_type: str = "application/json"
    delay: float = 0.0


ScriptItem: TypeAlias = Reply | Error | Raw


@dataclass
class RecordedRequest:
    """One request the fake received."""

    method: str
    path: str
    #: Lower-case header names.
    headers: dict[str, str]
    raw: bytes
    #: The parsed JSON body, or ``None``.
    body: Any
    #: ``"openai"``, ``"anthropic"`` or ``"other"``.
    protocol: str
    #: What the fake answered with (``None``: the default echo).
    answered_with: ScriptItem | None = None
    #: The 400 message when the fake's own protocol validation rejected the request.
    rejected: str | None = None
    #: True when the fake's own counting (``count_as``) rejected it as over the model's window.
    over_limit: bool = False
    #: Set when the client closed the connection before the response was complete.
    disconnected: threading.Event = field(default_factory=threading.Event)
    #: Set once the full response was sent.
    completed: threading.Event = field(default_factory=threading.Event)

    @property
    def json(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), "request body was not a JSON object"
        return self.body

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json.get("messages", []))
