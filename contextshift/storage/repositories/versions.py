"""A reply's versions (regenerate, continue): what ``messages.alternatives`` holds and which one a row shows.

Pure functions on one loaded :class:`MessageRow`: they change the row in memory and never touch the session;
:class:`~.messages.MessageRepository` loads the row, calls one of them and records the history change. A
version is ``{"content", "tool_calls", "meta"}``; the row's reply keys of ``meta`` (:data:`REPLY_KEYS`) are the
version's, every other key (``manualExcluded``) is the user's and stays across versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidValue
from ..tables import MessageRow
from ._common import integer
from .convert import check_json

__all__ = ["REPLY_KEYS", "add_version", "choose_version", "extend_version", "show", "version_of", "write_version"]

#: The ``meta`` keys a turn writes on its reply: they belong to one version of a reply (its generation, usage,
#: whether it is partial, what went wrong); every other key (``manualExcluded``) is the user's, kept across versions.
REPLY_KEYS = frozenset(
    {
        "generation_id",
        "reply_to",
        "finish_reason",
        "usage",
        "token_budget",
        "context_strategy",
        "excluded_context_count",
        "partial",
        "partial_reason",
        "error_code",
        "error",
    }
)


def version_of(row: MessageRow) -> dict[str, Any]:
    """The row's reply as one version (a redo's error belongs to the attempt, not to the version)."""
    meta = {k: v for k, v in (row.meta or {}).items() if k in REPLY_KEYS and k != "error"}
    return {"content": row.content, "tool_calls": row.tool_calls, "meta": meta}


def show(row: MessageRow, versions: list[dict[str, Any]], index: int) -> None:
    """Make ``versions`` the row's alternatives and show version ``index`` (the user's ``meta`` keys stay)."""
    shown = versions[index]
    own = {k: v for k, v in (row.meta or {}).items() if k not in REPLY_KEYS}
    row.content = shown.get("content", "")
    row.tool_calls = shown.get("tool_calls") or None
    row.meta = {**own, **dict(shown.get("meta") or {})}
    row.alternatives = versions
    row.alternative = index


def _new(version: Mapping[str, Any]) -> dict[str, Any]:
    new = {
        "content": version.get("content", ""),
        "tool_calls": version.get("tool_calls"),
        "meta": dict(version.get("meta") or {}),
    }
    check_json("alternative", new)
    return new


def _index(index: int, versions: list[dict[str, Any]]) -> int:
    index = integer("alternative", index)
    if not 0 <= index < len(versions):
        raise InvalidValue("alternative", f"must be from 0 to {len(versions) - 1}")
    return index


def add_version(row: MessageRow, version: Mapping[str, Any]) -> None:
    """Add ``version`` as the last of the row's versions (the earlier ones kept) and show it."""
    versions = list(row.alternatives or [version_of(row)])
    versions.append(_new(version))
    show(row, versions, len(versions) - 1)


def choose_version(row: MessageRow, index: int) -> bool:
    """Show version ``index`` (``InvalidValue`` when there is no such version); True when the row changed."""
    versions = list(row.alternatives or [version_of(row)])
    index = _index(index, versions)
    if index == (row.alternative or 0):
        return False
    show(row, versions, index)
    return True


def extend_version(row: MessageRow, text: str, meta: Mapping[str, Any]) -> None:
    """Continue the shown reply: ``text`` is added to its content and ``meta`` replaces its reply keys."""
    content = row.content if isinstance(row.content, str) else ""
    versions = list(row.alternatives or [])
    self_meta = {k: v for k, v in (row.meta or {}).items() if k not in REPLY_KEYS}
    row.content = content + text
    row.meta = {**self_meta, **dict(meta)}
    if versions:
        versions[row.alternative or 0] = version_of(row)
        row.alternatives = versions


def write_version(row: MessageRow, index: int | None, version: Mapping[str, Any]) -> int:
    """Write version ``index`` in place and show it, or add it as a new last version when ``index`` is None;
    a reply with one version keeps ``alternatives`` empty. The version's index."""
    new = _new(version)
    versions = list(row.alternatives or [version_of(row)])
    if index is None:
        versions.append(new)
        index = len(versions) - 1
    else:
        index = _index(index, versions)
        versions[index] = new
    if len(versions) == 1 and not row.alternatives:
        own = {k: v for k, v in (row.meta or {}).items() if k not in REPLY_KEYS}
        row.content = new["content"]
        row.tool_calls = new["tool_calls"] or None
        row.meta = {**own, **new["meta"]}
    else:
        show(row, versions, index)
    return index
