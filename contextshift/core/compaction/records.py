"""Typed records for the summarizer (C7), built from core messages.

A record is one unit the summarizer reads: a user/assistant/system text, a whole tool exchange (every call
of one tool group with all its results, as one unit), or an earlier summary being rolled up. Images and
files become ``[image]`` / ``[file]`` labels; raw media never reaches a record. Each record keeps the
workspace it happened in and the ids of the messages it stands for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..groups import build_groups
from ..messages import LINK_KEYS, Message, media_kind
from ..vocabulary import SUMMARY_HEADER
from .layout import is_summary, is_tool_result

IMAGE_LABEL = "[image]"
FILE_LABEL = "[file]"


@dataclass(frozen=True, slots=True)
class TextItem:
    """Free text of one message (labels for media inline)."""

    role: str
    text: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallItem:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolResultItem:
    call_id: str | None
    name: str | None  # the called tool's name, when the call is in the same exchange
    text: str


ExchangeItem: TypeAlias = TextItem | ToolCallItem | ToolResultItem


@dataclass(frozen=True, slots=True)
class TextRecord:
    """One plain message."""

    role: str
    text: str
    message_id: str
    workspace: str | None = None
    name: str | None = None

    @property
    def message_ids(self) -> tuple[str, ...]:
        return (self.message_id,)


@dataclass(frozen=True, slots=True)
class ToolExchange:
    """C7: one tool group (calls, parallel calls, results, any prose around them), never split."""

    items: tuple[ExchangeItem, ...]
    message_ids: tuple[str, ...]
    workspace: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """An earlier summary folded into the new one (summaries roll up instead of stacking)."""

    text: str
    message_id: str
    covers: tuple[str, ...]
    workspaces: tuple[str, ...] = ()

    @property
    def message_ids(self) -> tuple[str, ...]:
        return (self.message_id,)

    @property
    def workspace(self) -> str | None:
        return self.workspaces[0] if len(self.workspaces) == 1 else None


Record: TypeAlias = TextRecord | ToolExchange | SummaryRecord


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value in (None, {}, []):
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _join(pieces: Sequence[str]) -> str:
    """Text pieces on their own lines; a media label stays on the line of what precedes it."""
    out = ""
    for piece in pieces:
        if not out:
            out = piece
        elif piece in (IMAGE_LABEL, FILE_LABEL):
            out += " " + piece
        else:
            out += "\n" + piece
    return out


def _part_pieces(parts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Text and media labels of content parts, tool blocks left out (they become their own items)."""
    pieces: list[str] = []
    for part in parts:
        kind = part.get("type")
        media = media_kind(part)
        if media == "image":
            pieces.append(IMAGE_LABEL)
        elif media == "file":
            pieces.append(FILE_LABEL)
        elif kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if isinstance(text, str) and text:
                pieces.append(text)
        elif kind in ("tool_use", "tool_result"):
            continue
        elif kind in ("thinking", "redacted_thinking", "reasoning"):
            continue  # reasoning is not part of the conversation a summary keeps
        else:
            text = part.get("text")
            if isinstance(text, str) and text:
                pieces.append(text)
    return pieces


def content_text(content: str | Sequence[Mapping[str, Any]] | None) -> str:
    """The readable text of a content value: text parts, ``[image]`` / ``[file]`` labels, never raw data."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return _join(_part_pieces(content))


def _result_text(content: Any) -> str:
    """The outcome of a tool result: clean text if there is some, else compact JSON; media as labels."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts = [p if isinstance(p, Mapping) else {"type": "text", "text": str(p)} for p in content]
        text = content_text(parts)
        return text if text else _json([dict(p) for p in parts if media_kind(p) is None])
    if isinstance(content, Mapping):
        for key in ("text", "value", "content"):
            inner = content.get(key)
            if isinstance(inner, str) and inner:
                return inner
        return _json(dict(content))
    return str(content)


def _link(message: Message) -> str | None:
    if message.tool_call_id:
        return message.tool_call_id
    for key in LINK_KEYS:
        value = message.meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _exchange_items(messages: Sequence[Message]) -> list[ExchangeItem]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            names[call.id] = call.name
        if isinstance(message.content, tuple):
            for part in message.content:
                if part.get("type") == "tool_use" and isinstance(part.get("id"), str):
                    names[part["id"]] = str(part.get("name", ""))
    items: list[ExchangeItem] = []
    for message in messages:
        parts = message.content if isinstance(message.content, tuple) else ()
        if message.role == "tool":
            call_id = _link(message)
            name = names.get(call_id) if call_id else None
            items.append(ToolResultItem(call_id, name or message.name, _result_text(message.content)))
            continue
        text = content_text(message.content)
        if text:
            items.append(TextItem(message.role, text, message.name))
        for call in message.tool_calls:
            items.append(ToolCallItem(call.id, call.name, call.arguments))
        for part in parts:
            kind = part.get("type")
            if kind == "tool_use":
                ident = str(part.get("id", ""))
                items.append(ToolCallItem(ident, str(part.get("name", "")), _json(part.get("input"))))
            elif kind == "tool_result":
                link = part.get("tool_use_id")
                call_id = link if isinstance(link, str) else None
                name = names.get(call_id) if call_id else None
                items.append(ToolResultItem(call_id, name, _result_text(part.get("content"))))
    return items


def summary_body(message: Message) -> str:
    """The text of a stored summary without its header line."""
    text = content_text(message.content).strip()
    if text.startswith(SUMMARY_HEADER):
        text = text[len(SUMMARY_HEADER) :].lstrip("\n ")
    return text


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


def summary_covers(message: Message) -> tuple[str, ...]:
    """The raw message ids a summary stands for (``meta["covers"]``); the summary's own id if it has none."""
    covers = _strings(message.meta.get("covers"))
    return covers or (message.id,)


def summary_workspaces(message: Message) -> tuple[str, ...]:
    spaces = _strings(message.meta.get("workspaces"))
    if spaces:
        return spaces
    return (message.workspace,) if message.workspace else ()


def record_of(group: Sequence[Message]) -> Record:
    """The record for the messages of one tool group (M3), in chronological order."""
    if not group:
        raise ValueError("a record needs at least one message")
    first = group[0]
    if len(group) == 1 and is_summary(first):
        return SummaryRecord(summary_body(first), first.id, summary_covers(first), summary_workspaces(first))
    if len(group) == 1 and not first.tool_calls and not is_tool_result(first) and not _has_tool_use(first):
        return TextRecord(first.role, content_text(first.content), first.id, first.workspace, first.name)
    workspace = next((m.workspace for m in group if m.workspace), None)
    return ToolExchange(tuple(_exchange_items(group)), tuple(m.id for m in group), workspace)


def _has_tool_use(message: Message) -> bool:
    return isinstance(message.content, tuple) and any(p.get("type") == "tool_use" for p in message.content)


def build_records(messages: Sequence[Message]) -> list[Record]:
    """The records of ``messages`` (chronological; whole tool groups), ordered by each group's first message."""
    return [record_of([messages[p] for p in group.members]) for group in build_groups(messages)]


def record_is_empty(record: Record) -> bool:
    """A record with nothing for the summarizer to read (e.g. an empty or reasoning-only message)."""
    if isinstance(record, ToolExchange):
        return not record.items
    return not record.text.strip()
