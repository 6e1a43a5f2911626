"""Users and their tokens (N2). A token's secret is shown once, when it is made; only its SHA-256 is stored.

Secrets are 256 random bits, so one fast hash is enough (a slow password hash protects guessable secrets,
and these are not guessable); the lookup is by the hash, through a unique index.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from ..errors import InvalidValue
from ..tables import TOKEN_KINDS, USER_ROLES, ApiTokenRow, UserRow
from ..types import utcnow
from ._common import Validator, apply_changes, boolean, choice, execute_rowcount, optional_text, text_value

#: What every secret starts with, so a leaked one is recognizable (and secret scanners can look for it).
SECRET_PREFIX = "cs_"
#: The name of the admin a fresh database gets.
BOOTSTRAP_ADMIN = "admin"
#: ``last_used_at`` is written at most this often per token (not one write per request).
LAST_USED_RESOLUTION = timedelta(minutes=1)

_USER_FIELDS: dict[str, Validator] = {
    "name": partial(text_value, required=True, max_length=100),
    "role": partial(choice, allowed=USER_ROLES),
    "disabled": boolean,
}

#: What an API token's owner may change (``TokenRepository.update``).
_TOKEN_FIELDS: dict[str, Validator] = {
    "name": partial(text_value, max_length=200),
    "context_strategy": partial(optional_text, max_length=100),
}


def new_secret() -> str:
    """A fresh token secret: ``cs_`` and 43 URL-safe characters (256 bits)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of a secret: its SHA-256 in hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class NameTaken(InvalidValue):
    """Another user already has this name."""

    code = "USER_NAME_TAKEN"

    def __init__(self, name: str) -> None:
        super().__init__("name", f"a user named {name!r} already exists")


@dataclass(frozen=True)
class Issued:
    """A token just made: its row and, this once, its secret."""

    token: ApiTokenRow
    secret: str


class UserRepository:
    """Create, read, change and delete users."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(self, *, name: str, role: str = "user") -> UserRow:
        row = UserRow()
        apply_changes(row, {"name": name, "role": role, "disabled": False}, _USER_FIELDS)
        await self._check_name(row.name)
        self.session.add(row)
        await self.session.flush()
        return row

    async def _check_name(self, name: str, user_id: str | None = None) -> None:
        query = select(UserRow.id).where(UserRow.name == name)
        if user_id is not None:
            query = query.where(UserRow.id != user_id)
        if await self.session.scalar(query) is not None:
            raise NameTaken(name)

    async def get(self, user_id: str) -> UserRow | None:
        return await self.session.get(UserRow, user_id)

    async def by_name(self, name: str) -> UserRow | None:
        return await self.session.scalar(select(UserRow).where(UserRow.name == name))

    async def list_all(self) -> Sequence[UserRow]:
        return (await self.session.scalars(select(UserRow).order_by(UserRow.created_at, UserRow.id))).all()

    async def count(self) -> int:
        return int(await self.session.scalar(select(func.count()).select_from(UserRow)) or 0)

    async def first_admin(self) -> UserRow | None:
        """The oldest enabled admin: the one the service bootstrapped (and who owns what predates users)."""
        query = (
            select(UserRow)
            .where(UserRow.role == "admin", UserRow.disabled.is_(False))
            .order_by(UserRow.created_at, UserRow.id)
            .limit(1)
        )
        return await self.session.scalar(query)

    async def active_admins(self) -> int:
        query = select(func.count()).select_from(UserRow).where(UserRow.role == "admin", UserRow.disabled.is_(False))
        return int(await self.session.scalar(query) or 0)

    async def update(self, user_id: str, changes: Mapping[str, Any]) -> UserRow | None:
        """Set the given fields (``name``, ``role``, ``disabled``)."""
        row = await self.get(user_id)
        if row is None:
            return None
        if "name" in changes:
            await self._check_name(text_value("name", changes["name"], required=True, max_length=100), user_id)
        apply_changes(row, changes, _USER_FIELDS)
        try:
            await self.session.flush()
        except IntegrityError as error:  # a concurrent rename to the same name
            raise NameTaken(str(changes.get("name"))) from error
        return row

    async def delete(self, user_id: str) -> bool:
        """Delete a user with their tokens (and, by foreign-key cascade, everything they own)."""
        return await execute_rowcount(self.session, delete(UserRow).where(UserRow.id == user_id)) > 0


async def default_owner(session: AsyncSession) -> str:
    """The owner of a row made without one (tools, imports, tests): the first admin, as for rows that predate
    users. On a database without users yet, that admin is created here (the service's start gives it a token)."""
    users = UserRepository(session)
    admin = await users.first_admin()
    if admin is None:
        admin = await users.by_name(BOOTSTRAP_ADMIN) or await users.create(name=BOOTSTRAP_ADMIN, role="admin")
    return admin.id


def stale(token: ApiTokenRow) -> bool:
    """Whether the token's ``last_used_at`` is older than :data:`LAST_USED_RESOLUTION` (or unset): only then is
    a use written, so that signing in is a read, not a write, on nearly every request."""
    return token.last_used_at is None or utcnow() - token.last_used_at >= LAST_USED_RESOLUTION


class TokenRepository:
    """Issue, find, list and revoke tokens."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def issue(
        self,
        user_id: str,
        *,
        name: str = "",
        kind: str = "api",
        secret: str | None = None,
        context_strategy: str | None = None,
        opened_by: str | None = None,
    ) -> Issued:
        """A new token for the user; ``secret`` (e.g. a configured admin token) instead of a random one;
        ``context_strategy``: what ``/v1`` fits its requests with when a request names none; ``opened_by``: the
        API token a browser session (``kind="session"``) is opened with, whose revocation ends it."""
        value = secret if secret is not None else new_secret()
        row = ApiTokenRow(
            user_id=user_id,
            name=text_value("name", name, max_length=200),
            kind=choice("kind", kind, TOKEN_KINDS),
            token_hash=hash_secret(value),
            context_strategy=optional_text("context_strategy", context_strategy, max_length=100),
            opened_by=opened_by,
        )
        self.session.add(row)
        await self.session.flush()
        return Issued(row, value)

    async def find(self, secret: str, *, touch: bool = True) -> tuple[ApiTokenRow, UserRow] | None:
        """The token with this secret and its user, or None; notes when it was last used (unless ``touch`` is
        False: then a session that only reads can look, and :meth:`touch` notes it when :func:`stale`)."""
        query = (
            select(ApiTokenRow, UserRow)
            .join(UserRow, UserRow.id == ApiTokenRow.user_id)
            .where(ApiTokenRow.token_hash == hash_secret(secret))
        )
        found = (await self.session.execute(query)).first()
        if found is None:
            return None
        token, user = found
        if touch and stale(token):
            token.last_used_at = utcnow()
            await self.session.flush()
        return token, user

    async def touch(self, token_id: str) -> None:
        """Note that the token was used now."""
        statement = (
            update(ApiTokenRow)
            .where(ApiTokenRow.id == token_id)
            .values(last_used_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(statement)

    async def count_for(self, user_id: str, kind: str = "api") -> int:
        query = (
            select(func.count())
            .select_from(ApiTokenRow)
            .where(ApiTokenRow.user_id == user_id, ApiTokenRow.kind == kind)
        )
        return int(await self.session.scalar(query) or 0)

    async def exists(self, secret: str) -> bool:
        query = select(ApiTokenRow.id).where(ApiTokenRow.token_hash == hash_secret(secret))
        return await self.session.scalar(query) is not None

    async def list_for(self, user_id: str, kind: str = "api") -> Sequence[ApiTokenRow]:
        query = (
            select(ApiTokenRow)
            .where(ApiTokenRow.user_id == user_id, ApiTokenRow.kind == kind)
            .order_by(ApiTokenRow.created_at, ApiTokenRow.id)
        )
        return (await self.session.scalars(query)).all()

    async def update(self, user_id: str, token_id: str, changes: Mapping[str, Any]) -> ApiTokenRow | None:
        """Change one of the user's API tokens (``name``, ``context_strategy``); None when they have no such token."""
        row = await self.session.get(ApiTokenRow, token_id)
        if row is None or row.user_id != user_id or row.kind != "api":
            return None
        apply_changes(row, changes, _TOKEN_FIELDS)
        await self.session.flush()
        return row

    async def revoke(self, user_id: str, token_id: str, kind: str | None = None) -> bool:
        """Delete one of the user's tokens (of ``kind``, when given) and the browser sessions it opened (N2: the
        foreign key cascades too; this also holds where foreign keys are not enforced); False when the user has
        no such token."""
        mine = [ApiTokenRow.id == token_id, ApiTokenRow.user_id == user_id]
        if kind is not None:
            mine.append(ApiTokenRow.kind == kind)
        if await self.session.scalar(select(ApiTokenRow.id).where(*mine)) is None:
            return False
        await self.session.execute(delete(ApiTokenRow).where(ApiTokenRow.opened_by == token_id))
        return await execute_rowcount(self.session, delete(ApiTokenRow).where(*mine)) > 0

    async def sessions_for(self, user_id: str, since: datetime) -> Sequence[tuple[ApiTokenRow, str | None]]:
        """The user's browser sessions started at or after ``since`` (the unexpired ones), newest first, each
        with the name of the API token that opened it."""
        opener = aliased(ApiTokenRow)
        query = (
            select(ApiTokenRow, opener.name)
            .outerjoin(opener, opener.id == ApiTokenRow.opened_by)
            .where(ApiTokenRow.user_id == user_id, ApiTokenRow.kind == "session", ApiTokenRow.created_at >= since)
            .order_by(ApiTokenRow.created_at.desc(), ApiTokenRow.id)
        )
        return [(row, name) for row, name in (await self.session.execute(query)).all()]

    async def delete_sessions_before(self, cutoff: datetime) -> int:
        """Delete the browser sessions started before ``cutoff`` (expired ones); how many went."""
        statement = delete(ApiTokenRow).where(ApiTokenRow.kind == "session", ApiTokenRow.created_at < cutoff)
        return await execute_rowcount(self.session, statement)

    async def revoke_secret(self, secret: str) -> bool:
        statement = delete(ApiTokenRow).where(ApiTokenRow.token_hash == hash_secret(secret))
        return await execute_rowcount(self.session, statement) > 0
