"""Lorebooks and their entries (P3). Returns ``LorebookRow`` objects with ``entries`` loaded, in order.

Entries are a lorebook's value: ``update`` with ``entries`` replaces the whole list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..errors import InvalidValue
from ..tables import ENTRY_POSITIONS, LorebookEntryRow, LorebookRow
from ._common import boolean, choice, execute_rowcount, integer, string_list, text_value
from .users import default_owner

#: Depth used for a ``depth`` entry that does not give one.
DEFAULT_ENTRY_DEPTH = 4

_ENTRY_DEFAULTS: dict[str, Any] = {
    "secondary_keys": [],
    "constant": False,
    "enabled": True,
    "order": 100,
    "position": "before",
    "depth": None,
}
_ENTRY_KEYS = frozenset({"keys", "content", *_ENTRY_DEFAULTS})


def entry_row(index: int, entry: Mapping[str, Any]) -> LorebookEntryRow:
    """Validate one entry dict (``keys``, ``content`` and ``_ENTRY_DEFAULTS``' keys) into a row."""
    prefix = f"entries[{index}]"
    if not isinstance(entry, Mapping):
        raise InvalidValue(prefix, "must be an object")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise InvalidValue(f"{prefix}.{unknown[0]}", "is not an entry field")
    values = {**_ENTRY_DEFAULTS, **entry}
    position = choice(f"{prefix}.position", values["position"], ENTRY_POSITIONS)
    depth = values["depth"]
    if position == "depth" and depth is None:
        depth = DEFAULT_ENTRY_DEPTH
    if depth is not None:
        depth = integer(f"{prefix}.depth", depth, minimum=0)
    return LorebookEntryRow(
        idx=index,
        keys=string_list(f"{prefix}.keys", values.get("keys", [])),
        secondary_keys=string_list(f"{prefix}.secondary_keys", values["secondary_keys"]),
        content=text_value(f"{prefix}.content", values.get("content")),
        constant=boolean(f"{prefix}.constant", values["constant"]),
        enabled=boolean(f"{prefix}.enabled", values["enabled"]),
        order=integer(f"{prefix}.order", values["order"]),
        position=position,
        depth=depth,
    )


def _entry_rows(entries: Iterable[Mapping[str, Any]]) -> list[LorebookEntryRow]:
    if isinstance(entries, str | bytes | Mapping):
        raise InvalidValue("entries", "must be a list of entries")
    return [entry_row(i, e) for i, e in enumerate(entries)]


class LorebookRepository:
    """CRUD for lorebooks with their entries."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(
        self, *, name: str, entries: Iterable[Mapping[str, Any]] = (), owner_id: str | None = None
    ) -> LorebookRow:
        """A lorebook of ``owner_id`` (default: the first admin)."""
        row = LorebookRow(name=text_value("name", name, required=True, max_length=200))
        row.owner_id = owner_id or await default_owner(self.session)
        row.entries = _entry_rows(entries)
        self.session.add(row)
        await self.session.flush()
        return row

    async def get(self, lorebook_id: str) -> LorebookRow | None:
        return await self.session.get(LorebookRow, lorebook_id)

    async def get_many(self, lorebook_ids: Iterable[str]) -> list[LorebookRow]:
        """The lorebooks with these ids, in the order asked; unknown ids are skipped."""
        ids = list(dict.fromkeys(lorebook_ids))
        if not ids:
            return []
        found = {r.id: r for r in (await self.session.scalars(select(LorebookRow).where(LorebookRow.id.in_(ids))))}
        return [found[i] for i in ids if i in found]

    async def list_all(self, *, owner_id: str | None = None) -> Sequence[LorebookRow]:
        """Every lorebook, oldest first; only one user's with ``owner_id``."""
        query = select(LorebookRow).order_by(LorebookRow.created_at, LorebookRow.id)
        if owner_id is not None:
            query = query.where(LorebookRow.owner_id == owner_id)
        return (await self.session.scalars(query)).all()

    async def update(
        self, lorebook_id: str, *, name: str | None = None, entries: Iterable[Mapping[str, Any]] | None = None
    ) -> LorebookRow | None:
        """Rename and/or replace all entries; ``None`` leaves that part as it is."""
        row = await self.get(lorebook_id)
        if row is None:
            return None
        new_name = None if name is None else text_value("name", name, required=True, max_length=200)
        new_entries = None if entries is None else _entry_rows(entries)
        if new_name is not None:
            row.name = new_name
        if new_entries is not None:
            row.entries = new_entries
        await self.session.flush()
        return row

    async def delete(self, lorebook_id: str) -> bool:
        """Delete a lorebook and its entries. Bots keep the id in ``lorebook_ids``; it is skipped."""
        return await execute_rowcount(self.session, delete(LorebookRow).where(LorebookRow.id == lorebook_id)) > 0
