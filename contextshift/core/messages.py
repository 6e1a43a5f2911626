"""Messages (M1, M2): one immutable ``Message`` type and lossless dict conversion.

A ``Message`` is what every part of contextshift works on. Plain dicts in OpenAI Chat Completions shape,
including Anthropic Messages content blocks (``tool_use`` / ``tool_result``), are accepted wherever a
message is, through :func:`as_message`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import countOf
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias, TypeVar, cast, overload

from .vocabulary import PROTECTED_SYSTEM_SOURCES, ROLES, SOURCES, Role, Source

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


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _read_only(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of a mapping (its top level; the values are shared)."""
    return MappingProxyType(dict(value)) if value else _EMPTY


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by an assistant message.

    Args:
        id: the call's id, which the tool result names in its ``tool_call_id``.
        name: the function's name.
        arguments: the arguments as a JSON string (anything else is encoded as JSON).
        extra: anything else the call carried (``type`` and unknown keys), kept for a lossless round trip.

    Raises:
        ValueError: ``id`` is empty.
        TypeError: a field has the wrong type.
    """

    id: str
    name: str
    arguments: str = ""
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("a tool call needs a non-empty string id")
        if not isinstance(self.name, str):
            raise TypeError(f"tool call {self.id!r}: name must be a string, got {type(self.name).__name__}")
        if not isinstance(self.arguments, str):
            object.__setattr__(self, "arguments", json.dumps(self.arguments, ensure_ascii=False, sort_keys=True))
        if not isinstance(self.extra, Mapping):
            raise TypeError(f"tool call {self.id!r}: extra must be a mapping")
        if type(self.extra) is not MappingProxyType:
            object.__setattr__(self, "extra", _read_only(self.extra))

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.arguments))

    def __deepcopy__(self, memo: object) -> ToolCall:
        return self  # immutable

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolCall.from_dict, (self.to_dict(),))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """A call from its OpenAI dict (``{"id", "type", "function": {"name", "arguments"}}``) or a flat one.

        Args:
            data: the call's dict, OpenAI-shaped or flat (``{"id", "name", "arguments"}``); other keys are kept.

        Returns:
            The call; ``ToolCall.from_dict(c.to_dict()) == c``.

        Raises:
            TypeError: ``data`` is not a mapping, or its name or arguments are not strings.
            ValueError: the id is missing or empty.
        """
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
        call_id = data.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError("a tool call needs a non-empty string id")
        return cls(id=call_id, name=name, arguments=arguments, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI dict of this call (or the flat one it came from).

        Returns:
            A new dict; the keys the call came with are kept.
        """
        extra = dict(self.extra)
        if extra.pop("flat", False):
            return {"id": self.id, "name": self.name, "arguments": self.arguments, **extra}
        function: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        function.update(extra.pop("function_extra", {}))
        out: dict[str, Any] = {"id": self.id, "type": extra.pop("type", "function"), "function": function}
        out.update(extra)
        return out


def _content_of(content: object, label: str) -> str | tuple[Mapping[str, Any], ...] | None:
    """``content`` as a message holds it: a string, None, or a tuple of read-only parts."""
    if content is None or type(content) is str:
        return content
    if isinstance(content, list | tuple):
        parts: list[Mapping[str, Any]] = []
        for part in content:
            if isinstance(part, str):
                parts.append(MappingProxyType({"type": "text", "text": part}))
            elif type(part) is MappingProxyType:
                parts.append(part)
            elif isinstance(part, Mapping):
                parts.append(MappingProxyType(dict(part)))
            else:
                raise TypeError(f"message {label}: content parts must be objects or strings, got {type(part).__name__}")
        return tuple(parts)
    if isinstance(content, str):
        return str(content)
    raise TypeError(f"message {label}: content must be a string, a list of parts or None, got {type(content).__name__}")


def _calls_of(calls: object, label: str) -> tuple[ToolCall, ...]:
    if calls is None or (not calls and isinstance(calls, list | tuple)):
        return ()
    if not isinstance(calls, list | tuple):
        raise TypeError(f"message {label}: tool_calls must be a list, got {type(calls).__name__}")
    if type(calls) is tuple and all(type(c) is ToolCall for c in calls):
        return calls
    out: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            out.append(call)
        elif isinstance(call, Mapping):
            try:
                out.append(ToolCall.from_dict(call))
            except (TypeError, ValueError) as error:
                raise type(error)(f"message {label}: tool_calls: {error}") from None
        else:
            raise TypeError(f"message {label}: tool_calls must hold tool calls or objects, got {type(call).__name__}")
    return tuple(out)


def _optional_text(value: object, what: str, label: str) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"message {label}: {what} must be a string or None, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Message:
    """One prompt message (M1). Immutable and hashable: the library never changes a message it was given.

    Made by the constructor, one of the factories (:meth:`user`, :meth:`assistant`, :meth:`tool_result`,
    :meth:`system`) or :meth:`from_dict`; all of them validate and coerce alike.

    Args:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: a string, None, or a list of parts (objects in OpenAI or Anthropic shape; a plain string
            becomes a text part). Held as a tuple of read-only parts.
        id: a stable id; an id-less message gets ``msg-<index>`` when a prompt is normalized.
        name: the participant's name.
        tool_calls: the calls an assistant message requests (``ToolCall`` or their dicts).
        tool_call_id: the call a tool result answers.
        pinned: always keep this message (M4).
        source: where the message came from (``input`` marks the current input, which is protected).
        relevance: a retrieved block's relevance in [0, 1] (lorebook and memory).
        workspace: a label grouping messages of one workspace (summaries keep it).
        meta: anything else, read-only once the message is made.
        extra: unknown top-level keys of the dict this message came from, returned unchanged by ``to_dict``.

    Raises:
        ValueError: an unknown ``role`` or ``source``, or a tool call without an id.
        TypeError: a field has the wrong type; the message names the field.
    """

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
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    # Derived once from the fields above (never compared, shown or passed in): see ``__post_init__``.
    _text: str | None = field(init=False, repr=False, compare=False)
    _links: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    _kind: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        ident = self.id
        if type(ident) is not str:
            ident = _settle_id(self)
        label = ident or "(no id)"
        role, source = self.role, self.source
        if role not in ROLES:
            raise ValueError(f"message {label}: unknown role {role!r}")
        if source is not None and source not in SOURCES:
            raise ValueError(f"message {label}: unknown source {source!r}")
        content = self.content
        if content is not None and type(content) is not str:
            content = _content_of(content, label)
            setattr_(self, "content", content)
        calls = self.tool_calls
        if type(calls) is not tuple or calls:
            calls = _calls_of(calls, label)
            setattr_(self, "tool_calls", calls)
        call_id = self.tool_call_id
        if call_id is not None:
            _optional_text(call_id, "tool_call_id", label)
            if not call_id:
                call_id = None
                setattr_(self, "tool_call_id", None)
        if type(self.pinned) is not bool:
            raise TypeError(f"message {label}: pinned must be True or False, got {type(self.pinned).__name__}")
        if self.name is not None or self.workspace is not None or self.relevance is not None:
            _check_optional_fields(self, label)
        meta = self.meta
        if type(meta) is not MappingProxyType or type(self.extra) is not MappingProxyType:
            meta = _settle_mappings(self, label)
        # A message never changes, so what every shift asks of it is worked out here, once: whether it is
        # protected, its tool-link ids and the text that is counted.
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
            if type(content) is tuple:
                links = _derive(_link_ids_of, self)
            elif call_id:
                links = (call_id,)
            else:
                links = () if not meta else _derive(_link_ids_of, self)
        if text is None or links is None:
            kind |= KIND_MALFORMED
        elif links:
            kind |= KIND_LINKED
        setattr_(self, "_text", text)
        setattr_(self, "_links", links)
        setattr_(self, "_kind", kind)

    def __hash__(self) -> int:
        # Equal messages have equal ids, roles and texts; the rest is compared by ``==`` only.
        return hash((self.id, self.role, self._text))

    def __deepcopy__(self, memo: object) -> Message:
        return self  # immutable: a copy would be the same message

    def __copy__(self) -> Message:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message.from_dict, (self.to_dict(),))

    # -- factories --------------------------------------------------------------------------------------

    @classmethod
    def user(cls, content: str | Sequence[str | Mapping[str, Any]], **fields: Any) -> Message:
        """A user message.

        Args:
            content: its text, or a list of parts (plain strings become text parts).
            **fields: any other constructor argument (``id``, ``source``, ``pinned``...).

        Returns:
            The message, validated as the constructor validates.

        Raises:
            TypeError: a field has the wrong type (the error names it).
            ValueError: an unknown ``source``, or a tool call without an id.
        """
        return cls("user", content, **fields)  # type: ignore[arg-type]

    @classmethod
    def assistant(
        cls,
        content: str | Sequence[str | Mapping[str, Any]] | None = "",
        *,
        tool_calls: Sequence[ToolCall | Mapping[str, Any]] = (),
        **fields: Any,
    ) -> Message:
        """An assistant reply, optionally requesting tool calls.

        Args:
            content: its text or parts; ``None`` or ``""`` for a reply that only calls tools.
            tool_calls: the calls it requests, as ``ToolCall`` or their dicts.
            **fields: any other constructor argument.

        Returns:
            The message, validated as the constructor validates.

        Raises:
            TypeError: a field has the wrong type (the error names it).
            ValueError: an unknown ``source``, or a tool call without an id.
        """
        return cls("assistant", content, tool_calls=tool_calls, **fields)  # type: ignore[arg-type]

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str | Sequence[str | Mapping[str, Any]], **fields: Any) -> Message:
        """The result of a tool call.

        Args:
            tool_call_id: the id of the call it answers (it links the two, M3).
            content: the result's text or parts.
            **fields: any other constructor argument.

        Returns:
            The ``tool`` message.

        Raises:
            ValueError: ``tool_call_id`` is empty, or an unknown ``source``.
            TypeError: a field has the wrong type (the error names it).
        """
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise ValueError("a tool result needs the non-empty id of the call it answers")
        return cls("tool", content, tool_call_id=tool_call_id, **fields)  # type: ignore[arg-type]

    @classmethod
    def system(cls, content: str | Sequence[str | Mapping[str, Any]], **fields: Any) -> Message:
        """A system message (protected unless its ``source`` is one of the retrieved or summary sources).

        Args:
            content: its text or parts.
            **fields: any other constructor argument.

        Returns:
            The message, validated as the constructor validates.

        Raises:
            TypeError: a field has the wrong type (the error names it).
            ValueError: an unknown ``source``, or a tool call without an id.
        """
        return cls("system", content, **fields)  # type: ignore[arg-type]

    # -- conversion -------------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from an OpenAI Chat Completions dict (Anthropic content blocks allowed).

        Args:
            data: the message's dict. A tool result's link may be under ``tool_call_id``, ``toolCallId`` or
                ``callId``; unknown keys are kept in ``extra``.

        Returns:
            The message; ``Message.from_dict(m.to_dict()) == m``.

        Raises:
            TypeError: ``data`` is not a mapping, or a field has the wrong type.
            ValueError: an unknown role or source, or a tool call without an id.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a message must be an object, got {type(data).__name__}")
        link, meta, extra = _dict_fields(data)
        return cls(
            id=data.get("id", ""),
            role=data.get("role"),  # type: ignore[arg-type]
            content=data.get("content", ""),
            name=data.get("name"),
            tool_calls=data.get("tool_calls") or (),
            tool_call_id=link,
            pinned=data.get("pinned", False),
            source=data.get("source"),
            relevance=data.get("relevance"),
            workspace=data.get("workspace"),
            meta=meta,
            extra=extra,
        )

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI Chat Completions dict of this message, with contextshift's own keys (``id``,
        ``source``, ``pinned``...). See ``to_openai_messages`` for what a provider accepts.

        Returns:
            A new dict; ``Message.from_dict(m.to_dict()) == m``.
        """
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
        """How many image parts and file parts the content carries (T3).

        Returns:
            ``(images, files)``.
        """
        images = files = 0
        if isinstance(self.content, tuple):
            for part in self.content:
                kind = media_kind(part)
                if kind == "image":
                    images += 1
                elif kind == "file":
                    files += 1
        return images, files


def _settle_id(message: Message) -> str:
    """The id of a message made with ``id=None`` (``""``) or a ``str`` subclass; any other type raises."""
    ident = message.id
    if ident is None:
        ident = ""
        object.__setattr__(message, "id", ident)
    elif not isinstance(ident, str):
        raise TypeError(f"message id must be a string, got {type(ident).__name__}")
    return ident


def _check_optional_fields(message: Message, label: str) -> None:
    """Reject a ``name``, ``workspace`` or ``relevance`` of the wrong type (a rare path of the constructor)."""
    if message.name is not None:
        _optional_text(message.name, "name", label)
    if message.workspace is not None:
        _optional_text(message.workspace, "workspace", label)
    relevance = message.relevance
    if relevance is not None and (isinstance(relevance, bool) or not isinstance(relevance, int | float)):
        raise TypeError(f"message {label}: relevance must be a number or None, got {type(relevance).__name__}")


def _settle_mappings(message: Message, label: str) -> Mapping[str, Any]:
    """Make ``meta`` and ``extra`` read-only where they are not yet (the constructor's rare path); return
    the ``meta`` the message holds then."""
    setattr_ = object.__setattr__
    meta = message.meta
    if type(meta) is not MappingProxyType:
        if meta is None:
            meta = _EMPTY
        elif not isinstance(meta, Mapping):
            raise TypeError(f"message {label}: meta must be a mapping or None, got {type(meta).__name__}")
        else:
            meta = _read_only(meta)
        setattr_(message, "meta", meta)
    extra = message.extra
    if type(extra) is not MappingProxyType:
        if not isinstance(extra, Mapping):
            raise TypeError(f"message {label}: extra must be a mapping, got {type(extra).__name__}")
        setattr_(message, "extra", _read_only(extra))
    return meta


def _dict_fields(data: Mapping[str, Any]) -> tuple[Any, Any, Mapping[str, Any]]:
    """A message dict's tool-call link (under ``tool_call_id`` or another of ``LINK_KEYS``), its ``meta``, and
    its unknown keys (with the link's key among them when it is not ``tool_call_id``). ``meta`` and the
    unknown keys come read-only, as the constructor holds them, so it need not copy them again; a ``meta``
    of the wrong type comes as it is, for the constructor to reject."""
    link_key = "tool_call_id"
    link = data.get("tool_call_id")
    if not link:  # a link of the wrong type stays, for the constructor to reject
        link = None
        for key in LINK_KEYS[1:]:
            value = data.get(key)
            if isinstance(value, str) and value:
                link_key, link = key, value
                break
    extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    if link_key != "tool_call_id":
        extra["_link_key"] = link_key
    meta = data.get("meta")
    if meta is None:
        meta = _EMPTY
    elif isinstance(meta, Mapping) and type(meta) is not MappingProxyType:
        meta = _read_only(meta)
    return link, meta, _read_only(extra)


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


def read_message(item: Mapping[str, Any], index: int) -> Message:
    """The message :func:`normalize_messages` makes of the dict ``item`` at ``index`` (the same object fields,
    an id-less one ``msg-<index>``), built now.

    Raises:
        TypeError: a field has the wrong type.
        ValueError: an unknown role or source, or a tool call without an id.
    """
    message = _plain(item, index) if type(item) is dict else None
    if message is None:
        message = Message.from_dict(item)
        if not message.id:
            message = with_id(message, f"msg-{index}")
    return message


def as_message(item: MessageLike) -> Message:
    """A ``Message`` from a message or a message dict.

    Args:
        item: a ``Message`` (returned as it is) or an OpenAI-style dict (see :meth:`Message.from_dict`).

    Returns:
        The message (an id-less dict keeps an empty id; :func:`normalize_messages` gives ids).

    Raises:
        TypeError: ``item`` is neither, or a field has the wrong type.
        ValueError: an unknown role or source, or a tool call without an id.
    """
    if isinstance(item, Message):
        return item
    return _plain(item) or Message.from_dict(item)


#: The keys of a dict :func:`_plain` makes a message of; any other key takes ``Message.from_dict``.
_PLAIN_KEYS = frozenset({"id", "role", "content", "name", "tool_call_id", "pinned", "source"})
_new = object.__new__


def _plain(data: object, index: int = -1) -> Message | None:
    """The message of a plain dict (the keys of ``_PLAIN_KEYS`` only, each of the right type), or None.

    This is ``Message.from_dict`` for the dicts most prompts are made of, checked in one look and built
    without a second one (an id-less one gets ``msg-<index>`` when ``index`` is given). Any other dict (tool
    calls, parts, meta, a bad value...) gives None, and ``from_dict`` builds it or says what is wrong. The
    message is equal to the one ``from_dict`` makes.
    """
    if type(data) is not dict or not data.keys() <= _PLAIN_KEYS:
        return None
    role = data.get("role")
    content = data.get("content", "")
    ident = data.get("id") or (f"msg-{index}" if index >= 0 else "")
    name = data.get("name")
    call_id = data.get("tool_call_id") or None
    pinned = data.get("pinned", False)
    source = data.get("source")
    if (
        role not in ROLES
        or (content is not None and type(content) is not str)
        or type(ident) is not str
        or (name is not None and type(name) is not str)
        or (call_id is not None and type(call_id) is not str)
        or type(pinned) is not bool
        or (source is not None and source not in SOURCES)
    ):
        return None
    kind = KIND_PROTECTED if pinned or source == "input" else 0
    if role == "system":
        if source in PROTECTED_SYSTEM_SOURCES:
            kind = KIND_PROTECTED
    elif role == "tool":
        kind |= KIND_TOOL
    if call_id:
        kind |= KIND_LINKED
    return _assembled(
        Message,
        role,
        content,
        ident,
        name,
        (),
        call_id,
        pinned,
        source,
        None,
        None,
        _EMPTY,
        _EMPTY,
        content or "",
        (call_id,) if call_id else (),
        kind,
    )


def _assembled(
    cls: type[Message],
    role: Role,
    content: str | tuple[Mapping[str, Any], ...] | None,
    ident: str,
    name: str | None,
    calls: tuple[ToolCall, ...],
    call_id: str | None,
    pinned: bool,
    source: Source | None,
    relevance: float | None,
    workspace: str | None,
    meta: Mapping[str, Any],
    extra: Mapping[str, Any],
    text: str | None,
    links: tuple[str, ...] | None,
    kind: int,
) -> Message:
    """A message of class ``cls`` with these slots, checked by the caller: the fields and what ``__post_init__``
    derives of them (``text``, ``links``, ``kind``). Each slot is set by its own setter, as a frozen dataclass
    refuses ``setattr``."""
    message = _new(cls)
    _set_role(message, role)
    _set_content(message, content)
    _set_id(message, ident)
    _set_name(message, name)
    _set_calls(message, calls)
    _set_call_id(message, call_id)
    _set_pinned(message, pinned)
    _set_source(message, source)
    _set_relevance(message, relevance)
    _set_workspace(message, workspace)
    _set_meta(message, meta)
    _set_extra(message, extra)
    _set_text(message, text)
    _set_links(message, links)
    _set_kind(message, kind)
    return message


# The slots' own setters (a frozen dataclass refuses ``setattr``), for :func:`_assembled`.
(
    _set_role,
    _set_content,
    _set_id,
    _set_name,
    _set_calls,
    _set_call_id,
    _set_pinned,
    _set_source,
    _set_relevance,
    _set_workspace,
    _set_meta,
    _set_extra,
    _set_text,
    _set_links,
    _set_kind,
) = (
    cast(Callable[[Message, Any], None], Message.__dict__[name].__set__)
    for name in (
        *("role", "content", "id", "name", "tool_calls", "tool_call_id", "pinned", "source", "relevance"),
        *("workspace", "meta", "extra", "_text", "_links", "_kind"),
    )
)


def with_id(message: Message, ident: str) -> Message:
    """``message`` with the id ``ident``: what ``dataclasses.replace(message, id=ident)`` gives, without
    checking the other fields again (they were checked when the message was made, and nothing derived from
    them depends on the id; see "Speed notes" in docs/design.md).
    """
    if type(ident) is not str:
        raise TypeError(f"message id must be a string, got {type(ident).__name__}")
    return _assembled(
        type(message),
        message.role,
        message.content,
        ident,
        message.name,
        message.tool_calls,
        message.tool_call_id,
        message.pinned,
        message.source,
        message.relevance,
        message.workspace,
        message.meta,
        message.extra,
        message._text,
        message._links,
        message._kind,
    )


def _unchanged_ids(items: Sequence[MessageLike]) -> list[str] | None:
    """The ids of ``items`` if :func:`normalize_messages` leaves them as they are, else None.

    That is when every item is a ``Message`` with an id of its own: the common case, checked at C speed.
    """
    if set(map(type, items)) - {Message}:
        return None
    ids: list[str] = [m.id for m in cast(Sequence[Message], items)]
    try:
        unique = len(set(ids)) == len(ids)
    except TypeError:  # an unhashable id: normalize_messages reports it
        return None
    return ids if unique and all(ids) else None


def normalize_messages(items: Iterable[MessageLike]) -> list[Message]:
    """Convert every item, give id-less messages their stable ``msg-<index>`` id, and reject duplicates.

    Args:
        items: the prompt, oldest first: ``Message`` objects or their dicts.

    Returns:
        The messages, in the same order, each with a unique id.

    Raises:
        TypeError: ``items`` is a single value rather than a list, or an item is not a message.
        ValueError: a duplicate id, or an item :meth:`Message.from_dict` rejects.
    """
    return normalized(items)[0]


def _listed(items: Iterable[MessageLike]) -> list[MessageLike] | tuple[MessageLike, ...]:
    """``items`` as a list or tuple (a single message or string raises)."""
    if isinstance(items, str | bytes | Mapping):
        raise TypeError("messages must be a list of messages, not a single value")
    if not isinstance(items, list | tuple):
        return list(items)
    return items


def normalized(items: Iterable[MessageLike]) -> tuple[list[Message], list[str]]:
    """:func:`normalize_messages` and the ids of its messages."""
    items = _listed(items)
    ids = _unchanged_ids(items)
    if ids is not None:
        return cast(list[Message], list(items)), ids
    out: list[Message] = []
    append = out.append
    seen: dict[str, None] = {}
    for index, item in enumerate(items):
        if type(item) is dict:
            message = _plain(item, index)
            if message is None:
                message = Message.from_dict(item)
        else:
            message = as_message(item)
        ident = message.id
        if not ident:
            ident = f"msg-{index}"
            message = with_id(message, ident)
        if ident in seen:
            raise ValueError(f"message {ident}: duplicate message id")
        seen[ident] = None
        append(message)
    return out, list(seen)


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


class LazyMessages(Sequence[Message]):
    """A normalized prompt whose ``Message`` objects are built when first read: those of its plain dicts, and
    the copies of its id-less messages that carry their ``msg-<index>`` ids.

    Made by :func:`scanned`, which has already checked every item (so building one never fails) and read
    what a shift needs of every message (its id, its ``_kind`` bits and its link ids). A shift reads only
    the messages it counts or keeps; the rest are never built. Reading one always gives the same object,
    equal to the one :func:`normalize_messages` makes.
    """

    __slots__ = ("_built", "_items")

    def __init__(self, items: Sequence[object], built: list[Message | None]) -> None:
        self._items = items
        self._built = built

    def __len__(self) -> int:
        return len(self._built)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._built)))]
        message = self._built[index]
        if message is None:
            if index < 0:
                index += len(self._built)
            item = self._items[index]
            if isinstance(item, Message):  # an id-less message: it gets its id
                message = with_id(item, f"msg-{index}")
            else:
                message = _plain(item, index)
                if message is None:  # a checked dict with tool calls
                    message = Message.from_dict(cast(Mapping[str, Any], item))
                    if not message.id:
                        message = with_id(message, f"msg-{index}")
            self._built[index] = message
        return message

    def __iter__(self) -> Iterator[Message]:
        return map(self.__getitem__, range(len(self._built)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


class MessageView(Sequence[Message]):
    """Some messages of a prompt, by position, read only when asked for (a result's ``excluded``): of a
    :class:`LazyMessages`, they are built then.

    Compares equal to a list of the same messages; it pickles and copies as a list.
    """

    __slots__ = ("_messages", "_positions")

    def __init__(self, messages: Sequence[Message], positions: Sequence[int]) -> None:
        self._messages = messages
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return list(map(self._messages.__getitem__, self._positions[index]))
        return self._messages[self._positions[index]]

    def __iter__(self) -> Iterator[Message]:
        return map(self._messages.__getitem__, self._positions)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_CALL_KEYS = _PLAIN_KEYS | {"tool_calls"}
_CALL_DICT_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


def _simple_calls(calls: object) -> bool:
    """Whether ``calls`` is a non-empty list of OpenAI tool-call dicts ``ToolCall.from_dict`` takes as they
    are (a string id, name and arguments, nothing else), so a message of them can be built later."""
    if type(calls) is not list or not calls:
        return False
    for call in calls:
        if type(call) is not dict or not call.keys() <= _CALL_DICT_KEYS:
            return False
        ident, function = call.get("id"), call.get("function")
        if type(ident) is not str or not ident or type(function) is not dict or not function.keys() <= _FUNCTION_KEYS:
            return False
        if type(function.get("name", "")) is not str or type(function.get("arguments", "")) is not str:
            return False
    return True


class Scan(NamedTuple):
    """What :func:`scanned` read of a prompt: its messages (built lazily), ids, ``_kind`` bits and link ids."""

    messages: Sequence[Message]
    ids: list[str]
    kinds: list[int]
    links: list[tuple[str, ...] | None]


def _scanned_messages(messages: Sequence[Message]) -> Scan | None:
    """The scan of a prompt of ``Message`` objects only, or None where an id is used twice (the general
    loop of :func:`scanned` then says which)."""
    ids = [message.id or f"msg-{index}" for index, message in enumerate(messages)]
    if len(dict.fromkeys(ids)) != len(ids):
        return None
    return Scan(
        LazyMessages(messages, [message if message.id else None for message in messages]),
        ids,
        [message._kind for message in messages],
        [message._links for message in messages],
    )


def scanned(items: Iterable[MessageLike]) -> Scan:
    """:func:`normalized`, without building the ``Message`` of a plain dict, or the copy of an id-less
    ``Message`` with its ``msg-<index>`` id, until it is read.

    Every item is checked here, in order, so a bad one raises what :func:`normalized` raises. A plain dict
    (the keys :func:`_plain` takes, of the right types) is only read: its id, kind and link id. Any other
    item is built at once, as :func:`normalized` builds it.
    """
    items = _listed(items)
    if countOf(map(type, items), Message) == len(items):  # Message objects, some without an id
        scan = _scanned_messages(cast(Sequence[Message], items))
        if scan is not None:
            return scan
    built: list[Message | None] = []
    kinds: list[int] = []
    links: list[tuple[str, ...] | None] = []
    seen: dict[str, None] = {}
    add_built, add_kind, add_links = built.append, kinds.append, links.append
    plain_keys, roles, sources, protected_sources = _PLAIN_KEYS, ROLES, SOURCES, PROTECTED_SYSTEM_SOURCES
    call_keys = _CALL_KEYS
    no_links: tuple[str, ...] = ()
    for index, item in enumerate(items):
        calls: object = None
        if type(item) is dict and (
            item.keys() <= plain_keys or (item.keys() <= call_keys and _simple_calls(calls := item.get("tool_calls")))
        ):
            get = item.get
            role = get("role")
            content = get("content", "")
            ident = get("id") or f"msg-{index}"
            call_id = get("tool_call_id") or None
            pinned = get("pinned", False)
            source = get("source")
            name = get("name")
            if (
                role in roles
                and (content is None or type(content) is str)
                and type(ident) is str
                and (name is None or type(name) is str)
                and (call_id is None or type(call_id) is str)
                and type(pinned) is bool
                and (source is None or source in sources)
            ):
                kind = KIND_PROTECTED if pinned or source == "input" else 0
                if role == "system":
                    if source in protected_sources:
                        kind = KIND_PROTECTED
                elif role == "tool":
                    kind |= KIND_TOOL
                if calls:
                    call_ids = [c["id"] for c in cast(list[dict[str, str]], calls)]
                    found = tuple(dict.fromkeys([call_id, *call_ids] if call_id else call_ids))
                    kind |= KIND_LINKED
                    add_links(found)
                elif call_id:
                    kind |= KIND_LINKED
                    add_links((call_id,))
                else:
                    add_links(no_links)
                if ident in seen:
                    raise ValueError(f"message {ident}: duplicate message id")
                seen[ident] = None
                add_built(None)
                add_kind(kind)
                continue
        message = Message.from_dict(item) if type(item) is dict else as_message(item)
        ident = message.id
        lazy = not ident and message is item  # an id-less Message: its copy with an id is made when read
        if not ident:
            ident = f"msg-{index}"
            if not lazy:
                message = with_id(message, ident)
        if ident in seen:
            raise ValueError(f"message {ident}: duplicate message id")
        seen[ident] = None
        add_built(None if lazy else message)
        add_kind(message._kind)
        add_links(message._links)
    return Scan(LazyMessages(items, built), list(seen), kinds, links)
