"""OpenAI Agents SDK: a session whose history is fitted into a token budget, while storage keeps everything.

``FittedSession(session, max_tokens=...)`` wraps any ``Session`` (``SQLiteSession``, a Redis or SQLAlchemy
session, one of your own): ``get_items()`` returns the stored items fitted to the budget, and ``add_items``,
``pop_item`` and ``clear_session`` go straight to the wrapped session. :func:`fit_model_input` makes the same
fit a ``RunConfig(call_model_input_filter=...)``, which runs before every model call of a run (the session is
read once, when a run starts). (The ``openai-agents`` extra: ``pip install 'contextshift[openai-agents]'``.)

Items are the Responses API input items the SDK stores. Every item with a ``call_id`` (``function_call`` and
its ``function_call_output``, and the same for computer, shell, custom and other tool calls) is linked to the
others with that id, an MCP approval request to its response, and a ``reasoning`` item to the item after it
(the Responses API rejects a reasoning item without the item it preceded), so they are kept or dropped
together. The newest user message (the current input) always stays, and so do system and developer messages.

A summary (``strategy="summarize"``) comes back as ``{"role": "system", "content": ...}`` right after the
leading system and developer messages, where the history it stands for began; it is never stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.messages import Message
from ..core.shifting import ShiftResult
from ..core.tokens import TokenizerProfile
from . import IntegrationUnavailable
from ._bridge import Bridge, Entry, FitOptions, call, fit, protect

try:
    from agents.memory.session import Session
    from agents.run_config import CallModelData, ModelInputData
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise IntegrationUnavailable("the OpenAI Agents SDK (openai-agents)", "openai-agents") from error

#: An Agents SDK token counter: tokens of a list of input items.
ItemsCounter = Callable[[list[Any]], int]

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_TEXT_KEYS = ("text", "output", "arguments", "input", "code", "result", "summary", "encrypted_content")


def _field(item: Any, key: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


def _text_of(value: Any) -> str:
    """The readable text of an item's content or output (strings, lists of parts, anything JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for part in value:
            text = _field(part, "text") if not isinstance(part, str) else part
            pieces.append(text if isinstance(text, str) else _text_of_json(part))
        return "\n".join(p for p in pieces if p)
    return _text_of_json(value)


def _text_of_json(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _content(value: Any) -> str | list[dict[str, Any]]:
    if isinstance(value, list):
        parts: list[dict[str, Any]] = []
        for part in value:
            kind = _field(part, "type")
            if kind in ("input_image", "input_file"):
                parts.append({"type": kind})
            else:
                parts.append({"type": "text", "text": _text_of([part])})
        return parts
    return _text_of(value)


def _link_of(item: Any) -> tuple[str | None, bool]:
    """The item's link id and whether it is the answering side (an output, an approval response)."""
    kind = _field(item, "type")
    call_id = _field(item, "call_id")
    if isinstance(call_id, str) and call_id:
        return call_id, isinstance(kind, str) and kind.endswith("_output")
    request_id = _field(item, "approval_request_id")
    if isinstance(request_id, str) and request_id:
        return f"approval:{request_id}", True
    if kind == "mcp_approval_request":
        ident = _field(item, "id")
        return (f"approval:{ident}", False) if isinstance(ident, str) and ident else (None, False)
    return None, False


def to_dict(item: Any, message_id: str, chained: str | None = None) -> dict[str, Any]:
    """The contextshift message dict (M2) of one input item: what is counted and linked, never sent.

    Args:
        item: the input item (a dict, as sessions store them, or an SDK model).
        message_id: the id it gets in the fit.
        chained: a link id shared with a reasoning item just before it.

    Returns:
        The dict: a message item's role and content; a call as an assistant message with one tool call; an
        output as a tool message answering it; anything else as an assistant message with its JSON text.
    """
    out: dict[str, Any] = {"id": message_id}
    if chained:
        out["meta"] = {"tool_call_id": chained}
    role = _field(item, "role")
    kind = _field(item, "type")
    if isinstance(role, str) and kind in (None, "message"):
        out["role"] = _ROLES.get(role, "user")
        out["content"] = _content(_field(item, "content"))
        return out
    link, answers = _link_of(item)
    if link is not None and answers:
        text = _text_of(_field(item, "output")) or _text_of(_field(item, "approve"))
        return {"id": message_id, "role": "tool", "content": text, "tool_call_id": link}
    if isinstance(item, Mapping):
        body = {k: v for k, v in item.items() if k not in ("id", "type", "call_id", "status")}
    else:
        body = {"item": item}
    text = "\n".join(_text_of(body[k]) for k in _TEXT_KEYS if k in body) or _text_of_json(body)
    out["role"] = "assistant"
    if link is not None:
        name = _field(item, "name")
        out["content"] = ""
        out["tool_calls"] = [call(link, name if isinstance(name, str) else str(kind or ""), text)]
    else:
        out["content"] = text
    return out


def to_message(item: Any, message_id: str) -> Message:
    """The contextshift :class:`~contextshift.Message` of one input item (see :func:`to_dict`).

    Args:
        item: the input item.
        message_id: the id it gets.

    Returns:
        The message.
    """
    return Message.from_dict(to_dict(item, message_id))


def entries_of(items: Sequence[Any], options: FitOptions) -> list[Entry]:
    """One entry per item, ids from the items' own ``id`` where unique (``item-<index>`` otherwise); a
    reasoning item shares a link with the item after it; the newest user message is the current input."""
    own = [_field(item, "id") for item in items]
    own = [i if isinstance(i, str) and i else None for i in own]
    counts: dict[str, int] = {}
    for ident in own:
        if ident is not None:
            counts[ident] = counts.get(ident, 0) + 1
    taken = set(counts)
    current = max(
        (
            i
            for i, item in enumerate(items)
            if _field(item, "role") == "user" and _field(item, "type") in (None, "message")
        ),
        default=-1,
    )
    entries: list[Entry] = []
    chain: str | None = None
    for index, item in enumerate(items):
        ident = own[index]
        if ident is None or counts[ident] > 1:
            ident = f"item-{index}"
            while ident in taken:
                ident += "_"
            taken.add(ident)
        reasoning = _field(item, "type") == "reasoning"
        link = f"reasoning:{index}" if reasoning else None
        message = to_dict(item, ident, chained=link or chain)
        chain = link
        protect(message, options, native_id=own[index], is_input=index == current)
        entries.append(Entry(message, index))
    return entries


def _replacement(message: Message) -> Any:
    return {"role": "system" if message.role == "system" else "user", "content": message.text}


def _leading(item: Any) -> bool:
    return _field(item, "role") in ("system", "developer") and _field(item, "type") in (None, "message")


def _rebuild(item: Any, parts: tuple[int, ...]) -> Any:
    return item  # an item is one entry: never split


BRIDGE: Bridge[Any] = Bridge(rebuild=_rebuild, replacement=_replacement, leading=_leading)


class ItemFitter:
    """Fits a list of input items into a budget; :attr:`last_result` is the last call's contextshift result.

    Args:
        max_tokens: the budget of the fitted items, by ``token_counter`` (or ``model``'s profile).
        token_counter: a callable on a list of input items; None: ``model``'s profile.
        model: a contextshift tokenizer profile or a model name for :func:`contextshift.get_tokenizer`
            (``"gpt-4o"``...); None with no ``token_counter``: contextshift's ``approximate`` estimate.
        strategy: ``truncate`` (default), ``summarize``, ``recall``, ``vector-recall``, ``manual`` or a plugin's.
        **options: ``pinned_ids`` (item ids that always stay), ``protected_roles`` (default ``("system",)``:
            system and developer messages), ``protect_input`` (default True), ``embedder``, and anything
            :func:`contextshift.shift_with_strategy` takes.

    Raises:
        ValueError: both ``token_counter`` and ``model``, a bad budget or an unknown protected role.
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        token_counter: ItemsCounter | None = None,
        model: str | TokenizerProfile | None = None,
        strategy: str = "truncate",
        **options: Any,
    ) -> None:
        if token_counter is not None and model is not None:
            raise ValueError("give token_counter or model, not both")
        self.options = FitOptions.make(max_tokens, strategy=strategy, **options)
        self.token_counter = token_counter
        self.model = model
        self.last_result: ShiftResult | None = None

    def fit(self, items: Sequence[Any], *, budget: int | None = None) -> list[Any]:
        """Fit ``items``.

        Args:
            items: the input items, oldest first.
            budget: a budget for this call instead of ``max_tokens`` (the model-input filter's, less the
                instructions).

        Returns:
            The kept items, in order: the same objects (plus a summary item where the strategy made one).

        Raises:
            TokenBudgetExceeded: the system messages and the current input alone do not fit.
        """
        options = self.options if budget is None else replace(self.options, max_tokens=budget)
        entries = entries_of(items, options)
        out, result = fit(items, entries, options, BRIDGE, counter=self.token_counter, model=self.model)
        self.last_result = result
        return out


class FittedSession:
    """A ``Session`` whose ``get_items()`` is the wrapped session's history fitted into ``max_tokens``.

    Storage keeps everything: ``add_items``, ``pop_item`` and ``clear_session`` go to the wrapped session
    unchanged. ``get_items(limit=n)`` is a plain read of the newest ``n`` stored items, unfitted: the SDK
    reads a tail that way to check what it wrote. :attr:`last_result` is the last fit's contextshift result.

    Args:
        session: any object with the ``Session`` protocol's methods.
        max_tokens: the budget of the history a run starts from (see :class:`ItemFitter`).
        token_counter: see :class:`ItemFitter`.
        model: see :class:`ItemFitter`.
        strategy: see :class:`ItemFitter`.
        **options: see :class:`ItemFitter`.
    """

    def __init__(
        self,
        session: Session,
        *,
        max_tokens: int,
        token_counter: ItemsCounter | None = None,
        model: str | TokenizerProfile | None = None,
        strategy: str = "truncate",
        **options: Any,
    ) -> None:
        self.session = session
        self.fitter = ItemFitter(
            max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options
        )

    @property
    def session_id(self) -> str:
        """The wrapped session's id."""
        return str(self.session.session_id)

    @property
    def session_settings(self) -> Any:
        """The wrapped session's settings."""
        return getattr(self.session, "session_settings", None)

    @property
    def last_result(self) -> ShiftResult | None:
        """The contextshift result of the last fit (None before the first)."""
        return self.fitter.last_result

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The stored history fitted to the budget (with ``limit``: the newest stored items, unfitted).

        Args:
            limit: None for the fitted history; a number for a plain read of the newest items.

        Returns:
            The items, oldest first.
        """
        if limit is not None:
            return list(await self.session.get_items(limit))
        return self.fitter.fit(list(await self.session.get_items()))

    async def add_items(self, items: list[Any]) -> None:
        """Store ``items`` in the wrapped session.

        Args:
            items: the items to add.
        """
        await self.session.add_items(items)

    async def pop_item(self) -> Any:
        """Remove and return the newest stored item.

        Returns:
            The item, or None when the session is empty.
        """
        return await self.session.pop_item()

    async def clear_session(self) -> None:
        """Clear the wrapped session."""
        await self.session.clear_session()


class ModelInputFitter(ItemFitter):
    """A ``RunConfig(call_model_input_filter=...)`` fitting every model call's input; the agent's
    instructions count against the budget and are never dropped. Made by :func:`fit_model_input`."""

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Fit one model call's input.

        Args:
            data: what the SDK is about to send.

        Returns:
            The same instructions and the fitted input items.

        Raises:
            TokenBudgetExceeded: the instructions, system messages and current input alone do not fit.
        """
        instructions = data.model_data.instructions
        items = list(data.model_data.input)
        if instructions:
            marker = {"role": "system", "content": instructions}
            fitted = self.fit([marker, *items])
            fitted = [item for item in fitted if item is not marker]
        else:
            fitted = self.fit(items)
        return ModelInputData(input=fitted, instructions=instructions)


def fit_model_input(
    *,
    max_tokens: int,
    token_counter: ItemsCounter | None = None,
    model: str | TokenizerProfile | None = None,
    strategy: str = "truncate",
    **options: Any,
) -> ModelInputFitter:
    """A model-input filter for ``RunConfig(call_model_input_filter=...)``: the fit before every model call.

    Args:
        max_tokens: the budget of the instructions and the input items, by the counter.
        token_counter: see :class:`ItemFitter`.
        model: see :class:`ItemFitter`.
        strategy: see :class:`ItemFitter`.
        **options: see :class:`ItemFitter`.

    Returns:
        The filter (with ``last_result``).
    """
    return ModelInputFitter(
        max_tokens=max_tokens, token_counter=token_counter, model=model, strategy=strategy, **options
    )


__all__ = ["FittedSession", "ItemFitter", "ModelInputFitter", "fit_model_input"]
