"""Prompt-context audits (A1–A3): one per chat, prepared before the provider call, finished once.

``prepare`` replaces the chat's previous audit atomically (an upsert); ``finish`` is one conditional
UPDATE, so a finish from an older generation, or a second finish, changes nothing and returns False.
Returns ``AuditRow`` objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, exists, func, literal, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.vocabulary import FAILED, FINISHED_AUDIT_STATUSES, PREPARED
from ..errors import InvalidValue, NotFound
from ..tables import AuditRow, ChatRow
from ..types import utcnow
from ._common import dialect_insert, execute_rowcount, json_object, text_value
from .convert import check_json

#: The statuses an audit may end in (``core/vocabulary.py``'s, kept under this name for the endpoint's audits).
TERMINAL_STATUSES = FINISHED_AUDIT_STATUSES
GENERATION_FAILED = "GENERATION_FAILED"
GENERATION_INTERRUPTED = "GENERATION_INTERRUPTED"

_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,127}")
_PAYLOAD_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def normalize_error_code(code: object) -> str:
    """``code`` when it is an ``UPPER_SNAKE`` code (``^[A-Z][A-Z0-9_]{0,127}$``), else ``GENERATION_FAILED``.

    Keeps anything that is not a stable code (an upstream message, a body) out of the audit.
    """
    if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
        return code
    return GENERATION_FAILED


class AuditRepository:
    """The audit of each chat's latest generation."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def prepare(self, chat_id: str, generation_id: str, payload: Mapping[str, Any]) -> AuditRow:
        """Start the audit of ``generation_id``, replacing whatever audit the chat had (status ``prepared``)."""
        generation_id = text_value("generation_id", generation_id, required=True, max_length=64)
        data = json_object("payload", payload)
        check_json("payload", data)
        if not (await self.session.execute(select(exists().where(ChatRow.id == chat_id)))).scalar():
            raise NotFound("chat", chat_id)
        values: dict[str, Any] = {
            "chat_id": chat_id,
            "generation_id": generation_id,
            "status": PREPARED,
            "error_code": None,
            "payload": data,
            "usage": None,
            "created_at": utcnow(),
            "finished_at": None,
            "instance_id": self.session.info.get("instance_id"),  # N5: closed if this instance dies
        }
        insert = dialect_insert(self.session)(AuditRow).values(**values)
        statement = insert.on_conflict_do_update(
            index_elements=[AuditRow.chat_id],
            set_={k: getattr(insert.excluded, k) for k in values if k != "chat_id"},
        ).returning(AuditRow)
        result = await self.session.scalars(statement, execution_options={"populate_existing": True})
        row: AuditRow = result.one()
        return row

    async def finish(
        self,
        chat_id: str,
        generation_id: str,
        status: str,
        error_code: str | None = None,
        usage: Mapping[str, Any] | None = None,
        payload_updates: Mapping[str, Any] | None = None,
    ) -> bool:
        """End the audit with a terminal status; False when it is not this generation's prepared audit.

        ``error_code`` is normalized (:func:`normalize_error_code`); a ``failed`` audit without one gets
        ``GENERATION_FAILED``. ``payload_updates`` set top-level payload keys (identifier-like names).
        """
        if status not in TERMINAL_STATUSES:
            raise InvalidValue("status", f"must be one of {', '.join(TERMINAL_STATUSES)}")
        code = normalize_error_code(error_code) if error_code is not None else None
        if status == FAILED and code is None:
            code = GENERATION_FAILED
        values: dict[str, Any] = {"status": status, "error_code": code, "finished_at": utcnow()}
        if usage is not None:
            values["usage"] = json_object("usage", usage)
            check_json("usage", values["usage"])
        if payload_updates:
            values["payload"] = self._merged_payload(json_object("payload_updates", payload_updates))
        statement = (
            update(AuditRow)
            .where(
                AuditRow.chat_id == chat_id,
                AuditRow.generation_id == generation_id,
                AuditRow.status == PREPARED,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return await execute_rowcount(self.session, statement) == 1

    def _merged_payload(self, updates: dict[str, Any]) -> ColumnElement[Any]:
        for key in updates:
            if not _PAYLOAD_KEY.fullmatch(key):
                raise InvalidValue("payload_updates", f"key {key!r} must be an identifier")
        check_json("payload_updates", updates)
        if self.session.get_bind().dialect.name == "postgresql":
            return AuditRow.payload.op("||", return_type=JSONB())(literal(updates, JSONB()))
        args: list[Any] = [AuditRow.payload]
        for key, value in updates.items():
            args += [f"$.{key}", func.json(json.dumps(value, ensure_ascii=False))]
        return func.json_set(*args)

    async def get(self, chat_id: str) -> AuditRow | None:
        """The chat's audit (fresh from the database), or None before its first generation."""
        statement = select(AuditRow).where(AuditRow.chat_id == chat_id)
        result = await self.session.scalars(statement, execution_options={"populate_existing": True})
        return result.one_or_none()
