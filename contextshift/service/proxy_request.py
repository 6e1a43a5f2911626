"""What an endpoint call is (V7): the caller's request, the fitted call ready to send, and the request that
goes to the model's provider, with the caller's options in the provider's spelling."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import limits
from ..core.messages import Message
from ..core.tokens import TokenizerProfile
from ..providers import ChatRequest
from ..storage.tables import ModelRow, ProviderRow
from . import proxy_fit as fit
from .calibration import Counting

#: Options translated for an Anthropic provider; any other option is not forwarded there (and the audit says so).
_ANTHROPIC_SAME = ("temperature", "top_p", "top_k")
#: Anthropic request options an OpenAI-compatible provider takes under the same name.
_OPENAI_SAME = ("temperature", "top_p")


@dataclass(frozen=True, slots=True)
class ProxyCall:
    """One request to an endpoint, in OpenAI's or Anthropic's vocabulary (``dialect``)."""

    model: str
    messages: Sequence[Mapping[str, Any]]
    stream: bool = False
    #: ``max_tokens`` or ``max_completion_tokens`` of the request (``max_tokens_field`` says which).
    max_tokens: int | None = None
    max_tokens_field: str = "max_tokens"
    strategy: str | None = None
    #: The strategy of the caller's token (``api_tokens.context_strategy``), used when the request names none.
    token_strategy: str | None = None
    tools: list[dict[str, Any]] | None = None
    #: Every other field of the request (``tool_choice``, ``temperature``, ``response_format``, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The signed-in caller: the audit is theirs.
    user_id: str = ""
    #: The JSON text of each message as the caller sent it (forwarded as it is when the message is kept).
    messages_json: Sequence[bytes] | None = None
    #: The request body holds no NUL character (then the audit need not be searched for one).
    clean: bool = False
    dialect: str = fit.OPENAI
    #: OpenAI's ``stream_options.include_usage``: a stream ends with a usage chunk.
    include_usage: bool = False
    #: Anthropic's top-level ``system`` (a string or text blocks).
    system: Any = None


@dataclass(slots=True)
class Prepared:
    """A fitted call with its audit on its way: ready to send."""

    audit_id: str
    call: ProxyCall
    model: ModelRow
    provider: ProviderRow
    shape: fit.Shape
    fitted: fit.Fitted
    request: ChatRequest
    excluded: int
    #: T5: the model's counting; ``estimated`` is its uncalibrated count of the request (what usage calibrates).
    counting: Counting
    #: What the fit was made from: the caller's dicts (lean path) or core messages (the pipeline).
    source: list[dict[str, Any]] | list[Message]
    #: The lean path: the caller's dicts as core messages when they were at hand (``ProxyService.messages``).
    built: list[Message] | None = None
    estimated: int = 0
    #: The context-length retry and its numbers, when there was one (the audit's ``attempts``).
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: Writing the audit (started by ``prepare``, awaited before the audit is changed again).
    recording: asyncio.Task[None] | None = None
    #: Set once the request is on its way to the provider: the audit is written from then on.
    sent: asyncio.Event = field(default_factory=asyncio.Event)


def request_overhead(call: ProxyCall, profile: TokenizerProfile) -> int:
    """Tokens the request spends outside its messages: tool definitions, tool choice, response format."""
    parts = [
        json.dumps(value, ensure_ascii=False, sort_keys=True)
        for value in (call.tools, call.options.get("tool_choice"), call.options.get("response_format"))
        if value
    ]
    return profile.count("\n".join(parts)) if parts else 0


def reply_reserve(call: ProxyCall, model: ModelRow, window: int) -> int:
    """The request's ``max_tokens``, else the default every layer uses (``core.limits.reply_reserve``)."""
    return limits.reply_reserve(window, call.max_tokens, model.max_output_tokens)


def anthropic_options(call: ProxyCall) -> tuple[dict[str, Any], list[str]]:
    """The request's options in Anthropic's spelling, and the names of those Anthropic has no field for."""
    options = dict(call.options)
    if call.dialect == fit.ANTHROPIC:  # already Anthropic's
        return {k: v for k, v in options.items() if v is not None}, []
    out: dict[str, Any] = {k: options.pop(k) for k in _ANTHROPIC_SAME if options.get(k) is not None}
    stop = options.pop("stop", None)
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    user = options.pop("user", None)
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    choice = options.pop("tool_choice", None)
    parallel = options.pop("parallel_tool_calls", None)
    translated: dict[str, Any] | None = None
    if choice == "auto":
        translated = {"type": "auto"}
    elif choice == "required":
        translated = {"type": "any"}
    elif choice == "none":
        translated = {"type": "none"}
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        translated = {"type": "tool", "name": str(choice["function"].get("name", ""))}
    if parallel is False and call.tools:
        translated = translated or {"type": "auto"}
        if translated["type"] != "none":
            translated["disable_parallel_tool_use"] = True
    if translated is not None and call.tools:
        out["tool_choice"] = translated
    dropped = sorted(k for k, v in options.items() if v is not None)
    return out, dropped


def openai_options(call: ProxyCall) -> tuple[dict[str, Any], list[str]]:
    """The request's options for an OpenAI-compatible provider, and the names of those it has no field for."""
    options = {k: v for k, v in call.options.items() if v is not None}
    if call.dialect != fit.ANTHROPIC:
        options.pop("stream", None)
        options.pop("stream_options", None)
        return options, []
    out: dict[str, Any] = {k: options.pop(k) for k in _OPENAI_SAME if k in options}
    stop = options.pop("stop_sequences", None)
    if isinstance(stop, list) and stop:
        out["stop"] = list(stop)
    metadata = options.pop("metadata", None)
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    choice = options.pop("tool_choice", None)
    if isinstance(choice, Mapping) and call.tools:
        kind = choice.get("type")
        if kind in ("auto", "any", "none"):
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[str(kind)]
        elif kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": str(choice.get("name", ""))}}
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    return out, sorted(options)


def chat_request(
    call: ProxyCall, model: ModelRow, provider: ProviderRow, fitted: fit.Fitted
) -> tuple[ChatRequest, list[str]]:
    if provider.kind == "anthropic":
        extra, dropped = anthropic_options(call)
        request = ChatRequest(
            model=model.name,
            messages=fitted.messages,
            system=fitted.system,
            max_tokens=call.max_tokens if call.max_tokens is not None else fitted.reserve,
            stream=call.stream,
            tools=call.tools,
            extra=extra,
        )
        return request, dropped
    extra, dropped = openai_options(call)
    if call.max_tokens is not None:
        extra[call.max_tokens_field] = call.max_tokens
    request = ChatRequest(
        model=model.name,
        messages=fitted.messages,
        system=fitted.system,
        stream=call.stream,
        tools=call.tools,
        extra=extra,
    )
    return request, dropped


__all__ = [
    "Prepared",
    "ProxyCall",
    "anthropic_options",
    "chat_request",
    "openai_options",
    "reply_reserve",
    "request_overhead",
]
