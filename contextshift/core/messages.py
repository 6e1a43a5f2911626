"""Messages (M1, M2): one immutable ``Message`` type and lossless dict conversion.

A ``Message`` is what every part of contextshift works on. Plain dicts in OpenAI Chat Completions shape,
including Anthropic Messages content blocks (``tool_use`` / ``tool_result``), are accepted wherever a
message is, through :func:`as_message`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Literal, TypeAlias, TypeVar, cast

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

Source: TypeAlias = Literal[
    "system", "persona", "character", "lorebook", "memory", "template", "history", "summary", "input", "plugin"
]
SOURCES: frozenset[str] = frozenset(
    {"system", "persona", "character", "lorebook", "memory", "template", "history", "summary", "input", "plugin"}
)

#: The sources whose system-role messages are protected (M4).
PROTECTED_SYSTEM_SOURCES: frozenset[str | None] = frozenset({None, "system", "persona", "character"})

#: Keys that may carry a tool-result link, in order of precedence (M3).
LINK_KEYS: tuple[str, ...] = ("tool_call_id", "toolCallId", "callId")

_KNOWN_KEYS = frozenset(
    {"id", "role", "content", "name", "tool_calls", "pinned", "source", "relevance", "workspace", "meta", *LINK_KEYS}
)

MessageLike: TypeAlias = "Message | Mapping[str, Any]"

# Bits of ``Message._kind``, derived once when a message is made (messages are immutable).
#: M4: the message is protected.
KIND_PROTECTED = 1
#: The message carries at least one tool-link id (M3).
KIND_LINKED = 2
#: The message has the ``tool`` role (with ``KIND_LINKED`` unset: an id-less tool result).
KIND_TOOL = 4
#: A field has the wrong type, so the text or the link ids could not be derived: they are derived again (and
#: fail) where they are used.
KIND_MALFORMED = 8


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by an assistant message."""

    id: str
    name: str
    arguments: str = ""
    #: Anything else the call carried (``type`` and unknown keys), kept for a lossless round trip.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        if not isinstance(data, Mapping):
            raise TypeError(f"a tool call must be an object, got {type(data).__name__}")
        function = data.get("function")
        extra = {k: v for k, v in data.items() if k not in ("id", "function", "name", "arguments")}
        if isinstance(function, Mapping):
            name = function.get("name", "")
            arguments = function.get("arguments", "")
            extra_fn = {k: v for k, v in function.items() if k not in ("name", "arguments")}
            if extra_fn:
                extra["function_extra"] = extra_fn
        else:
            name = data.get("name", "")
            arguments = data.get("arguments", "")
            extra["flat"] = True
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        call_id = data.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("a tool call needs a non-empty string id")
        if not isinstance(name, str):
            raise TypeError(f"tool call {call_id!r}: name must be a string")
        return cls(id=call_id, name=name, arguments=arguments, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        extra = dict(self.extra)
        if extra.pop("flat", False):
            return {"id": self.id, "name": self.name, "arguments": self.arguments, **extra}
        function: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        function.update(extra.pop("function_extra", {}))
        out: dict[str, Any] = {"id": self.id, "type": extra.pop("type", "function"), "function": function}
        out.update(extra)
        return out


@dataclass(frozen=True, slots=True)
class Message:
    """One prompt message (M1). Immutable: the library never changes a message it was given."""

    role: Role
    content: str | tuple[Mapping[str, Any], ...] | None = ""
    id: str = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    pinned: bool = False
    source: Source | None = None
    relevance: float | None = None
    workspace: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Unknown top-level keys of the dict this message came from, returned unchanged by ``to_dict``.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Derived once from the fields above (never compared, shown or passed in): see ``__post_init__``.
    _text: str | None = field(init=False, repr=False, compare=False)
    _links: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    _kind: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        role, source = self.role, self.source
        if role not in ROLES:
            raise ValueError(f"message {self.id or '(no id)'}: unknown role {role!r}")
        if source is not None and source not in SOURCES:
            raise ValueError(f"message {self.id or '(no id)'}: unknown source {source!r}")
        if self.relevance is not None and (
            isinstance(self.relevance, bool) or not isinstance(self.relevance, int | float)
        ):
            raise TypeError(f"message {self.id or '(no id)'}: relevance must be a number or None")
        # A message never changes, so what every shift asks of it is worked out here, once: whether it is
        # protected, its tool-link ids and the text that is counted.
        content, calls = self.content, self.tool_calls
        kind = KIND_PROTECTED if self.pinned or source == "input" else 0
        if role == "system":
            if source in PROTECTED_SYSTEM_SOURCES:
                kind = KIND_PROTECTED
        elif role == "tool":
            kind |= KIND_TOOL
        text: str | None
        links: tuple[str, ...] | None
        if calls:
            text, links = _derive(_joined_text, self), _derive(_link_ids_of, self)
        else:  # the common cases, without a call: what _joined_text and _link_ids_of would find
            if type(content) is str:
                text = content
            elif content is None:
                text = ""
            else:
                text = _derive(_joined_text, self)
            call_id = self.tool_call_id
            if type(content) is tuple:
                links = _derive(_link_ids_of, self)
            elif call_id:
                links = (call_id,) if type(call_id) is str else _derive(_link_ids_of, self)
            else:
                meta = self.meta
                links = () if type(meta) is dict and not meta else _derive(_link_ids_of, self)
        if text is None or links is None:
            kind |= KIND_MALFORMED
        elif links:
            kind |= KIND_LINKED
        setattr_ = object.__setattr__
        setattr_(self, "_text", text)
        setattr_(self, "_links", links)
        setattr_(self, "_kind", kind)

    # -- conversion -------------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from an OpenAI Chat Completions dict (Anthropic content blocks allowed)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a message must be an object, got {type(data).__name__}")
        ident = data.get("id", "")
        if ident is None:
            ident = ""
        if not isinstance(ident, str):
            raise TypeError(f"message id must be a string, got {type(ident).__name__}")
        label = ident or "(no id)"
        role = data.get("role")
        if role not in ROLES:
            raise ValueError(f"message {label}: unknown role {role!r}")
        content = data.get("content", "")
        if isinstance(content, list | tuple):
            parts: list[Mapping[str, Any]] = []
            for part in content:
                if isinstance(part, str):
                    part = {"type": "text", "text": part}
                if not isinstance(part, Mapping):
                    raise TypeError(f"message {label}: content parts must be objects")
                parts.append(dict(part))
            content = tuple(parts)
        elif content is not None and not isinstance(content, str):
            raise TypeError(f"message {label}: content must be a string, a list of parts or null")
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            raise TypeError(f"message {label}: tool_calls must be a list")
        tool_calls = tuple(ToolCall.from_dict(c) for c in raw_calls)
        link_key = next((k for k in LINK_KEYS if isinstance(data.get(k), str) and data.get(k)), None)
        meta = data.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise TypeError(f"message {label}: meta must be an object")
        pinned = data.get("pinned", False)
        if not isinstance(pinned, bool):
            raise TypeError(f"message {label}: pinned must be true or false")
        extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
        if link_key is not None and link_key != "tool_call_id":
            extra["_link_key"] = link_key
        return cls(
            id=ident,
            role=role,
            content=content,
            name=data.get("name"),
            tool_calls=tool_calls,
            tool_call_id=data.get(link_key) if link_key else None,
            pinned=pinned,
            source=data.get("source"),
            relevance=data.get("relevance"),
            workspace=data.get("workspace"),
            meta=dict(meta),
            extra=extra,
        )

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI Chat Completions dict of this message; ``from_dict(m.to_dict()) == m``."""
        out: dict[str, Any] = {}
        if self.id:
            out["id"] = self.id
        out["role"] = self.role
        out["content"] = [dict(p) for p in self.content] if isinstance(self.content, tuple) else self.content
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        extra = dict(self.extra)
        link_key = extra.pop("_link_key", "tool_call_id")
        if self.tool_call_id is not None:
            out[link_key] = self.tool_call_id
        if self.pinned:
            out["pinned"] = True
        if self.source is not None:
            out["source"] = self.source
        if self.relevance is not None:
            out["relevance"] = self.relevance
        if self.workspace is not None:
            out["workspace"] = self.workspace
        if self.meta:
            out["meta"] = dict(self.meta)
        out.update(extra)
        return out

    # -- derived views ----------------------------------------------------------------------------------

    @property
    def protected(self) -> bool:
        """M4: pinned, a system/persona/character system message, or the current input."""
        return bool(self._kind & KIND_PROTECTED)

    @property
    def text(self) -> str:
        """The text that is counted: text parts joined by newlines, then each tool call's name and arguments."""
        text = self._text
        return _joined_text(self) if text is None else text  # None: malformed, so this fails as it always did

    def media_parts(self) -> tuple[int, int]:
        """How many image parts and file parts the content carries (T3)."""
        images = files = 0
        if isinstance(self.content, tuple):
            for part in self.content:
                kind = media_kind(part)
                if kind == "image":
                    images += 1
                elif kind == "file":
                    files += 1
        return images, files

    def with_changes(self, **changes: Any) -> Message:
        return replace(self, **changes)


_T = TypeVar("_T")


def _derive(derive: Callable[[Message], _T], message: Message) -> _T | None:
    """What ``derive`` makes of ``message``, or None where a field of the wrong type makes it fail."""
    try:
        return derive(message)
    except Exception:  # derived again where it is used, and fails there as it always did
        return None


def _joined_text(message: Message) -> str:
    content = message.content
    pieces = ([content] if content else []) if type(content) is str else list(text_parts(content))
    for call in message.tool_calls:
        pieces.append(call.name)
        if call.arguments:
            pieces.append(call.arguments)
    return "\n".join(pieces)


def media_kind(part: Mapping[str, Any]) -> Literal["image", "file"] | None:
    kind = part.get("type")
    if kind in ("image", "image_url", "input_image"):
        return "image"
    if kind in ("file", "input_file", "document"):
        return "file"
    return None


def text_parts(content: str | Sequence[Mapping[str, Any]] | None) -> Iterable[str]:
    """The text pieces of a content value, including Anthropic tool_use input and tool_result content."""
    if content is None:
        return
    if isinstance(content, str):
        if content:
            yield content
        return
    for part in content:
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if isinstance(text, str) and text:
                yield text
        elif kind == "tool_use":
            yield str(part.get("name", ""))
            payload = part.get("input")
            if payload not in (None, {}, ""):
                yield payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, sort_keys=True)
        elif kind == "tool_result":
            inner = part.get("content")
            if isinstance(inner, str):
                if inner:
                    yield inner
            elif isinstance(inner, list):
                yield from text_parts([p for p in inner if isinstance(p, Mapping)])


def as_message(item: MessageLike) -> Message:
    """A ``Message`` from a message or a message dict."""
    if isinstance(item, Message):
        return item
    return Message.from_dict(item)


_message_id = attrgetter("id")


def _unchanged_ids(items: Sequence[MessageLike]) -> list[str] | None:
    """The ids of ``items`` if :func:`normalize_messages` leaves them as they are, else None.

    That is when every item is a ``Message`` with an id of its own: the common case, checked at C speed.
    """
    if set(map(type, items)) - {Message}:
        return None
    ids: list[str] = list(map(_message_id, items))
    try:
        unique = len(set(ids)) == len(ids)
    except TypeError:  # an unhashable id: normalize_messages reports it
        return None
    return ids if unique and all(ids) else None


def normalize_messages(items: Iterable[MessageLike]) -> list[Message]:
    """Convert every item, give id-less messages their stable ``msg-<index>`` id, and reject duplicates."""
    if isinstance(items, str | bytes | Mapping):
        raise TypeError("messages must be a list of messages, not a single value")
    if not isinstance(items, list | tuple):
        items = list(items)
    if _unchanged_ids(items) is not None:
        return cast(list[Message], list(items))
    out: list[Message] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        message = as_message(item)
        if not message.id:
            message = replace(message, id=f"msg-{index}")
        if message.id in seen:
            raise ValueError(f"message {message.id}: duplicate message id")
        seen.add(message.id)
        out.append(message)
    return out


def link_ids(message: Message) -> tuple[str, ...]:
    """Every tool-link id a message carries (M3), in a stable order."""
    links = message._links
    return _link_ids_of(message) if links is None else links


def _link_ids_of(message: Message) -> tuple[str, ...]:
    ids: list[str] = []
    if message.tool_call_id:
        ids.append(message.tool_call_id)
    else:
        for key in LINK_KEYS:
            value = message.meta.get(key)
            if isinstance(value, str) and value:
                ids.append(value)
                break
    ids.extend(call.id for call in message.tool_calls)
    if isinstance(message.content, tuple):
        for part in message.content:
            kind = part.get("type")
            value = part.get("id") if kind == "tool_use" else part.get("tool_use_id") if kind == "tool_result" else None
            if isinstance(value, str) and value:
                ids.append(value)
    return tuple(dict.fromkeys(ids))
