"""Storage adapter of the chat service (V2): SQLite by default, PostgreSQL by URL, Alembic migrations.

``Database`` owns the engine and sessions; the repositories in ``contextshift.storage.repositories``
do the reading and writing on a session::

    db = Database()                      # CONTEXTSHIFT_DATABASE_URL or the user's SQLite file
    await db.start()                     # migrate to head, start its heartbeat, close what dead ones left
    async with db.session() as session:  # one transaction
        chat = await Repositories(session).chats.create(bot_id=bot_id)
"""

from __future__ import annotations

from .database import Database
from .errors import InvalidValue, NotFound, StorageError
from .migrate import head_revision
from .repositories import (
    AuditRepository,
    BotRepository,
    ChatRepository,
    LorebookRepository,
    MemoryRepository,
    MessagePage,
    MessageRepository,
    ModelRepository,
    NameTaken,
    ProviderRepository,
    RecentWindow,
    Repositories,
    normalize_error_code,
    row_to_message,
)
from .urls import default_database_url, display_url, normalize_url

__all__ = [
    "AuditRepository",
    "BotRepository",
    "ChatRepository",
    "Database",
    "InvalidValue",
    "LorebookRepository",
    "MemoryRepository",
    "MessagePage",
    "MessageRepository",
    "ModelRepository",
    "NameTaken",
    "NotFound",
    "ProviderRepository",
    "RecentWindow",
    "Repositories",
    "StorageError",
    "default_database_url",
    "display_url",
    "head_revision",
    "normalize_error_code",
    "normalize_url",
    "row_to_message",
]
