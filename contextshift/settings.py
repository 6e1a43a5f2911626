"""The service's settings (issue 24): every ``CONTEXTSHIFT_*`` environment variable, read once into one frozen
object that the command line and :func:`~contextshift.api.app.create_app` pass on through constructors.

This module imports nothing else of the package, so any layer may take a :class:`Settings`. A field that is
``None`` was not set: whoever uses it applies its documented default (docs/operations.md, "Settings", is the
table of them all). Values that cannot be right (a negative body limit, a session of 0 days) are refused here,
when the settings are read, with the variable's name in the message.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

log = logging.getLogger("contextshift.settings")

#: The prefix of every variable.
PREFIX: Final = "CONTEXTSHIFT_"
#: The longest browser session a setting may ask for, in days.
MAX_SESSION_DAYS: Final = 3650
#: The largest margin of an uncalibrated estimate a setting may ask for (a share): above it is a typo.
MAX_ESTIMATE_MARGIN: Final = 0.5
#: The heartbeat's defaults (storage/liveness.py uses the same), to check that the period is under the expiry.
DEFAULT_HEARTBEAT_SECONDS: Final = 10.0
DEFAULT_HEARTBEAT_EXPIRY_SECONDS: Final = 30.0
_ON: Final = frozenset({"1", "true", "yes", "on"})
_OFF: Final = frozenset({"0", "false", "no", "off"})


def _text(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(PREFIX + name, "").strip()
    return value or None


def _names(environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped."""
    return tuple(part.strip() for part in environ.get(PREFIX + name, "").split(",") if part.strip())


def _positive_int(environ: Mapping[str, str], name: str, what: str) -> int | None:
    raw = _text(environ, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{PREFIX}{name} must be a positive number of {what}, not {raw!r}")
    return value


def _number(
    environ: Mapping[str, str], name: str, what: str, low: float, high: float = math.inf, *, above_low: bool = False
) -> float | None:
    """A number from ``low`` to ``high`` (``above_low``: ``low`` itself excluded); ``what`` says so in the error."""
    raw = _text(environ, name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high or (above_low and value == low):
        raise ValueError(f"{PREFIX}{name} must be {what}, not {raw!r}")
    return value


def _switch(environ: Mapping[str, str], name: str) -> bool:
    """On unless ``0``/``false``/``no``/``off``; ``1``/``true``/``yes``/``on`` or unset: on; anything else refused."""
    raw = (_text(environ, name) or "on").lower()
    if raw not in _ON | _OFF:
        raise ValueError(f"{PREFIX}{name} must be one of 1, true, yes, on, 0, false, no, off, not {raw!r}")
    return raw in _ON


def _instance_id(environ: Mapping[str, str]) -> str | None:
    raw = _text(environ, "INSTANCE_ID")
    if raw is not None and (len(raw) > 32 or not all(c.isascii() and (c.isalnum() or c in "-_") for c in raw)):
        raise ValueError(f"{PREFIX}INSTANCE_ID must be 1-32 characters of letters, digits, '-' or '_', not {raw!r}")
    return raw


def _heartbeat(environ: Mapping[str, str]) -> tuple[float | None, float | None]:
    """The heartbeat's period and expiry; the period must be shorter than the expiry (their defaults: 10, 30)."""
    interval = _number(environ, "HEARTBEAT_SECONDS", "a positive number of seconds", 0.0, above_low=True)
    expiry = _number(environ, "HEARTBEAT_EXPIRY_SECONDS", "a positive number of seconds", 0.0, above_low=True)
    if not (interval or DEFAULT_HEARTBEAT_SECONDS) < (expiry or DEFAULT_HEARTBEAT_EXPIRY_SECONDS):
        raise ValueError(
            f"{PREFIX}HEARTBEAT_SECONDS ({interval or DEFAULT_HEARTBEAT_SECONDS:g}) must be shorter than "
            f"{PREFIX}HEARTBEAT_EXPIRY_SECONDS ({expiry or DEFAULT_HEARTBEAT_EXPIRY_SECONDS:g})"
        )
    return interval, expiry


def _hours(environ: Mapping[str, str], name: str) -> float | None:
    """A number of hours; below 0 counts as 0; not a number: unset, with a warning (as it always was)."""
    raw = _text(environ, name)
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        log.warning("%s%s=%r is not a number; using the default", PREFIX, name, raw)
        return None


def _session_days(environ: Mapping[str, str]) -> float | None:
    raw = _text(environ, "SESSION_DAYS")
    if raw is None:
        return None
    try:
        days = float(raw)
    except ValueError:
        days = math.nan
    if not 0 < days <= MAX_SESSION_DAYS:
        raise ValueError(
            f"{PREFIX}SESSION_DAYS must be a number of days above 0 and at most {MAX_SESSION_DAYS}, not {raw!r}"
        )
    return days


@dataclass(frozen=True, slots=True)
class Settings:
    """Every ``CONTEXTSHIFT_*`` variable (the field's name, upper-cased, after the prefix). ``None`` or an
    empty tuple: not set."""

    #: ``CONTEXTSHIFT_DATABASE_URL``: the database (``--database`` overrides it).
    database_url: str | None = None
    #: ``CONTEXTSHIFT_DATA_DIR``: the data directory (SQLite file, key file, the address ``serve`` records).
    data_dir: str | None = None
    #: ``CONTEXTSHIFT_SECRET_KEY``: the Fernet key (checked by storage/secret_key.py).
    secret_key: str | None = None
    #: ``CONTEXTSHIFT_ADMIN_TOKEN``: the first admin's token (checked by service/accounts.py).
    admin_token: str | None = None
    #: ``CONTEXTSHIFT_ALLOWED_HOSTS``: more ``Host`` names the service answers to.
    allowed_hosts: tuple[str, ...] = ()
    #: ``CONTEXTSHIFT_PROVIDER_HOSTS``: the hosts a provider's base URL may name (checked by service/provider_hosts.py).
    provider_hosts: tuple[str, ...] = ()
    #: ``CONTEXTSHIFT_LOGIN_LIMIT``: failed sign-ins before 429 (a ``limits`` string).
    login_limit: str | None = None
    #: ``CONTEXTSHIFT_LOGIN_LIMIT_STORAGE``: where the sign-in counts live.
    login_limit_storage: str | None = None
    #: ``CONTEXTSHIFT_SESSION_DAYS``: how long a browser session lasts.
    session_days: float | None = None
    #: ``CONTEXTSHIFT_FORWARDED_ALLOW_IPS``: the proxies whose forwarded headers are believed.
    forwarded_allow_ips: str | None = None
    #: ``CONTEXTSHIFT_MAX_BODY_BYTES``: the largest request body.
    max_body_bytes: int | None = None
    #: ``CONTEXTSHIFT_PROXY_AUDIT_HOURS``: how long an endpoint audit is kept.
    proxy_audit_hours: float | None = None
    #: ``CONTEXTSHIFT_READ_CACHE_SECONDS``: the read cache's longest age, 0 or more (0: no cache).
    read_cache_seconds: float | None = None
    #: ``CONTEXTSHIFT_ESTIMATE_MARGIN``: the margin of an uncalibrated estimate, a share from 0 to 0.5.
    estimate_margin: float | None = None
    #: ``CONTEXTSHIFT_EMBEDDINGS``: ``minilm`` or ``none``.
    embeddings: str | None = None
    #: ``CONTEXTSHIFT_COMPACTION_WAIT_SECONDS``: how long a turn waits for another request's running pass.
    compaction_wait_seconds: float | None = None
    #: ``CONTEXTSHIFT_INSTANCE_ID``: this instance's id, 1-32 of ``[A-Za-z0-9_-]``.
    instance_id: str | None = None
    #: ``CONTEXTSHIFT_HEARTBEAT_SECONDS``: the heartbeat's period, positive, shorter than the expiry.
    heartbeat_seconds: float | None = None
    #: ``CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS``: when a silent instance is dead, positive.
    heartbeat_expiry_seconds: float | None = None
    #: ``CONTEXTSHIFT_RELEASE_MEMORY``: ``0`` (or ``false``, ``no``, ``off``) turns off giving memory back after
    #: large requests.
    release_memory: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings in ``environ`` (default: the process environment), read once.

        Raises:
            ValueError: a value that cannot be right, naming its variable.
        """
        env = os.environ if environ is None else environ
        interval, expiry = _heartbeat(env)
        checked: dict[str, object] = {
            "allowed_hosts": _names(env, "ALLOWED_HOSTS"),
            "provider_hosts": _names(env, "PROVIDER_HOSTS"),
            "session_days": _session_days(env),
            "max_body_bytes": _positive_int(env, "MAX_BODY_BYTES", "bytes"),
            "proxy_audit_hours": _hours(env, "PROXY_AUDIT_HOURS"),
            "compaction_wait_seconds": _number(env, "COMPACTION_WAIT_SECONDS", "a number of seconds, 0 or more", 0),
            "read_cache_seconds": _number(env, "READ_CACHE_SECONDS", "a number of seconds, 0 or more", 0),
            "estimate_margin": _number(
                env, "ESTIMATE_MARGIN", f"a share from 0 to {MAX_ESTIMATE_MARGIN}", 0.0, MAX_ESTIMATE_MARGIN
            ),
            "instance_id": _instance_id(env),
            "heartbeat_seconds": interval,
            "heartbeat_expiry_seconds": expiry,
            "release_memory": _switch(env, "RELEASE_MEMORY"),
        }
        text = {f.name: _text(env, f.name.upper()) for f in fields(cls) if f.name not in checked}
        return cls(**text, **checked)  # type: ignore[arg-type]

    @staticmethod
    def variables() -> tuple[str, ...]:
        """The name of every variable, in the order of the fields."""
        return tuple(PREFIX + f.name.upper() for f in fields(Settings))


__all__ = ["MAX_SESSION_DAYS", "PREFIX", "Settings"]
