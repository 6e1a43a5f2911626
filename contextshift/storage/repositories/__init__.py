"""Repositories: async data access, one class per aggregate, each built on an ``AsyncSession``.

They return the ORM rows of ``contextshift.storage.tables`` (readable after the session ends, since
sessions do not expire on commit), raise ``NotFound`` / ``InvalidValue`` for bad input, and never
commit: the caller's ``Database.session()`` block does.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from .audits import GENERATION_FAILED, GENERATION_INTERRUPTED, AuditRepository, normalize_error_code
from .bots import BOT_DEFAULTS, BotRepository
from .calibrations import CalibrationRepository
from .chats import ChatRepository
from .compaction import CompactionRepository
from .convert import merge_meta, message_values, row_to_message
from .jobs import JobAttemptRepository, JobRepository
from .lorebooks import LorebookRepository
from .memories import MemoryRepository
from .messages import MessagePage, MessageRepository
from .providers import ModelRepository, ProviderRepository
from .proxy_audits import ProxyAuditRepository
from .turns import TurnRepository
from .users import Issued, NameTaken, TokenRepository, UserRepository, hash_secret, new_secret
from .window import RecentWindow, recent_window, token_counts


class Repositories:
    """Every repository on one session: ``repos = Repositories(session); await repos.chats.get(id)``."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.providers = ProviderRepository(session)
        self.models = ModelRepository(session)
        self.bots = BotRepository(session)
        self.lorebooks = LorebookRepository(session)
        self.memories = MemoryRepository(session)
        self.chats = ChatRepository(session)
        self.messages = MessageRepository(session)
        self.audits = AuditRepository(session)
        self.compaction = CompactionRepository(session)
        self.users = UserRepository(session)
        self.tokens = TokenRepository(session)
        self.calibrations = CalibrationRepository(session)
        self.proxy_audits = ProxyAuditRepository(session)
        self.turns = TurnRepository(session)
        self.jobs = JobRepository(session)
        self.job_attempts = JobAttemptRepository(session)


__all__ = [
    "BOT_DEFAULTS",
    "GENERATION_FAILED",
    "GENERATION_INTERRUPTED",
    "AuditRepository",
    "BotRepository",
    "CalibrationRepository",
    "ChatRepository",
    "CompactionRepository",
    "Issued",
    "JobAttemptRepository",
    "JobRepository",
    "LorebookRepository",
    "MemoryRepository",
    "MessagePage",
    "MessageRepository",
    "ModelRepository",
    "NameTaken",
    "ProviderRepository",
    "ProxyAuditRepository",
    "RecentWindow",
    "Repositories",
    "TokenRepository",
    "TurnRepository",
    "UserRepository",
    "hash_secret",
    "merge_meta",
    "message_values",
    "new_secret",
    "normalize_error_code",
    "recent_window",
    "row_to_message",
    "token_counts",
]
