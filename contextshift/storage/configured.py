"""The :class:`~contextshift.storage.Database` a :class:`~contextshift.settings.Settings` describes: the one place
the storage settings become constructor arguments (``serve``, ``worker``, ``token`` and ``create_app`` use it)."""

from __future__ import annotations

from ..settings import Settings
from .database import Database
from .secret_key import current_key
from .urls import default_database_url


def configured_database(settings: Settings, url: str | None = None, *, instance: bool = True) -> Database:
    """The database of ``url`` (``--database``), else ``CONTEXTSHIFT_DATABASE_URL``, else the data directory's
    SQLite file, with the settings' secret key, read cache and heartbeat. ``instance``: a service instance (it
    takes ``CONTEXTSHIFT_INSTANCE_ID``); a one-off command (``token``) is not one and gets a fresh id."""
    return Database(
        url or settings.database_url or default_database_url(settings.data_dir),
        instance_id=settings.instance_id if instance else None,
        heartbeat_interval=settings.heartbeat_seconds,
        heartbeat_expiry=settings.heartbeat_expiry_seconds,
        read_cache_ttl=settings.read_cache_seconds,
        secret_key=current_key(settings.secret_key, settings.data_dir),
    )


__all__ = ["configured_database"]
