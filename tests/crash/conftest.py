"""Crash tests (N5): a real ``contextshift serve`` process, killed with SIGKILL and started again.

Each test gets its own database: a SQLite file, or a PostgreSQL database of its own on the server named by
``CONTEXTSHIFT_TEST_POSTGRES_URL``. The fake provider (in this process, over a real socket) holds a stream or
a compaction pass open at the moment of the kill. The served process beats every 0.2 s and counts an instance
dead 1 s after its last beat (``CONTEXTSHIFT_HEARTBEAT_*``), so recovery is quick; the tests bound their waits
by counting polls, never by the clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import ADMIN_TOKEN
from tests.databases import PG_ENV, PG_SKIP, _pg_execute, _plain_dsn, _run_apart
from tests.fakes.fixtures import fake_provider, fake_provider_server

__all__ = ["fake_provider", "fake_provider_server"]

#: The installed command, next to this interpreter (the venv's ``bin``).
COMMAND = str(Path(sys.executable).with_name("contextshift"))
#: Polls of 0.1 s: the bound on "usable again within a minute".
POLLS_PER_MINUTE = 600
FAST_RECOVERY = {"CONTEXTSHIFT_HEARTBEAT_SECONDS": "0.2", "CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS": "1"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """``contextshift serve`` as a child process on ``database``; :meth:`start`, :meth:`kill`."""

    database: str
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    #: More arguments of ``serve`` (``--no-jobs``).
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    starts: int = 0

    @property
    def headers(self) -> dict[str, str]:
        token = self.env.get("CONTEXTSHIFT_ADMIN_TOKEN")
        return {"Authorization": f"Bearer {token}"} if token else {}

    def start(self, **env: str) -> str:
        assert self.process is None, "already running"
        port = _free_port()
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"\n== start {self.starts}\n".encode())
            self.process = subprocess.Popen(
                [COMMAND, "serve", "--port", str(port), "--database", self.database, *self.args],
                env={**os.environ, **FAST_RECOVERY, **self.env, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{port}"
        for _ in range(POLLS_PER_MINUTE):
            if self.process.poll() is not None:
                raise RuntimeError(f"contextshift serve exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self.url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"contextshift serve did not answer:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler, no cleanup, sockets dropped by the kernel."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
            self.process = None

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=30)


@dataclass
class Working:
    """``contextshift worker`` as a child process on ``database``; its JSON log lines in ``log``."""

    database: str
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.process is None, "already running"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [COMMAND, "worker", "--database", self.database],
                env={**os.environ, **FAST_RECOVERY, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        for _ in range(POLLS_PER_MINUTE):
            if self.process.poll() is not None:
                raise RuntimeError(f"contextshift worker exited with {self.process.returncode}:\n{self.text()}")
            if self.events("worker_started"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"contextshift worker did not start:\n{self.text()}")

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def lines(self) -> list[dict[str, Any]]:
        """The worker's JSON log lines (anything else it printed is left out)."""
        found = []
        for line in self.text().splitlines():
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    found.append(value)
        return found

    def events(self, *names: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") in names]

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database for one crash test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}"
        return
    with _pg_database("cs_crash") as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database of its own (the job engine's tests: workers need PostgreSQL)."""
    with _pg_database("cs_workers") as url:
        yield url


@contextlib.contextmanager
def _pg_database(prefix: str) -> Iterator[str]:
    """A new database ``<prefix>_<hex>`` on the server of ``CONTEXTSHIFT_TEST_POSTGRES_URL``, dropped after."""
    server = os.environ.get(PG_ENV, "").strip()
    if not server:
        pytest.skip(PG_SKIP)
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    _run_apart(_pg_execute(_plain_dsn(server), f'CREATE DATABASE "{name}"'))
    try:
        yield _plain_dsn(server, name)
    finally:
        _run_apart(_pg_execute(_plain_dsn(server), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    service = Served(database_url, tmp_path / "serve.log", {"CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN})
    try:
        yield service
    finally:
        service.stop()
