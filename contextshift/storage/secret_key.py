"""The service's secret key (N2): it encrypts provider API keys at rest and signs the browser's CSRF cookie.

``CONTEXTSHIFT_SECRET_KEY`` (a Fernet key: 32 url-safe base64-encoded bytes) when set, which every instance
sharing one PostgreSQL database must be given; otherwise ``secret.key`` in the data directory
(``CONTEXTSHIFT_DATA_DIR``), created on first use with mode 0600 (readable by its owner only). Both settings are
read by ``Settings`` and handed to :func:`current_key`; this module reads no environment.

The column type :class:`EncryptedText` encrypts with the key of the engine it is bound through: ``Database``
(and its migrations) :func:`bind_key` their engine's dialect to the key they were given; an engine bound to none
uses the key file of the default data directory.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import logging
import os
import weakref
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from ..core.errors import ContextShiftError
from .urls import data_dir

log = logging.getLogger(__name__)

SECRET_KEY_ENV = "CONTEXTSHIFT_SECRET_KEY"
KEY_FILE = "secret.key"


class SecretKeyError(ContextShiftError, RuntimeError):
    """The configured key (or key file) is not a Fernet key."""

    code = "SECRET_KEY_INVALID"


def _checked(value: bytes, where: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(value)
    except (binascii.Error, ValueError) as error:
        raise SecretKeyError(f"{where} is not a Fernet key (32 url-safe base64-encoded bytes)") from error
    if len(raw) != 32:
        raise SecretKeyError(f"{where} is not a Fernet key (32 url-safe base64-encoded bytes)")
    return value


def key_file(directory: Path | None = None) -> Path:
    return (directory or data_dir()) / KEY_FILE


def load_secret_key(directory: Path | None = None, configured: str | None = None) -> bytes:
    """The Fernet key: ``configured`` (``CONTEXTSHIFT_SECRET_KEY``) when given, else the key file of ``directory``
    (made, 0600, when missing)."""
    configured = (configured or "").strip()
    if configured:
        return _checked(configured.encode("ascii", "replace"), SECRET_KEY_ENV)
    path = key_file(directory)
    try:
        return _checked(path.read_bytes().strip(), str(path))
    except FileNotFoundError:
        pass
    key = base64.urlsafe_b64encode(os.urandom(32))
    draft = path.with_name(f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key + b"\n")
    try:  # a hard link appears whole or not at all: of two processes starting together, one key wins
        os.link(draft, path)
    except FileExistsError:
        key = _checked(path.read_bytes().strip(), str(path))
    finally:
        draft.unlink()
    return key


@functools.lru_cache(maxsize=8)
def _key_for(configured: str, directory: str) -> bytes:
    return load_secret_key(Path(directory), configured)


def current_key(configured: str | None = None, directory: str | Path | None = None) -> bytes:
    """:func:`load_secret_key` of the settings ``configured`` (``CONTEXTSHIFT_SECRET_KEY``) and ``directory``
    (``CONTEXTSHIFT_DATA_DIR``; None: the default data directory), read once per pair."""
    return _key_for((configured or "").strip(), str(data_dir(directory)))


#: The key each engine's column values are encrypted with, by the engine's dialect (see the module's doc).
_BOUND: weakref.WeakKeyDictionary[Dialect, bytes] = weakref.WeakKeyDictionary()


def bind_key(dialect: Dialect, key: bytes) -> None:
    """Encrypt and decrypt the :class:`EncryptedText` values of the engine of ``dialect`` with ``key``."""
    _BOUND[dialect] = _checked(key, "the secret key")


def key_of(dialect: Dialect) -> bytes:
    """The key :func:`bind_key` gave the engine of ``dialect``, else :func:`current_key` of the defaults."""
    return _BOUND.get(dialect) or current_key()


def derived_secret(key: bytes, purpose: str) -> str:
    """A secret for one purpose (e.g. ``csrf``) derived from the key, so the key itself is used only once."""
    return hmac.new(key, purpose.encode(), hashlib.sha256).hexdigest()


@functools.cache
def _fernet(key: bytes) -> Fernet:
    return Fernet(key)


#: What an encrypted value starts with; a value without it was stored before encryption (and is migrated).
ENCRYPTED_PREFIX = "fernet:"


def encrypt(value: str, key: bytes | None = None) -> str:
    """``value`` encrypted with the secret key (Fernet: AES-128-CBC with an HMAC), as text for a column."""
    token = _fernet(key or current_key()).encrypt(value.encode("utf-8"))
    return ENCRYPTED_PREFIX + token.decode("ascii")


def decrypt(stored: str, key: bytes | None = None) -> str | None:
    """The plain value of :func:`encrypt`'s text; a value from before encryption as it is; None (with a warning
    in the log, never the value) when it was encrypted with another key."""
    if not stored.startswith(ENCRYPTED_PREFIX):
        return stored
    try:
        return _fernet(key or current_key()).decrypt(stored[len(ENCRYPTED_PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, ValueError):
        log.warning("a stored provider key cannot be decrypted with this secret key: set it again")
        return None


class EncryptedText(TypeDecorator[str]):
    """Text encrypted at rest with the service's secret key (provider API keys, N2)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else encrypt(value, key_of(dialect))

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else decrypt(value, key_of(dialect))
