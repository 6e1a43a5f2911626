"""A busy database answers 503 ``DATABASE_BUSY`` with ``Retry-After`` in the error envelope, as the document
says (N5, V1), never the 500 of an error that escaped.

Another process holds the SQLite file's write lock (a plain ``sqlite3`` connection in ``BEGIN IMMEDIATE``) past the
service's busy timeout. Both places a request writes answer 503: the sign-in noting a token's use (in a
middleware, before any route; at most once a minute per token, so a token used within the minute signs in with a
read) and a route's own write. Reads answer meanwhile. Once the lock is released the same requests succeed.
SQLite only: PostgreSQL has no file lock another process can hold this way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.storage import Database
from tests.api.conftest import ADMIN_TOKEN, Server, bearer

#: Seconds the service waits for the lock before it gives up (short: every refused request waits this long).
BUSY_TIMEOUT = 0.3


@pytest.fixture()
def database_file(tmp_path: Path) -> Path:
    return tmp_path / "api.db"


@pytest.fixture()
def http(database_file: Path) -> Iterator[httpx.Client]:
    database = Database(f"sqlite:///{database_file}", sqlite_busy_timeout=BUSY_TIMEOUT)
    with (
        Server(create_app(database=database, admin_token=ADMIN_TOKEN)) as url,
        httpx.Client(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as client,
    ):
        yield client


class WriteLock:
    """Another process's hold on the file's write lock."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)

    def __enter__(self) -> WriteLock:
        self.connection.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *_exc: object) -> None:
        self.connection.execute("ROLLBACK")
        self.connection.close()


def assert_busy(response: httpx.Response, document: dict[str, Any], method: str, path: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json() == {
        "error": {"code": "DATABASE_BUSY", "message": response.json()["error"]["message"], "params": {}}
    }
    documented = document["paths"][path][method]["responses"]["503"]
    assert documented["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
    assert "Retry-After" in documented["headers"] and "`DATABASE_BUSY`" in documented["description"]


def test_a_database_another_process_holds_answers_503_with_retry_after(http: httpx.Client, database_file: Path) -> None:
    document = http.get("/openapi.json").json()
    assert http.post("/api/v2/bots", json={"name": "before"}).status_code == 201
    unused = http.post("/api/v2/tokens", json={"name": "never used"}).json()["secret"]
    with WriteLock(database_file):
        # A token never used must note its first use: the sign-in's write waits for the lock, then gives up.
        first_use = http.get("/api/v2/bots", headers=bearer(unused))
        assert_busy(first_use, document, "get", "/api/v2/bots")
        assert_busy(http.post("/api/v2/bots", json={"name": "during"}), document, "post", "/api/v2/bots")
        # A token used within the minute signs in with a read, and a route that only reads answers.
        assert [b["name"] for b in http.get("/api/v2/bots").json()["bots"]] == ["before"]
        assert http.get("/healthz").status_code == 200  # it reads without waiting for the writer
    assert [b["name"] for b in http.get("/api/v2/bots").json()["bots"]] == ["before"]  # nothing half-written
    assert http.post("/api/v2/bots", json={"name": "after"}).status_code == 201


def test_every_operation_that_reads_the_database_documents_503_with_retry_after(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    missing = [
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
        and path != "/healthz"
        and "Retry-After" not in operation["responses"].get("503", {}).get("headers", {})
    ]
    assert not missing, missing
    # /healthz never answers DATABASE_BUSY: its 503 is its own Health body, for a database that does not answer
    health_503 = document["paths"]["/healthz"]["get"]["responses"]["503"]
    assert health_503["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Health"}
