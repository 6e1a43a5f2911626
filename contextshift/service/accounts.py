"""The first admin (N2): authentication is always on, and a fresh service still needs no setup.

On start, when the database has no user, an admin named ``admin`` is created. Its first token is
``CONTEXTSHIFT_ADMIN_TOKEN`` when that is set (so scripts and tests know it); otherwise a random one, which
the caller shows once (as a login URL) because only its hash is kept. When users exist and
``CONTEXTSHIFT_ADMIN_TOKEN`` is set, it is made a token of the first admin if it is not one already; when it
is not and the first admin has no API token at all (a database migrated from before users, whose rows were
given to a new admin), a random one is made and shown as on a first start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.exc import IntegrityError

from ..storage import Database, NameTaken, Repositories
from ..storage.repositories.users import BOOTSTRAP_ADMIN, default_owner
from .errors import Refusal, ServiceError

ADMIN_TOKEN_ENV = "CONTEXTSHIFT_ADMIN_TOKEN"
ADMIN_NAME = BOOTSTRAP_ADMIN
#: How long a browser session lasts; an older one signs no one in and is deleted (``jobs``: ``cleanup.sessions``).
SESSION_LIFETIME = timedelta(days=30)
#: A configured admin token shorter than this is refused at start: it could be guessed.
MIN_ADMIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class Bootstrap:
    """What start-up did: ``secret`` is a generated admin token to show once, else None. ``admin_id`` is None
    only when users exist but none is an enabled admin (the API refuses to leave that state)."""

    admin_id: str | None
    secret: str | None


def configured_admin_token(explicit: str | None = None) -> str | None:
    """``explicit`` (``CONTEXTSHIFT_ADMIN_TOKEN``, through ``Settings``), stripped, or None; too short a token is
    an error."""
    value = (explicit or "").strip()
    if not value:
        return None
    if len(value) < MIN_ADMIN_TOKEN_LENGTH or any(c.isspace() or not c.isprintable() for c in value):
        raise ServiceError(
            Refusal.MISCONFIGURED,
            "ADMIN_TOKEN_TOO_WEAK",
            f"{ADMIN_TOKEN_ENV} must be at least {MIN_ADMIN_TOKEN_LENGTH} printable characters without spaces.",
        )
    return value


async def bootstrap(db: Database, admin_token: str | None = None) -> Bootstrap:
    """Make sure an admin exists (see the module's doc); ``admin_token`` as from :func:`configured_admin_token`."""
    for attempt in range(2):
        try:
            async with db.session() as session:
                return await _bootstrap(Repositories(session), admin_token)
        except (IntegrityError, NameTaken):  # another instance bootstrapped at the same moment: its admin exists
            if attempt:
                raise
    raise AssertionError("unreachable")


async def _bootstrap(repos: Repositories, admin_token: str | None) -> Bootstrap:
    # Counted before the admin is looked up: under READ COMMITTED an instance bootstrapping at the same moment
    # may commit in between, and then its admin is found (never "users, but no admin").
    empty = await repos.users.count() == 0
    admin = await repos.users.first_admin()
    if admin is None and empty:
        admin = await repos.users.create(name=ADMIN_NAME, role="admin")
        issued = await repos.tokens.issue(admin.id, name="first start", secret=admin_token)
        return Bootstrap(admin.id, None if admin_token is not None else issued.secret)
    if admin is None:
        return Bootstrap(None, None)
    if admin_token is not None:
        if not await repos.tokens.exists(admin_token):
            await repos.tokens.issue(admin.id, name=ADMIN_TOKEN_ENV, secret=admin_token)
        return Bootstrap(admin.id, None)
    if await repos.tokens.count_for(admin.id) == 0:
        return Bootstrap(admin.id, (await repos.tokens.issue(admin.id, name="first start")).secret)
    return Bootstrap(admin.id, None)


async def create_token(db: Database, user_name: str | None = None, *, name: str = "command line") -> tuple[str, str]:
    """A new API token for the user named ``user_name`` (default: the first admin); (user name, secret).

    Raises ``ServiceError`` ``USER_NOT_FOUND`` for an unknown name."""
    async with db.session() as session:
        repos = Repositories(session)
        if user_name is None:
            user = await repos.users.get(await default_owner(session))
        else:
            user = await repos.users.by_name(user_name)
        if user is None:
            raise ServiceError(Refusal.NOT_FOUND, "USER_NOT_FOUND", f"No user named {user_name!r}.", name=user_name)
        issued = await repos.tokens.issue(user.id, name=name)
        return user.name, issued.secret
