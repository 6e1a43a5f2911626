"""Conversion between message rows and core ``Message`` objects, with validation of what is stored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...core.messages import Message, MessageLike, as_message
from ..errors import InvalidValue
from ..tables import MessageRow
from ._common import json_object, optional_text


def row_to_message(row: MessageRow) -> Message:
    """The core ``Message`` of a stored row (id = row id, source ``history``)."""
    return Message.from_dict(
        {
            "id": row.id,
            "role": row.role,
            "content": row.content,
            "name": row.name,
            "tool_calls": row.tool_calls or [],
            "tool_call_id": row.tool_call_id,
            "pinned": row.pinned,
            "meta": {**(row.meta or {}), "standing": True} if row.standing else row.meta or {},
            "workspace": row.workspace,
            "source": "history",
        }
    )


def message_values(item: MessageLike) -> dict[str, Any]:
    """Validated column values of a message (a ``Message`` or its dict). Its id, source, relevance and
    unknown keys are not stored: the row gets a new id."""
    try:
        message = as_message(item)
    except (TypeError, ValueError) as exc:
        raise InvalidValue("message", str(exc)) from exc
    content = [dict(p) for p in message.content] if isinstance(message.content, tuple) else message.content
    values: dict[str, Any] = {
        "role": message.role,
        "content": content,
        "name": optional_text("name", message.name, max_length=200),
        "tool_calls": [c.to_dict() for c in message.tool_calls] or None,
        "tool_call_id": optional_text("tool_call_id", message.tool_call_id, max_length=200),
        "pinned": message.pinned,
        "meta": json_object("meta", message.meta),
        "workspace": optional_text("workspace", message.workspace, max_length=500),
    }
    check_json("message", {k: values[k] for k in ("content", "tool_calls", "meta")})
    return values


def check_json(field: str, value: Any) -> None:
    """Reject values that are not JSON or hold NUL characters (PostgreSQL refuses them)."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidValue(field, f"must be JSON: {exc}") from exc
    if "\\u0000" in encoded or "\x00" in encoded:
        raise InvalidValue(field, "must not contain NUL characters")


def merge_meta(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level merge: keys of ``patch`` replace those of ``current``; a ``None`` value removes the key."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
