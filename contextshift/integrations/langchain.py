"""LangChain and LangGraph: fit LangChain messages into a token budget, keeping every tool call with its results.

Three ways in, one fit (the ``langchain`` extra: ``pip install 'contextshift[langchain]'``):

- :func:`shift_messages` (and :class:`MessageShifter`, which keeps the last result): a ``trim_messages``
  that never orphans a ``ToolMessage``, protects the system prompt, pinned messages and the current input,
  and returns the very message objects it kept (ids, metadata and ``additional_kwargs`` intact).
- :class:`ContextShiftMiddleware`: an agent middleware for LangChain v1's ``create_agent`` that fits the
  model request before every model call; the agent's stored state keeps every message.
- :func:`pre_model_hook`: the same fit as a LangGraph ``pre_model_hook`` (it returns ``llm_input_messages``,
  so the graph's state keeps every message).

A summary (``strategy="summarize"``) comes back as a ``SystemMessage`` right after the leading system
messages, where the history it stands for began; its ``response_metadata["contextshift_summary_of"]`` lists
the ids of the messages it replaces.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from ..core.messages import Message
from ..core.shifting import ShiftResult
from ..core.tokens import TokenizerProfile
from . import IntegrationUnavailable
from ._bridge import Bridge, Entry, FitOptions, ListCounter, additive, call, fit

try:
    from langchain.agents.middleware.types import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
    )
    from langchain_core.messages.utils import count_tokens_approximately
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise IntegrationUnavailable("LangChain (langchain and langchain-core 1.x)", "langchain") from error

#: What ``token_counter`` accepts: what ``trim_messages`` accepts.
TokenCounterLike = Callable[[list[BaseMessage]], int] | Callable[[BaseMessage], int] | BaseLanguageModel[Any] | str

_ROLES = {"system": "system", "human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}
_MEDIA = frozenset({"image", "image_url", "input_image", "file", "input_file", "document", "audio", "input_audio"})


def list_counter(token_counter: TokenCounterLike) -> ListCounter:
    """A list counter from whatever ``trim_messages`` accepts as its ``token_counter``.

    Args:
        token_counter: a chat model (its ``get_num_tokens_from_messages``), ``"approximate"``
            (``count_tokens_approximately``), a callable on one message (its first parameter annotated
            ``BaseMessage``; summed over the list) or a callable on a list of messages.

    Returns:
        A callable on a list of messages.

    Raises:
        ValueError: an unknown string shortcut.
        TypeError: anything else that is not callable.
    """
    if isinstance(token_counter, str):
        if token_counter != "approximate":
            raise ValueError(f"unknown token_counter shortcut {token_counter!r}: the only one is 'approximate'")
        return count_tokens_approximately
    model_count = getattr(token_counter, "get_num_tokens_from_messages", None)
    if callable(model_count):
        return model_count  # type: ignore[no-any-return]
    if not callable(token_counter):
        raise TypeError("token_counter must be a chat model, 'approximate' or a callable")
    try:
        first = next(iter(inspect.signature(token_counter).parameters.values()), None)
    except (TypeError, ValueError):  # a builtin without a signature: a list counter, as trim_messages takes it
        first = None
    if first is not None and first.annotation in (BaseMessage, "BaseMessage"):
        per_message = token_counter

        def summed(messages: list[BaseMessage]) -> int:
            return sum(per_message(m) for m in messages)  # type: ignore[arg-type, misc]

        return additive(summed)
    return token_counter  # type: ignore[return-value]


def _part(block: object) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if isinstance(block, Mapping):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return {"type": "text", "text": block["text"]}
        if kind in _MEDIA:
            return dict(block)
    # Anything else (reasoning, a provider's tool_use block...) is counted as its JSON text: never as a link.
    return {"type": "text", "text": json.dumps(block, ensure_ascii=False, sort_keys=True, default=str)}


def _content(content: object) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part(block) for block in content]
    return "" if content is None else str(content)


def _calls(message: AIMessage) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tool_call in message.tool_calls:
        call_id = tool_call.get("id")
        if isinstance(call_id, str) and call_id and call_id not in seen:
            seen.add(call_id)
            args = json.dumps(tool_call.get("args", {}), ensure_ascii=False, sort_keys=True, default=str)
            calls.append(call(call_id, str(tool_call.get("name") or ""), args))
    for invalid in message.invalid_tool_calls:
        call_id = invalid.get("id")
        if isinstance(call_id, str) and call_id and call_id not in seen:
            seen.add(call_id)
            calls.append(call(call_id, str(invalid.get("name") or ""), str(invalid.get("args") or "")))
    return calls


def to_dict(message: BaseMessage, message_id: str) -> dict[str, Any]:
    """The contextshift message dict (M2) of one LangChain message: what is counted and linked, never sent.

    Args:
        message: the LangChain message.
        message_id: the id it gets in the fit.

    Returns:
        The dict: role from the message type, content text and parts, tool calls (``tool_calls`` and
        ``invalid_tool_calls`` with ids) or the answered ``tool_call_id``.
    """
    content = message.content
    # Dispatch on the type string: one look per message (this runs for every message of a long history).
    kind = message.type
    out: dict[str, Any] = {"id": message_id, "content": content if type(content) is str else _content(content)}
    if kind == "tool" and isinstance(message, ToolMessage):
        out["role"] = "tool"
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
        return out
    if kind == "ai" and isinstance(message, AIMessage):
        out["role"] = "assistant"
        if message.tool_calls or message.invalid_tool_calls:
            calls = _calls(message)
            if calls:
                out["tool_calls"] = calls
    elif kind in _ROLES:
        out["role"] = _ROLES[kind]
    else:
        role = message.role if isinstance(message, ChatMessage) else kind
        out["role"] = _ROLES.get(role, "tool" if role == "function" else "user")
    name = message.name
    if name and type(name) is str:
        out["name"] = name
    return out


def to_message(message: BaseMessage, message_id: str) -> Message:
    """The contextshift :class:`~contextshift.Message` of one LangChain message (see :func:`to_dict`).

    Args:
        message: the LangChain message.
        message_id: the id it gets.

    Returns:
        The message.
    """
    return Message.from_dict(to_dict(message, message_id))


def entries_of(messages: Sequence[BaseMessage], options: FitOptions) -> list[Entry]:
    """One entry per message, ids from the messages' own ids where they are unique (``lc-<index>`` otherwise)."""
    own = [m.id for m in messages]
    unique = {i for i in own if i} if len(set(own)) == len(own) else _unique_ids(own)
    taken = set(unique)
    current = -1
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            current = index
            break
    pinned_ids, roles = options.pinned_ids, options.protected_roles
    free_system = "system" not in roles
    entries: list[Entry] = []
    append = entries.append
    # The loop runs once per message of a long history: protect() inlined, one dict per message.
    for index, message in enumerate(messages):
        ident = own[index]
        if ident not in unique or type(ident) is not str:
            ident = f"lc-{index}"
            while ident in taken:
                ident += "_"
            taken.add(ident)
        converted = to_dict(message, ident)
        role = converted["role"]
        if role in roles or (pinned_ids and own[index] in pinned_ids):
            converted["pinned"] = True
        if free_system and role == "system":
            converted["source"] = "history"
        append(Entry(converted, index))
    if current >= 0 and options.protect_input:
        entries[current].message["source"] = "input"
    return entries


def _unique_ids(ids: Sequence[str | None]) -> set[str | None]:
    counts: dict[str | None, int] = {}
    for ident in ids:
        counts[ident] = counts.get(ident, 0) + 1
    return {ident for ident, n in counts.items() if ident and n == 1}


def _replacement(message: Message) -> BaseMessage:
    text = message.text
    meta = {"contextshift_summary_of": list(message.meta.get("summary_of", ()))}
    if message.role == "system":
        return SystemMessage(content=text, id=message.id, response_metadata=meta)
    if message.role == "assistant":
        return AIMessage(content=text, id=message.id, response_metadata=meta)
    return HumanMessage(content=text, id=message.id, response_metadata=meta)


def _rebuild(message: BaseMessage, parts: tuple[int, ...]) -> BaseMessage:
    return message  # a LangChain message is one entry: never split


BRIDGE: Bridge[BaseMessage] = Bridge(
    rebuild=_rebuild, replacement=_replacement, leading=lambda m: isinstance(m, SystemMessage)
)


class MessageShifter:
    """A reusable fit of LangChain messages; :attr:`last_result` is the contextshift result of the last call.

    Args:
        max_tokens: the budget of the fitted messages, by ``token_counter`` (or ``model``'s profile).
        token_counter: what ``trim_messages`` takes: a chat model, ``"approximate"``, a callable on a list of
            messages or on one message (first parameter annotated ``BaseMessage``). None: ``model``.
        model: a contextshift tokenizer profile or a model name for :func:`contextshift.get_tokenizer`
            (``"gpt-4o"``...); None with no ``token_counter``: contextshift's ``approximate`` estimate.
        strategy: ``truncate`` (default), ``summarize``, ``recall``, ``vector-recall``, ``manual`` or a plugin's.
        **options: ``pinned_ids`` (message ids that always stay), ``protected_roles`` (default
            ``("system",)``), ``protect_input`` (keep the newest ``HumanMessage``; default True), ``embedder``,
            and anything :func:`contextshift.shift_with_strategy` takes (``registry``, ``timeout``,
            ``manual_excluded_ids``...).

    Raises:
        ValueError: both ``token_counter`` and ``model`` given, a bad budget or an unknown protected role.
        TypeError: a counter that is not one.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        token_counter: TokenCounterLike | None = None,
        model: str | TokenizerProfile | None = None,
        strategy: str = "truncate",
        **options: Any,
    ) -> None:
        if token_counter is not None and model is not None:
            raise ValueError("give token_counter or model, not both")
        self.options = FitOptions.make(max_tokens, strategy=strategy, **options)
        self.counter = None if token_counter is None else list_counter(token_counter)
        self.model = model
        self.last_result: ShiftResult | None = None

    def __call__(self, messages: Iterable[Any]) -> list[BaseMessage]:
        """Fit ``messages``.

        Args:
            messages: LangChain messages, oldest first (anything ``convert_to_messages`` takes is converted).

        Returns:
            The kept messages, in order: the same objects (plus a summary message where a strategy made one).

        Raises:
            TokenBudgetExceeded: the system prompt, pinned messages and current input alone do not fit.
        """
        given = list(messages)
        if not all(isinstance(m, BaseMessage) for m in given):
            given = list(convert_to_messages(given))
        entries = entries_of(given, self.options)
        out, result = fit(given, entries, self.options, BRIDGE, counter=self.counter, model=self.model)
        self.last_result = result
        return out


def shift_messages(
    messages: Iterable[Any],
    *,
    max_tokens: int,
    token_counter: TokenCounterLike | None = None,
    model: str | TokenizerProfile | None = None,
    strategy: str = "truncate",
    **options: Any,
) -> list[BaseMessage]:
    """Fit LangChain messages into ``max_tokens``, oldest history first, tool calls kept with their results.

    Args:
        messages: LangChain messages, oldest first.
        max_tokens: the budget, by ``token_counter`` (or ``model``'s profile).
        token_counter: what ``trim_messages`` takes (see :class:`MessageShifter`).
        model: a contextshift tokenizer profile or model name, instead of ``token_counter``.
        strategy: a contextshift strategy name (``truncate``, ``summarize``, ``recall``...).
        **options: see :class:`MessageShifter` (``pinned_ids``, ``protected_roles``, ``embedder``...).

    Returns:
        The kept messages: the very objects given, in order (and a summary ``SystemMessage`` when the
        strategy made one). Use :class:`MessageShifter` to read the contextshift result too.

    Raises:
        TokenBudgetExceeded: the protected messages alone do not fit.
        ValueError: a bad budget, both ``token_counter`` and ``model``, or an unknown protected role.
    """
    shifter = MessageShifter(
        max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options
    )
    return shifter(messages)


class ContextShiftMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """An agent middleware for ``create_agent``: the model request is fitted before every model call.

    The system message (``system_prompt=``) takes part in the fit and always stays; the state keeps every
    message, only what the model is sent is fitted. :attr:`last_result` is the last call's contextshift result.

    Args:
        max_tokens: the budget of the system message and the messages sent, by the counter.
        token_counter: see :class:`MessageShifter`.
        model: see :class:`MessageShifter`.
        strategy: see :class:`MessageShifter`.
        **options: see :class:`MessageShifter`.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        token_counter: TokenCounterLike | None = None,
        model: str | TokenizerProfile | None = None,
        strategy: str = "truncate",
        **options: Any,
    ) -> None:
        super().__init__()
        self.shifter = MessageShifter(
            max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options
        )

    @property
    def last_result(self) -> ShiftResult | None:
        """The contextshift result of the last model call's fit (None before the first)."""
        return self.shifter.last_result

    def fitted(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with its messages (and system message) fitted.

        Args:
            request: the model request.

        Returns:
            A new request (``request.override``); the given one is unchanged.
        """
        system = request.system_message
        given: list[BaseMessage] = [system, *request.messages] if system is not None else list(request.messages)
        out = self.shifter(given)
        kept_system = system if out and out[0] is system else None
        rest: list[AnyMessage] = out[1:] if kept_system is not None else out  # type: ignore[assignment]
        return request.override(messages=rest, system_message=kept_system)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Fit the request, then call the model.

        Args:
            request: the model request.
            handler: calls the model.

        Returns:
            The model's response.
        """
        return handler(self.fitted(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Fit the request, then call the model (async).

        Args:
            request: the model request.
            handler: calls the model.

        Returns:
            The model's response.
        """
        return await handler(self.fitted(request))


class PreModelHook:
    """A LangGraph ``pre_model_hook``: returns ``{"llm_input_messages": fitted}``, so the state keeps every
    message. :attr:`last_result` is the last call's contextshift result. Made by :func:`pre_model_hook`."""

    def __init__(self, shifter: MessageShifter) -> None:
        self.shifter = shifter

    @property
    def last_result(self) -> ShiftResult | None:
        """The contextshift result of the last fit (None before the first)."""
        return self.shifter.last_result

    def __call__(self, state: Any) -> dict[str, Any]:
        """Fit the state's messages.

        Args:
            state: the graph state (a mapping or an object with ``messages``).

        Returns:
            ``{"llm_input_messages": [...]}``.
        """
        messages = state["messages"] if isinstance(state, Mapping) else state.messages
        return {"llm_input_messages": self.shifter(messages)}


def pre_model_hook(
    *,
    max_tokens: int,
    token_counter: TokenCounterLike | None = None,
    model: str | TokenizerProfile | None = None,
    strategy: str = "truncate",
    **options: Any,
) -> PreModelHook:
    """A LangGraph ``pre_model_hook`` (``create_react_agent(..., pre_model_hook=...)``) fitting each model input.

    Args:
        max_tokens: the budget, by the counter.
        token_counter: see :class:`MessageShifter`.
        model: see :class:`MessageShifter`.
        strategy: see :class:`MessageShifter`.
        **options: see :class:`MessageShifter`.

    Returns:
        The hook (a callable on the state, with ``last_result``).
    """
    return PreModelHook(
        MessageShifter(max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options)
    )


__all__ = [
    "ContextShiftMiddleware",
    "MessageShifter",
    "PreModelHook",
    "list_counter",
    "pre_model_hook",
    "shift_messages",
    "to_dict",
    "to_message",
]
