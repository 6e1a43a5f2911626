"""The schema (SQLAlchemy 2 declarative). Migrations in ``migrations/versions`` create exactly this.

Rows are the repositories' return values: plain typed attributes, no lazy relationships except the
lorebook's entries (loaded eagerly), so a row stays usable after its session has closed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column, relationship

from ..core.vocabulary import (
    ATTEMPT_STATUSES,
    AUDIT_STATUSES,
    COMPACTION_STATUSES,
    COMPACTION_TRIGGERS,
    JOB_STATUSES,
    PREPARED,
    PROVIDER_KINDS,
    QUEUED,
    RUNNING,
)
from .secret_key import EncryptedText
from .types import UTCDateTime, json_type, new_id, utcnow

MODEL_TYPES = ("chat", "embedding", "image")
CHAT_TYPES = ("chat", "discuss", "pipeline")
ENTRY_POSITIONS = ("before", "after", "depth")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONValue = json_type()
JSONOrNull = json_type(none_as_null=True)
ID = String(32)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _id() -> MappedColumn[Any]:
    return mapped_column(ID, primary_key=True, default=new_id)


def _created() -> MappedColumn[Any]:
    return mapped_column(UTCDateTime, nullable=False, default=utcnow)


def _updated() -> MappedColumn[Any]:
    return mapped_column(UTCDateTime, nullable=False, default=utcnow, onupdate=utcnow)


class ProviderRow(Base):
    """An LLM provider endpoint. ``api_key`` is never part of ``repr`` and must never leave the service."""

    __tablename__ = "providers"
    __table_args__ = (CheckConstraint(_one_of("kind", PROVIDER_KINDS), name="kind"),)

    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    base_url: Mapped[str] = mapped_column(Text, nullable=False)
    #: Encrypted at rest with the service's secret key (N2); reads give the plain key, for the client only.
    api_key: Mapped[str | None] = mapped_column(EncryptedText, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True, server_default=true())
    #: T5: ask the provider's count_tokens endpoint (Anthropic) when an estimate is near the budget.
    count_tokens: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    #: N5: the longest wait for the provider (first byte, between stream chunks); the turn's deadline.
    timeout_seconds: Mapped[int] = mapped_column(Integer, nullable=False, default=60, server_default="60")
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key)

    def __repr__(self) -> str:
        return f"ProviderRow(id={self.id!r}, name={self.name!r}, kind={self.kind!r}, has_api_key={self.has_api_key})"


class ModelRow(Base):
    """A model offered by a provider."""

    __tablename__ = "models"
    __table_args__ = (CheckConstraint(_one_of("type", MODEL_TYPES), name="type"),)

    id: Mapped[str] = _id()
    provider_id: Mapped[str] = mapped_column(
        ID, ForeignKey("providers.id", ondelete="CASCADE"), nullable=False, index=True
    )
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    type: Mapped[str] = mapped_column(String(16), nullable=False, default="chat", server_default="chat")
    context_window: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True, server_default=true())
    tokenizer: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: V7: the strategy the compatible endpoints fit this model's requests with when a request names none.
    context_strategy: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[datetime] = _created()


class BotRow(Base):
    """A bot: prompt settings, its chat model and the lorebooks it uses."""

    __tablename__ = "bots"

    id: Mapped[str] = _id()
    #: N2: the user this belongs to (only they see it); what predates users belongs to the first admin.
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    chat_model_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("models.id", ondelete="SET NULL"), nullable=True, index=True
    )
    system_prompt: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    persona: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    context_strategy: Mapped[str] = mapped_column(
        String(100), nullable=False, default="truncate", server_default="truncate"
    )
    response_reserve: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    context_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    lorebook_ids: Mapped[list[str]] = mapped_column(JSONValue, nullable=False, default=list)
    template: Mapped[list[Any] | None] = mapped_column(JSONOrNull, nullable=True)
    author_note: Mapped[str | None] = mapped_column(Text, nullable=True)
    author_note_depth: Mapped[int] = mapped_column(Integer, nullable=False, default=4, server_default="4")
    compaction_enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True, server_default=true())
    compaction_threshold: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    compaction_ratio: Mapped[float] = mapped_column(Float, nullable=False, default=0.5, server_default="0.5")
    compaction_model_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("models.id", ondelete="SET NULL"), nullable=True, index=True
    )
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class LorebookRow(Base):
    """A named set of lorebook entries; ``entries`` are loaded with the lorebook, in list order."""

    __tablename__ = "lorebooks"

    id: Mapped[str] = _id()
    #: N2: the user this belongs to (only they see it); what predates users belongs to the first admin.
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = _created()
    entries: Mapped[list[LorebookEntryRow]] = relationship(
        order_by="LorebookEntryRow.idx",
        cascade="all, delete-orphan",
        passive_deletes=True,
        lazy="selectin",
    )


class LorebookEntryRow(Base):
    """One lorebook entry (P3). ``idx`` keeps the order the entries were given in."""

    __tablename__ = "lorebook_entries"
    __table_args__ = (CheckConstraint(_one_of("position", ENTRY_POSITIONS), name="position"),)

    id: Mapped[str] = _id()
    lorebook_id: Mapped[str] = mapped_column(
        ID, ForeignKey("lorebooks.id", ondelete="CASCADE"), nullable=False, index=True
    )
    idx: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    keys: Mapped[list[str]] = mapped_column(JSONValue, nullable=False, default=list)
    secondary_keys: Mapped[list[str]] = mapped_column(JSONValue, nullable=False, default=list)
    content: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    constant: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True, server_default=true())
    order: Mapped[int] = mapped_column(Integer, nullable=False, default=100, server_default="100")
    position: Mapped[str] = mapped_column(String(16), nullable=False, default="before", server_default="before")
    depth: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ChatRow(Base):
    """A chat session. ``history_version`` grows with every history edit; ``last_seq`` is the seq counter."""

    __tablename__ = "chats"
    __table_args__ = (
        CheckConstraint(_one_of("type", CHAT_TYPES), name="type"),
        Index("ix_chats_bot_id_updated_at", "bot_id", "updated_at"),
    )

    id: Mapped[str] = _id()
    #: N2: the user this belongs to (only they see it); what predates users belongs to the first admin.
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True)
    bot_id: Mapped[str] = mapped_column(ID, ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    type: Mapped[str] = mapped_column(String(16), nullable=False, default="chat", server_default="chat")
    title: Mapped[str] = mapped_column(String(500), nullable=False, default="", server_default="")
    history_version: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    last_seq: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    #: C10: who runs this chat's compaction pass, and until when the lease holds (across processes).
    compaction_lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    compaction_lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: When the last automatic pass failed (the cooldown runs from here).
    compaction_failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: N5: the generation whose turn runs in this chat, and until when its (renewed) lease holds.
    turn_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    turn_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: C14: provider-reported prompt tokens and the cached part of them, over all generations.
    usage_input_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    usage_cached_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    #: C14: tool name → how many calls the assistant made.
    tools_used: Mapped[dict[str, int] | None] = mapped_column(JSONOrNull, nullable=True)
    #: Maintained counts (kept by every write to the chat's messages, so a turn never counts the chat):
    #: ``raw_messages`` neither pinned nor summarized; ``summarized_messages`` a summary stands for, neither
    #: pinned nor standing (those come back raw in prompts).
    raw_messages: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    summarized_messages: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    #: The chat's own chat model, overriding the bot's ``chat_model_id`` (null: the bot's).
    model_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("models.id", ondelete="SET NULL"), nullable=True, index=True
    )
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class MemoryRow(Base):
    """A stored memory of a bot, or of one chat of that bot when ``chat_id`` is set (P4)."""

    __tablename__ = "memories"

    id: Mapped[str] = _id()
    bot_id: Mapped[str] = mapped_column(ID, ForeignKey("bots.id", ondelete="CASCADE"), nullable=False, index=True)
    chat_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("chats.id", ondelete="CASCADE"), nullable=True, index=True
    )
    content: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _created()


class MessageRow(Base):
    """A stored chat message; ``seq`` orders a chat's messages and is never reused."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("uq_messages_chat_id_seq", "chat_id", "seq", unique=True),
        Index("ix_messages_chat_id_pinned_seq", "chat_id", "pinned", "seq"),
        Index("ix_messages_chat_id_summary_id_seq", "chat_id", "summary_id", "seq"),
        Index("ix_messages_chat_id_standing_seq", "chat_id", "standing", "seq"),
        #: A compaction pass's oldest raw messages in order (migration 0024).
        Index(
            "ix_messages_chat_id_seq_unsummarized",
            "chat_id",
            "seq",
            postgresql_where=text("summary_id IS NULL"),
            sqlite_where=text("summary_id IS NULL"),
        ),
    )

    id: Mapped[str] = _id()
    chat_id: Mapped[str] = mapped_column(ID, ForeignKey("chats.id", ondelete="CASCADE"), nullable=False)
    seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    content: Mapped[Any] = mapped_column(JSONOrNull, nullable=True)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONOrNull, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    pinned: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    meta: Mapped[dict[str, Any]] = mapped_column(JSONValue, nullable=False, default=dict)
    workspace: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: A standing instruction of the user's (G4b): kept in every prompt and never folded into a summary.
    standing: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    #: The summary that stands for this message in prompts (C8: raw messages are never deleted).
    summary_id: Mapped[str | None] = mapped_column(ID, nullable=True)
    created_at: Mapped[datetime] = _created()
    #: Every version of a regenerated reply (``content``, ``tool_calls``, the reply's ``meta``), oldest first;
    #: null until a reply is regenerated. ``alternative`` is the one the row shows (and prompts use).
    alternatives: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONOrNull, nullable=True)
    alternative: Mapped[int | None] = mapped_column(Integer, nullable=True)


class MessageTokensRow(Base):
    """T4: the token count of one message's text under one tokenizer profile."""

    __tablename__ = "message_tokens"

    message_id: Mapped[str] = mapped_column(ID, ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True)
    profile: Mapped[str] = mapped_column(String(100), primary_key=True)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False)


class TokenCalibrationRow(Base):
    """T5: the correction factor of one model's token estimates under one profile, shared by instances."""

    __tablename__ = "token_calibrations"

    model_id: Mapped[str] = mapped_column(ID, ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    profile: Mapped[str] = mapped_column(String(100), primary_key=True)
    factor: Mapped[float] = mapped_column(Float, nullable=False)
    spread: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    calls: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    updated_at: Mapped[datetime] = _updated()


class AuditRow(Base):
    """A1–A3: the prompt-context audit of a chat's latest generation (one per chat)."""

    __tablename__ = "prompt_context_audits"
    __table_args__ = (CheckConstraint(_one_of("status", AUDIT_STATUSES), name="status"),)

    chat_id: Mapped[str] = mapped_column(ID, ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True)
    generation_id: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=PREPARED)
    error_code: Mapped[str | None] = mapped_column(String(128), nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONValue, nullable=False, default=dict)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSONOrNull, nullable=True)
    created_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: N5: the service instance running the generation (its audit is closed if that instance dies).
    instance_id: Mapped[str | None] = mapped_column(ID, nullable=True, index=True)


class ProxyAuditRow(Base):
    """V7: the audit of one call to the OpenAI-compatible endpoint, kept until ``expires_at``."""

    __tablename__ = "proxy_audits"
    __table_args__ = (
        CheckConstraint(_one_of("status", AUDIT_STATUSES), name="status"),
        Index("ix_proxy_audits_user_id_created_at", "user_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    #: Who made the call: only they may read the audit.
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=PREPARED)
    error_code: Mapped[str | None] = mapped_column(String(128), nullable=True)
    excluded_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    payload: Mapped[dict[str, Any]] = mapped_column(JSONValue, nullable=False, default=dict)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSONOrNull, nullable=True)
    created_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, index=True)


__all__ = [
    "AUDIT_STATUSES",
    "CHAT_TYPES",
    "ENTRY_POSITIONS",
    "MODEL_TYPES",
    "PROVIDER_KINDS",
    "AuditRow",
    "Base",
    "BotRow",
    "ChatRow",
    "LorebookEntryRow",
    "LorebookRow",
    "MemoryRow",
    "MessageRow",
    "MessageTokensRow",
    "ModelRow",
    "ProviderRow",
    "ProxyAuditRow",
    "TokenCalibrationRow",
]


INSTANCE_ROLES = ("api", "api+jobs", "worker")
#: On PostgreSQL the job engine's own tables (procrastinate's schema, applied by migration 0015) start with this.
ENGINE_TABLE_PREFIX = "procrastinate_"


class SummaryRow(Base):
    """A committed compaction summary; it stands in prompts where the first message it covers was."""

    __tablename__ = "summaries"
    __table_args__ = (Index("ix_summaries_chat_id_superseded_by", "chat_id", "superseded_by"),)

    id: Mapped[str] = _id()
    chat_id: Mapped[str] = mapped_column(ID, ForeignKey("chats.id", ondelete="CASCADE"), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    covers: Mapped[list[str]] = mapped_column(JSONValue, nullable=False, default=list)
    workspaces: Mapped[list[str]] = mapped_column(JSONValue, nullable=False, default=list)
    anchor_seq: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: A later summary that rolled this one up; only summaries with none are active.
    superseded_by: Mapped[str | None] = mapped_column(ID, nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = _created()


class CompactionLogRow(Base):
    """C12: one compaction run (one or more passes)."""

    __tablename__ = "compaction_logs"
    __table_args__ = (
        CheckConstraint(_one_of("status", COMPACTION_STATUSES), name="status"),
        CheckConstraint(_one_of("trigger", COMPACTION_TRIGGERS), name="trigger"),
        Index("ix_compaction_logs_bot_id_started_at", "bot_id", "started_at"),
        Index("ix_compaction_logs_chat_id_started_at", "chat_id", "started_at"),
    )

    id: Mapped[str] = _id()
    bot_id: Mapped[str] = mapped_column(ID, ForeignKey("bots.id", ondelete="CASCADE"), nullable=False)
    chat_id: Mapped[str] = mapped_column(ID, ForeignKey("chats.id", ondelete="CASCADE"), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    trigger: Mapped[str] = mapped_column(String(16), nullable=False)
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    message_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    passes: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    input_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(128), nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: N5: the instance running the pass; a dead instance's running log is closed as interrupted.
    instance_id: Mapped[str | None] = mapped_column(ID, nullable=True, index=True)


class JobRow(Base):
    """V8: background work of the embedded runner (SQLite): one job waiting, running or ended.

    A job with a ``lock`` (``chat:<id>`` for a compaction pass) has at most one copy queued and one running
    at a time; the partial unique indexes say so to the database. On PostgreSQL the job engine keeps its own
    tables (``procrastinate_*``) instead.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_one_of("status", JOB_STATUSES), name="status"),
        Index("ix_jobs_status_run_after", "status", "run_after"),
        Index(
            "uq_jobs_lock_queued",
            "lock",
            unique=True,
            sqlite_where=text(f"status = '{QUEUED}'"),
            postgresql_where=text(f"status = '{QUEUED}'"),
        ),
        Index(
            "uq_jobs_lock_running",
            "lock",
            unique=True,
            sqlite_where=text(f"status = '{RUNNING}'"),
            postgresql_where=text(f"status = '{RUNNING}'"),
        ),
    )

    id: Mapped[str] = _id()
    task: Mapped[str] = mapped_column(String(64), nullable=False)
    args: Mapped[dict[str, Any]] = mapped_column(JSONValue, nullable=False, default=dict)
    lock: Mapped[str | None] = mapped_column(String(100), nullable=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=QUEUED)
    #: Attempts started so far (the first run is attempt 1).
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    #: Not before this time (a retry's backoff).
    run_after: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: N5: the instance running the job; it renews ``lease_until`` with its heartbeat.
    instance_id: Mapped[str | None] = mapped_column(ID, nullable=True, index=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class JobAttemptRow(Base):
    """V8: one attempt at a job, of either runner (``local`` or ``procrastinate``), with its error if it failed.

    The error is a stable code and a message of ours, never an upstream body (N2).
    """

    __tablename__ = "job_attempts"
    __table_args__ = (
        CheckConstraint(_one_of("status", ATTEMPT_STATUSES), name="status"),
        Index("ix_job_attempts_runner_job_id", "runner", "job_id"),
        Index("ix_job_attempts_started_at", "started_at"),
    )

    id: Mapped[str] = _id()
    runner: Mapped[str] = mapped_column(String(16), nullable=False)
    job_id: Mapped[str] = mapped_column(String(32), nullable=False)
    task: Mapped[str] = mapped_column(String(64), nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=RUNNING)
    error_code: Mapped[str | None] = mapped_column(String(128), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: N5: the instance running the attempt; a dead instance's running attempt is closed as interrupted.
    instance_id: Mapped[str | None] = mapped_column(ID, nullable=True, index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


USER_ROLES = ("admin", "user")
TOKEN_KINDS = ("api", "session")


class UserRow(Base):
    """N2: someone who signs in. ``admin`` also manages providers, models and users."""

    __tablename__ = "users"
    __table_args__ = (CheckConstraint(_one_of("role", USER_ROLES), name="role"),)

    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(100), nullable=False, unique=True)
    role: Mapped[str] = mapped_column(String(16), nullable=False, default="user")
    disabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class ApiTokenRow(Base):
    """A user's token: an API token (``api``) or a browser session (``session``). Only its SHA-256 is stored."""

    __tablename__ = "api_tokens"
    __table_args__ = (CheckConstraint(_one_of("kind", TOKEN_KINDS), name="kind"),)

    id: Mapped[str] = _id()
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False, default="", server_default="")
    kind: Mapped[str] = mapped_column(String(16), nullable=False, default="api", server_default="api")
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = _created()
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: V7: the strategy ``/v1`` fits this token's requests with when a request names none (before the model's).
    context_strategy: Mapped[str | None] = mapped_column(String(100), nullable=True)
    #: N2: the API token a browser session was opened with (none for an API token); revoking it ends the session.
    opened_by: Mapped[str | None] = mapped_column(
        ID, ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=True, index=True
    )


class InstanceRow(Base):
    """N5: a running service instance; it renews ``heartbeat_at`` (and its leases) every few seconds.

    An instance whose heartbeat stopped is dead: its leases are free, and its unfinished audits, compaction
    logs and jobs are closed or handed back by whichever instance notices first.
    """

    __tablename__ = "instances"

    id: Mapped[str] = _id()
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow, index=True)
    #: V8: ``api`` (serves, only queues jobs), ``api+jobs`` (serves and runs jobs) or ``worker`` (runs jobs).
    role: Mapped[str | None] = mapped_column(String(16), nullable=True)
