"""Core messages in provider wire format (pure, no I/O): exactly what a provider's API accepts.

* :func:`to_openai_messages` — OpenAI Chat Completions ``messages``.
* :func:`to_anthropic_messages` — Anthropic Messages ``(system, messages)``.

Only wire fields survive: ``id``, ``pinned``, ``source``, ``meta`` and other contextshift fields are dropped.
``ShiftResult.to_openai()`` and ``to_anthropic()`` use these; ``contextshift.providers`` builds whole request
bodies on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .messages import Message, MessageLike, ToolCall, as_message, link_ids, text_parts
from .parts import to_anthropic_blocks, to_openai_part, tool_result_text

#: The user turn inserted when an Anthropic conversation would not start with a user message.
CONTINUATION_TEXT = "(conversation continues)"
#: Key of the ``tool_use.input`` object that keeps call arguments which are not a JSON object.
RAW_ARGUMENTS_KEY = "_raw_arguments"


def _messages(items: Iterable[MessageLike]) -> list[Message]:
    return [as_message(m) for m in items]


def _resolve_tool_ids(messages: Sequence[Message]) -> list[str | None]:
    """The call id each tool message answers: its own link (M3), else the next unanswered call before it."""
    out: list[str | None] = []
    pending: list[str] = []
    for m in messages:
        if m.role == "assistant":
            pending = [c.id for c in m.tool_calls]
            pending += [p["id"] for p in _parts(m) if p.get("type") == "tool_use" and isinstance(p.get("id"), str)]
            out.append(None)
            continue
        if m.role != "tool":
            out.append(None)
            continue
        ids = link_ids(m)
        ident = ids[0] if ids else (pending[0] if pending else None)
        if ident in pending:
            pending.remove(ident)
        out.append(ident)
    return out


def _parts(m: Message) -> tuple[Mapping[str, Any], ...]:
    return m.content if isinstance(m.content, tuple) else ()


def _plain_text(content: str | Sequence[Mapping[str, Any]] | None) -> str:
    return "\n".join(text_parts(content))


def openai_tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _openai_content(content: str | tuple[Mapping[str, Any], ...] | None) -> str | list[dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [to_openai_part(p) for p in content]


def _openai_assistant(m: Message) -> dict[str, Any]:
    calls = [openai_tool_call(c) for c in m.tool_calls]
    content: str | list[dict[str, Any]] | None
    if isinstance(m.content, tuple):
        kept = [p for p in m.content if p.get("type") != "tool_use"]
        for p in m.content:
            if p.get("type") == "tool_use":
                payload = p.get("input", {})
                arguments = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
                calls.append(
                    {
                        "id": str(p.get("id", "")),
                        "type": "function",
                        "function": {"name": str(p.get("name", "")), "arguments": arguments},
                    }
                )
        content = [to_openai_part(p) for p in kept] if kept else None
    else:
        content = m.content
    if not content:
        # A tool-call-only message carries "" (not null): OpenAI accepts both, but local servers that
        # validate ``content`` as a string (llama-cpp-python) answer null with a 500.
        content = ""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if m.name is not None:
        out["name"] = m.name
    if calls:
        out["tool_calls"] = calls
    return out


def _openai_user_like(m: Message) -> list[dict[str, Any]]:
    """A system or user message; Anthropic ``tool_result`` blocks in it become tool messages first."""
    results = [p for p in _parts(m) if p.get("type") == "tool_result"]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": str(p.get("tool_use_id", "")), "content": tool_result_text(p.get("content"))}
        for p in results
    ]
    if results:
        rest = tuple(p for p in _parts(m) if p.get("type") != "tool_result")
        if not rest:
            return out
        content: str | list[dict[str, Any]] = _openai_content(rest)
    else:
        content = _openai_content(m.content)
    message: dict[str, Any] = {"role": m.role, "content": content}
    if m.name is not None:
        message["name"] = m.name
    out.append(message)
    return out


def to_openai_messages(messages: Iterable[MessageLike]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages: system stays system, tool results are role ``tool``.

    Args:
        messages: ``Message`` objects or their dicts.

    Returns:
        The ``messages`` list exactly as the API accepts it: ``role``, ``content``, ``name``,
        ``tool_calls`` and ``tool_call_id`` only (no ``id``, ``source``, ``pinned`` or ``meta``).

    Raises:
        TypeError, ValueError: an item is not a valid message (see ``Message.from_dict``).
    """
    items = _messages(messages)
    out: list[dict[str, Any]] = []
    for m, tool_id in zip(items, _resolve_tool_ids(items), strict=True):
        if m.role == "assistant":
            out.append(_openai_assistant(m))
        elif m.role == "tool":
            if tool_id is None:  # a result no call can claim: keep its text as a user turn
                out.append({"role": "user", "content": f"Tool result:\n{_plain_text(m.content)}"})
            else:
                out.append({"role": "tool", "tool_call_id": tool_id, "content": _openai_content(m.content)})
        else:
            out.extend(_openai_user_like(m))
    return out


def tool_use_input(arguments: str) -> dict[str, Any]:
    """``tool_use.input`` for OpenAI-style argument text: the parsed object, ``{}`` for nothing, or the raw
    text under :data:`RAW_ARGUMENTS_KEY` when it is not a JSON object."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}


def _anthropic_assistant(m: Message) -> str | list[dict[str, Any]]:
    if isinstance(m.content, str) and not m.tool_calls:
        return m.content
    blocks = to_anthropic_blocks(m.content)
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": tool_use_input(c.arguments)} for c in m.tool_calls
    ]
    return blocks


def _anthropic_tool_result(m: Message, tool_id: str | None) -> dict[str, Any]:
    if tool_id is None:
        return {"type": "text", "text": f"Tool result:\n{_plain_text(m.content)}"}
    content: str | list[dict[str, Any]] = (
        m.content if isinstance(m.content, str) else to_anthropic_blocks(m.content) if m.content else ""
    )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if m.meta.get("is_error") is True:
        block["is_error"] = True
    return block


def _merge(turns: list[tuple[str, str | list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Merge consecutive same-role turns so roles alternate; tool results lead their user message."""
    merged: list[dict[str, Any]] = []
    for role, content in turns:
        if merged and merged[-1]["role"] == role:
            previous = merged[-1]
            blocks = _as_blocks(previous["content"]) + _as_blocks(content)
            previous["content"] = blocks
        else:
            merged.append({"role": role, "content": content})
    for message in merged:
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            results = [b for b in content if b.get("type") == "tool_result"]
            if results:
                message["content"] = results + [b for b in content if b.get("type") != "tool_result"]
    return merged


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def to_anthropic_messages(messages: Iterable[MessageLike]) -> tuple[str | None, list[dict[str, Any]]]:
    """Anthropic Messages ``(system, messages)``.

    Every system message, mid-conversation ones (summaries) included, is folded in order into ``system``;
    tool calls become ``tool_use`` blocks and tool results ``tool_result`` blocks of a user turn;
    consecutive same-role turns are merged; the first turn is always a user turn.

    Args:
        messages: ``Message`` objects or their dicts (a ``ShiftResult``'s ``kept``, say).

    Returns:
        ``(system, messages)``: the system text (None when there is none) and the ``messages`` list, exactly
        what the Anthropic Messages API accepts.

    Raises:
        TypeError: an item is not a message (see :func:`contextshift.core.as_message`).
        ValueError: an item :meth:`Message.from_dict` rejects.
    """
    items = _messages(messages)
    system: list[str] = []
    turns: list[tuple[str, str | list[dict[str, Any]]]] = []
    for m, tool_id in zip(items, _resolve_tool_ids(items), strict=True):
        if m.role == "system":
            text = _plain_text(m.content)
            if text:
                system.append(text)
            continue
        content: str | list[dict[str, Any]]
        if m.role == "tool":
            role, content = "user", [_anthropic_tool_result(m, tool_id)]
        elif m.role == "assistant":
            role, content = "assistant", _anthropic_assistant(m)
        else:
            role = "user"
            content = m.content if isinstance(m.content, str) else to_anthropic_blocks(m.content)
        if content and (not isinstance(content, str) or content.strip()):
            turns.append((role, content))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", CONTINUATION_TEXT))
    merged = _merge(turns)
    _strip_final_assistant(merged)
    return ("\n\n".join(system) if system else None), merged


def _strip_final_assistant(merged: list[dict[str, Any]]) -> None:
    """Anthropic rejects a final assistant turn (a prefill) that ends in whitespace."""
    last = merged[-1]
    if last["role"] != "assistant":
        return
    if isinstance(last["content"], str):
        last["content"] = last["content"].rstrip()
    elif last["content"] and last["content"][-1].get("type") == "text":
        block = last["content"][-1]
        last["content"][-1] = {**block, "text": str(block.get("text", "")).rstrip()}
