"""Pydantic AI: a history processor that fits the message history into a token budget, tool pairs kept.

``history_processor(max_tokens=...)`` returns a processor, a callable on a list of ``ModelMessage``s, for
``Agent(capabilities=[ProcessHistory(processor)])`` in Pydantic AI 2.x (:func:`process_history` makes that
capability) and ``Agent(history_processors=[processor])`` in 1.x. (The ``pydantic-ai`` extra:
``pip install 'contextshift[pydantic-ai]'``.)

A ``ToolCallPart`` lives in a ``ModelResponse`` and its ``ToolReturnPart`` (or ``RetryPromptPart``) in a
later ``ModelRequest``: every part that carries a ``tool_call_id`` links its message to the others with
that id, so contextshift keeps or drops them together, however many parallel calls a response made and
whatever stands between. A message is kept whole (the same object) or dropped whole, with one exception: a
request that carries system prompt parts beside others (the first request of a ``system_prompt=`` agent) is
two units, its system prompt (always kept) and the rest; when only the system prompt stays, the request
comes back rebuilt with those parts alone. The last message (the request being answered) and the newest
request with a user prompt (the current input) always stay.

A summary (``strategy="summarize"``) comes back as a ``ModelRequest`` holding one ``SystemPromptPart``,
right after the leading system-prompt requests, where the history it stands for began.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..core.messages import Message
from ..core.shifting import ShiftResult
from ..core.tokens import TokenizerProfile
from . import IntegrationUnavailable
from ._bridge import Bridge, Entry, FitOptions, call, fit, protect

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        UserPromptPart,
    )
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise IntegrationUnavailable("Pydantic AI (pydantic-ai-slim)", "pydantic-ai") from error

#: A Pydantic AI token counter: tokens of a list of model messages.
MessagesCounter = Callable[[list[ModelMessage]], int]


def _media(item: object) -> dict[str, Any] | str:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    is_image = getattr(item, "is_image", None)
    kind = getattr(item, "kind", "")
    return {"type": "image" if is_image is True or kind == "image-url" else "file"}


def _text(part: object) -> str:
    """The text of one part, as a model would read it (tool calls: the tool's name and its JSON arguments)."""
    args = getattr(part, "args_as_json_str", None)
    if callable(args) and hasattr(part, "tool_name"):
        return f"{part.tool_name}\n{args()}"
    for method in ("model_response_str", "model_response"):
        render = getattr(part, method, None)
        if callable(render):
            try:
                rendered = render()
            except Exception:  # a part whose rendering needs more than the part (rare): its content below
                break
            if isinstance(rendered, str):
                return rendered
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    return ""


def _call_id(part: object) -> str | None:
    value = getattr(part, "tool_call_id", None)
    return value if isinstance(value, str) and value else None


def _response_message(message: ModelResponse, message_id: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for part in message.parts:
        call_id = _call_id(part)
        if call_id is not None and hasattr(part, "args_as_json_str"):
            if call_id not in seen:
                seen.add(call_id)
                calls.append(call(call_id, str(getattr(part, "tool_name", "")), _args(part)))
            continue
        text = _text(part)
        if call_id is not None and call_id not in seen:  # a return in the response itself (a native tool)
            calls.append(call(call_id, "", text))
            seen.add(call_id)
        elif text:
            texts.append(text)
    out: dict[str, Any] = {"id": message_id, "role": "assistant", "content": "\n".join(texts)}
    if calls:
        out["tool_calls"] = calls
    return out


def _args(part: object) -> str:
    render = getattr(part, "args_as_json_str", None)
    return str(render()) if callable(render) else ""


def _request_message(parts: Sequence[Any], message_id: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    system = returns = others = 0
    for part in parts:
        call_id = _call_id(part)
        if isinstance(part, SystemPromptPart):
            system += 1
            content.append({"type": "text", "text": part.content})
        elif call_id is not None:
            returns += 1
            content.append({"type": "tool_result", "tool_use_id": call_id, "content": _text(part)})
        elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            others += 1
            content.extend(_media(item) for item in part.content)  # type: ignore[misc]
        else:
            others += 1
            content.append({"type": "text", "text": _text(part)})
    role = "system" if system and not (returns or others) else "tool" if returns and not others else "user"
    return {"id": message_id, "role": role, "content": content}


def _has_user_prompt(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


def entries_of(messages: Sequence[ModelMessage], options: FitOptions) -> list[Entry]:
    """The entries of a history: one per message (``pai-<index>``), two for a request holding system prompt
    parts beside others (``pai-<index>-system`` and ``pai-<index>``). The last message is pinned; the newest
    request with a user prompt is the current input."""
    current = max((i for i, m in enumerate(messages) if _has_user_prompt(m)), default=-1)
    last = len(messages) - 1
    entries: list[Entry] = []
    for index, message in enumerate(messages):
        ident = f"pai-{index}"
        units: list[tuple[str, tuple[int, ...] | None, dict[str, Any]]] = []
        if isinstance(message, ModelResponse):
            units.append((ident, None, _response_message(message, ident)))
        else:
            parts = list(message.parts)
            system = tuple(i for i, p in enumerate(parts) if isinstance(p, SystemPromptPart))
            rest = tuple(i for i in range(len(parts)) if i not in system)
            if system and rest:
                sid = f"{ident}-system"
                units.append((sid, system, _request_message([parts[i] for i in system], sid)))
                units.append((ident, rest, _request_message([parts[i] for i in rest], ident)))
            else:
                units.append((ident, None, _request_message(parts, ident)))
        for _unit_id, unit_parts, converted in units:
            is_input = index == current and converted["role"] != "system"
            protect(converted, options, native_id=None, is_input=is_input)
            if index == last:
                converted["pinned"] = True
            native = message if unit_parts is None else _rebuild(message, unit_parts)
            entries.append(Entry(converted, index, unit_parts, native))
    return entries


def _rebuild(message: ModelMessage, parts: tuple[int, ...]) -> ModelMessage:
    kept: list[Any] = [message.parts[i] for i in parts]
    if isinstance(message, ModelRequest):
        return dataclasses.replace(message, parts=kept)
    return dataclasses.replace(message, parts=kept)


def _replacement(message: Message) -> ModelMessage:
    return ModelRequest(parts=[SystemPromptPart(content=message.text)])


def _leading(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and all(isinstance(p, SystemPromptPart) for p in message.parts)


BRIDGE: Bridge[ModelMessage] = Bridge(rebuild=_rebuild, replacement=_replacement, leading=_leading)


class HistoryProcessor:
    """A Pydantic AI history processor fitting the history into a budget; :attr:`last_result` is the
    contextshift result of its last call. Made by :func:`history_processor`."""

    def __init__(
        self,
        options: FitOptions,
        token_counter: MessagesCounter | None,
        model: str | TokenizerProfile | None,
    ) -> None:
        self.options = options
        self.token_counter = token_counter
        self.model = model
        self.last_result: ShiftResult | None = None

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Fit ``messages``.

        Args:
            messages: the history, oldest first (its last message is the request being answered).

        Returns:
            The kept messages in order: the same objects (a rebuilt first request when only its system prompt
            stays; a summary request where the strategy made one).

        Raises:
            TokenBudgetExceeded: the system prompt, the current input and the last request alone do not fit.
        """
        entries = entries_of(messages, self.options)
        out, result = fit(messages, entries, self.options, BRIDGE, counter=self.token_counter, model=self.model)
        self.last_result = result
        return out


def history_processor(
    *,
    max_tokens: int,
    token_counter: MessagesCounter | None = None,
    model: str | TokenizerProfile | None = None,
    strategy: str = "truncate",
    **options: Any,
) -> HistoryProcessor:
    """A history processor that fits the history into ``max_tokens`` before every model request.

    Args:
        max_tokens: the budget of the history sent, by ``token_counter`` (or ``model``'s profile).
        token_counter: a callable on a list of ``ModelMessage``s; None: ``model``'s profile.
        model: a contextshift tokenizer profile or a model name for :func:`contextshift.get_tokenizer`
            (``"gpt-4o"``...); None with no ``token_counter``: contextshift's ``approximate`` estimate.
        strategy: ``truncate`` (default), ``summarize``, ``recall``, ``vector-recall``, ``manual`` or a plugin's.
        **options: ``protected_roles`` (default ``("system",)``), ``protect_input`` (default True),
            ``embedder``, and anything :func:`contextshift.shift_with_strategy` takes.

    Returns:
        The processor: ``Agent(history_processors=[p])`` (1.x) or ``ProcessHistory(p)`` (2.x).

    Raises:
        ValueError: both ``token_counter`` and ``model``, ``pinned_ids`` (Pydantic AI messages have no ids), a
            bad budget or an unknown protected role.
    """
    if token_counter is not None and model is not None:
        raise ValueError("give token_counter or model, not both")
    if options.get("pinned_ids"):
        raise ValueError("Pydantic AI messages have no ids to pin: use protected_roles or protect_input")
    return HistoryProcessor(FitOptions.make(max_tokens, strategy=strategy, **options), token_counter, model)


def process_history(
    *,
    max_tokens: int,
    token_counter: MessagesCounter | None = None,
    model: str | TokenizerProfile | None = None,
    strategy: str = "truncate",
    **options: Any,
) -> Any:
    """Pydantic AI 2.x: the ``ProcessHistory`` capability of :func:`history_processor` (same arguments).

    Returns:
        ``ProcessHistory(history_processor(...))`` for ``Agent(capabilities=[...])``; its ``processor``
        has ``last_result``.

    Raises:
        IntegrationUnavailable: the installed Pydantic AI has no ``ProcessHistory`` (1.x: use
            ``history_processors=[history_processor(...)]``).
    """
    try:
        from pydantic_ai.capabilities import ProcessHistory
    except ImportError as error:
        raise IntegrationUnavailable("Pydantic AI 2.x (ProcessHistory)", "pydantic-ai") from error
    processor = history_processor(
        max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options
    )
    return ProcessHistory(processor)


__all__ = ["HistoryProcessor", "history_processor", "process_history"]
