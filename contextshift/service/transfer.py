"""Export and import of chats (issue 27): the file formats, with no I/O.

* Export: :func:`export_document` is the lossless JSON document of one chat (``format: contextshift.chat``,
  ``version: 1``): every message with its versions (``alternatives``/``alternative``), pin, exclusion
  (``meta.manualExcluded``), standing mark, meta and the summary that covers it, and every summary's text;
  :func:`export_markdown` renders it for people to read.
* Import: :func:`parse_import` reads a file's text into :class:`ImportedChat` values, one a chat: our own JSON
  document, a SillyTavern chat (``.jsonl``: a header line, then one message a line, swipes as versions), a
  ChatGPT export (``conversations.json``: a list of conversations, each a ``mapping`` tree read from
  ``current_node`` back to its root) or an Open WebUI export (a list of chats, each a ``history`` tree read
  from ``currentId`` back, or a flat ``messages`` list). A file it cannot read is refused with a stable code
  and nothing is made: ``IMPORT_NOT_READABLE``, ``IMPORT_FORMAT_UNKNOWN``, ``IMPORT_INVALID``,
  ``IMPORT_EMPTY``, ``IMPORT_TOO_LARGE``, ``TEXT_NOT_STORABLE``.

Messages refer to each other and summaries to messages by a ``ref``: the message's id in our own document, its
position in the others. Storage gives them new ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import Refusal, ServiceError

FORMAT = "contextshift.chat"
VERSION = 1
#: At most this many chats from one file, and this many messages in all.
MAX_IMPORT_CHATS = 1000
MAX_IMPORT_MESSAGES = 100_000
ROLES = ("system", "user", "assistant", "tool")
CHAT_TYPES = ("chat", "discuss", "pipeline")
#: The keys of an exported message, in the order written.
MESSAGE_KEYS = (
    "id",
    "seq",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "pinned",
    "excluded",
    "standing",
    "meta",
    "workspace",
    "alternatives",
    "alternative",
    "summary_id",
    "created_at",
)
SUMMARY_KEYS = ("id", "content", "covers", "workspaces", "anchor_seq", "superseded_by", "model", "created_at")


@dataclass
class ImportedChat:
    """One chat read from a file. Each message is a dict of message fields plus ``ref`` (how the others name
    it), ``standing``, ``alternatives``, ``alternative``, ``summary_ref`` and ``created_at`` (ISO text or
    None); each summary has ``ref``, ``content``, ``covers`` (refs), ``workspaces``, ``model``,
    ``superseded_by`` (a summary's ref or None)."""

    title: str
    source: str
    type: str = "chat"
    messages: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)


def _invalid(where: str, what: str) -> ServiceError:
    return ServiceError(
        Refusal.UNPROCESSABLE, "IMPORT_INVALID", f"The file cannot be imported: {where} {what}.", where=where
    )


# -- export ------------------------------------------------------------------------------------------------


def export_document(
    chat: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    summaries: Sequence[Mapping[str, Any]],
    exported_at: str,
) -> dict[str, Any]:
    """Our JSON document of one chat: ``chat`` (title, type, created_at), messages oldest first, summaries."""
    out_messages = []
    for m in messages:
        meta = dict(m.get("meta") or {})
        row = {**{k: m.get(k) for k in MESSAGE_KEYS}, "meta": meta, "excluded": bool(meta.get("manualExcluded"))}
        out_messages.append(row)
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": exported_at,
        "chat": {
            "title": chat.get("title") or "",
            "type": chat.get("type") or "chat",
            "created_at": chat.get("created_at"),
        },
        "messages": out_messages,
        "summaries": [{k: s.get(k) for k in SUMMARY_KEYS} for s in summaries],
    }


def content_text(content: Any) -> str:
    """The text of message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _marks(message: Mapping[str, Any]) -> str:
    marks = [name for name in ("pinned", "excluded", "standing") if message.get(name)]
    if message.get("summary_id"):
        marks.append("summarized")
    versions = message.get("alternatives") or []
    if len(versions) > 1:
        marks.append(f"version {(message.get('alternative') or 0) + 1} of {len(versions)}")
    return f" ({', '.join(marks)})" if marks else ""


def export_markdown(document: Mapping[str, Any]) -> str:
    """The chat for people to read: a heading, each message under its role, the summaries at the end."""
    title = document["chat"]["title"] or "Untitled chat"
    lines = [f"# {title}", "", f"Exported from contextshift on {document['exported_at']}.", ""]
    for m in document["messages"]:
        who = m["role"].capitalize() + (f" ({m['name']})" if m.get("name") else "")
        lines += [f"## {who} · #{m['seq']}{_marks(m)}", ""]
        text = content_text(m.get("content"))
        lines += [text if text.strip() else "_(no text)_", ""]
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            lines += [
                f"Tool call `{function.get('name', '')}`:",
                "",
                "```json",
                str(function.get("arguments", "")),
                "```",
                "",
            ]
    summaries = [s for s in document["summaries"] if not s.get("superseded_by")]
    if summaries:
        lines += ["## Summaries", ""]
        for s in summaries:
            lines += [f"### Summary of {len(s.get('covers') or [])} messages", "", str(s.get("content", "")), ""]
    return "\n".join(lines).rstrip() + "\n"


# -- import ------------------------------------------------------------------------------------------------


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ServiceError(Refusal.INVALID, "IMPORT_NOT_READABLE", "The file nests too deeply to read.") from exc
    except ValueError:
        return None


def _jsonl(text: str) -> list[Any] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 1:
        return None
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            return None
    return out


def parse_import(text: str) -> list[ImportedChat]:
    """The chats a file holds (see the module's text for the formats); refused with a code if it holds none."""
    data = _load_json(text)
    if data is None:
        lines = _jsonl(text)
        if lines is None:
            raise ServiceError(
                Refusal.INVALID,
                "IMPORT_NOT_READABLE",
                "The file is neither JSON nor JSON Lines: export it again from the app it came from.",
            )
        chats = [_sillytavern(lines)]
    elif isinstance(data, dict) and data.get("format") == FORMAT:
        chats = [_ours(data)]
    elif (isinstance(data, dict) and "mapping" in data) or _list_of(data, "mapping"):
        chats = [_chatgpt(c, n) for n, c in enumerate(data if isinstance(data, list) else [data])]
    elif (isinstance(data, dict) and "chat" in data) or _list_of(data, "chat"):
        chats = [_openwebui(c, n) for n, c in enumerate(data if isinstance(data, list) else [data])]
    elif isinstance(data, dict) and ("user_name" in data or "mes" in data):
        chats = [_sillytavern([data])]
    else:
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "IMPORT_FORMAT_UNKNOWN",
            "The file is not a chat export contextshift reads: a contextshift JSON export, a SillyTavern "
            "chat (.jsonl), or a ChatGPT or Open WebUI export (conversations.json).",
        )
    return _checked([c for c in chats if c.messages])


def _list_of(data: Any, key: str) -> bool:
    return isinstance(data, list) and bool(data) and all(isinstance(c, dict) for c in data) and key in data[0]


def _checked(chats: list[ImportedChat]) -> list[ImportedChat]:
    if not chats:
        raise ServiceError(Refusal.UNPROCESSABLE, "IMPORT_EMPTY", "The file holds no message to import.")
    total = sum(len(c.messages) for c in chats)
    if len(chats) > MAX_IMPORT_CHATS or total > MAX_IMPORT_MESSAGES:
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "IMPORT_TOO_LARGE",
            f"The file holds {len(chats)} chats and {total} messages: at most {MAX_IMPORT_CHATS} chats and "
            f"{MAX_IMPORT_MESSAGES} messages are imported at once.",
            chats=len(chats),
            messages=total,
            limit_chats=MAX_IMPORT_CHATS,
            limit_messages=MAX_IMPORT_MESSAGES,
        )
    if any(_unstorable([c.title, c.messages, c.summaries]) for c in chats):
        raise ServiceError(
            Refusal.INVALID,
            "TEXT_NOT_STORABLE",
            "The file holds text no database stores: a NUL character or a lone surrogate.",
        )
    return chats


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _unstorable(value: Any) -> bool:
    """Whether any text inside ``value`` (keys too) holds NUL or a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _plain(ref: str, role: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"ref": ref, "role": role, "content": text, "pinned": False, "meta": {}, **extra}


def _text_field(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(where, "is not text")
    return value


# -- our own document --------------------------------------------------------------------------------------


def _is_version(version: Any) -> bool:
    """Whether a regenerated reply's version has the shape the service stores: content, tool calls, meta."""
    return (
        isinstance(version, dict)
        and (version.get("content") is None or isinstance(version.get("content"), (str, list)))
        and (version.get("tool_calls") is None or isinstance(version.get("tool_calls"), list))
        and (version.get("meta") is None or isinstance(version.get("meta"), dict))
    )


def _our_message(n: int, m: Any) -> dict[str, Any]:
    where = f"messages[{n}]"
    if not isinstance(m, dict):
        raise _invalid(where, "is not an object")
    if m.get("role") not in ROLES:
        raise _invalid(f"{where}.role", f"must be one of {', '.join(ROLES)}")
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _invalid(f"{where}.content", "must be text or a list of parts")
    meta = m.get("meta") or {}
    versions = m.get("alternatives")
    if not isinstance(meta, dict) or (versions is not None and not isinstance(versions, list)):
        raise _invalid(where, "has a meta that is not an object or alternatives that are not a list")
    chosen = m.get("alternative")
    if versions and not (isinstance(chosen, int) and 0 <= chosen < len(versions)):
        raise _invalid(f"{where}.alternative", "does not name one of its alternatives")
    for k, version in enumerate(versions or []):
        if not _is_version(version):
            raise _invalid(f"{where}.alternatives[{k}]", "is not a version (content, tool_calls, meta)")
    return {
        "ref": str(m.get("id") or n),
        "seq": m.get("seq") if isinstance(m.get("seq"), int) else None,
        "role": m["role"],
        "content": content,
        "name": m.get("name"),
        "tool_calls": m.get("tool_calls"),
        "tool_call_id": m.get("tool_call_id"),
        "pinned": bool(m.get("pinned")),
        "meta": meta,
        "workspace": m.get("workspace"),
        "standing": bool(m.get("standing")),
        "alternatives": versions or None,
        "alternative": chosen if versions else None,
        "summary_ref": str(m["summary_id"]) if m.get("summary_id") is not None else None,
        "created_at": m.get("created_at"),
    }


def _ours(data: Mapping[str, Any]) -> ImportedChat:
    if data.get("version") != VERSION:
        raise _invalid("version", f"is {data.get('version')!r}; this contextshift reads version {VERSION}")
    chat = data.get("chat") or {}
    messages, summaries = data.get("messages"), data.get("summaries") or []
    if not isinstance(chat, dict) or not isinstance(messages, list) or not isinstance(summaries, list):
        raise _invalid("the document", "needs a chat object and lists of messages and summaries")
    out = ImportedChat(
        title=_text_field(chat.get("title"), "chat.title")[:500],
        source="contextshift",
        type=str(chat["type"]) if chat.get("type") in CHAT_TYPES else "chat",
        messages=[_our_message(n, m) for n, m in enumerate(messages)],
    )
    refs = {m["ref"] for m in out.messages}
    if len(refs) != len(out.messages):
        raise _invalid("messages", "hold the same id twice")
    for n, s in enumerate(summaries):
        if not isinstance(s, dict) or not isinstance(s.get("content"), str) or not isinstance(s.get("covers"), list):
            raise _invalid(f"summaries[{n}]", "needs its content (text) and covers (a list of message ids)")
        if not isinstance(s.get("workspaces") or [], list):
            raise _invalid(f"summaries[{n}].workspaces", "is not a list")
        if s.get("model") is not None and not (isinstance(s["model"], str) and len(s["model"]) <= 200):
            raise _invalid(f"summaries[{n}].model", "is not a model name (text, at most 200 characters)")
        out.summaries.append(
            {
                "ref": str(s.get("id") or f"summary-{n}"),
                "content": s["content"],
                "covers": [str(c) for c in s["covers"] if str(c) in refs],
                "workspaces": [str(w) for w in s.get("workspaces") or []],
                "model": s.get("model"),
                "superseded_by": str(s["superseded_by"]) if s.get("superseded_by") is not None else None,
                "anchor_seq": s.get("anchor_seq"),
                "created_at": s.get("created_at"),
            }
        )
    known = {s["ref"] for s in out.summaries}
    for m in out.messages:
        if m["summary_ref"] is not None and m["summary_ref"] not in known:
            raise _invalid(f"message {m['ref']}", "names a summary the file does not hold")
    return out


# -- SillyTavern -------------------------------------------------------------------------------------------


def _sillytavern(lines: list[Any]) -> ImportedChat:
    """A SillyTavern chat: a header line (``user_name``, ``character_name``), then one message a line."""
    header: dict[str, Any] = {}
    if lines and isinstance(lines[0], dict) and "mes" not in lines[0]:
        header, lines = lines[0], lines[1:]
    out = ImportedChat(title=f"{header.get('character_name') or 'SillyTavern'} (SillyTavern)", source="sillytavern")
    for n, line in enumerate(lines):
        if not isinstance(line, dict) or "mes" not in line:
            raise _invalid(f"line {n + 2}", "is not a SillyTavern message (it has no mes)")
        text = _text_field(line.get("mes"), f"line {n + 2}: mes")
        role = "user" if line.get("is_user") else "assistant"
        meta: dict[str, Any] = {"manualExcluded": True} if line.get("is_system") else {}
        message = _plain(str(n), role, text, name=str(line.get("name") or "")[:200] or None, meta=meta)
        swipes = line.get("swipes")
        if role == "assistant" and isinstance(swipes, list) and len(swipes) > 1:
            chosen = line.get("swipe_id")
            chosen = chosen if isinstance(chosen, int) and 0 <= chosen < len(swipes) else 0
            texts = [_text_field(s, f"line {n + 2}: swipes") for s in swipes]
            message["alternatives"] = [{"content": t, "tool_calls": None, "meta": {}} for t in texts]
            message["alternative"] = chosen
            message["content"] = texts[chosen]
        out.messages.append(message)
    return out


# -- ChatGPT and Open WebUI ----------------------------------------------------------------------------------


def _branch(nodes: Mapping[str, Any], current: Any, parent_key: str, where: str) -> list[Any]:
    """The nodes from the root to ``current`` (following ``parent_key`` back), oldest first."""
    path: list[Any] = []
    seen: set[str] = set()
    while current is not None:
        if not isinstance(current, str) or current in seen or len(seen) > MAX_IMPORT_MESSAGES:
            raise _invalid(where, "has a message tree that loops or names no message")
        seen.add(current)
        node = nodes.get(current)
        if not isinstance(node, dict):
            raise _invalid(where, f"names a message {current!r} it does not hold")
        path.append(node)
        current = node.get(parent_key)
    return path[::-1]


def _chatgpt_text(message: Mapping[str, Any]) -> str:
    content = message.get("content") or {}
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str))
    text = content.get("text")
    return text if isinstance(text, str) else ""


def _chatgpt(conversation: Any, n: int) -> ImportedChat:
    where = f"conversation {n + 1}"
    if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"), dict):
        raise _invalid(where, "has no mapping of messages")
    mapping = conversation["mapping"]
    current = conversation.get("current_node")
    if current is None:  # an old export without current_node: the newest leaf
        leaves = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("children")]
        current = leaves[-1] if leaves else None
    title = _text_field(conversation.get("title"), f"{where}: title") or "ChatGPT conversation"
    out = ImportedChat(title=title[:500], source="chatgpt")
    for node in _branch(mapping, current, "parent", where):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        text = _chatgpt_text(message)
        if role in ("user", "assistant", "system") and text.strip():
            out.messages.append(_plain(str(len(out.messages)), role, text))
    return out


def _openwebui(item: Any, n: int) -> ImportedChat:
    where = f"chat {n + 1}"
    chat = item.get("chat") if isinstance(item, dict) else None
    if not isinstance(chat, dict):
        raise _invalid(where, "has no chat object")
    history = chat.get("history")
    if isinstance(history, dict) and isinstance(history.get("messages"), dict):
        messages = _branch(history["messages"], history.get("currentId"), "parentId", where)
    elif isinstance(chat.get("messages"), list):
        messages = chat["messages"]
    else:
        raise _invalid(where, "has neither a history nor a list of messages")
    title = _text_field(item.get("title") or chat.get("title"), f"{where}: title") or "Open WebUI chat"
    out = ImportedChat(title=title[:500], source="openwebui")
    for m in messages:
        if not isinstance(m, dict):
            raise _invalid(where, "holds a message that is not an object")
        text = m.get("content")
        if m.get("role") in ("user", "assistant", "system") and isinstance(text, str) and text.strip():
            out.messages.append(_plain(str(len(out.messages)), m["role"], text))
    return out


__all__ = [
    "FORMAT",
    "MAX_IMPORT_CHATS",
    "MAX_IMPORT_MESSAGES",
    "VERSION",
    "ImportedChat",
    "content_text",
    "export_document",
    "export_markdown",
    "parse_import",
]
