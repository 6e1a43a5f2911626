"""N2 provider keys: encrypted at rest, never following a provider to a new address, only to allowed hosts;
the files that hold them are their owner's alone."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from contextshift.settings import Settings
from contextshift.storage import Database, Repositories
from contextshift.storage.secret_key import ENCRYPTED_PREFIX, key_file
from tests.api.conftest import Service, serving
from tests.databases import Backend
from tests.fakes.server import FakeProvider

KEY = "sk-live-SECRET-provider-key-4242"


async def _stored_keys(service: Service) -> list[str]:
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:
            return list((await session.execute(text("SELECT api_key FROM providers"))).scalars().all())
    finally:
        await database.close()


async def test_a_provider_key_is_encrypted_at_rest_and_still_used(service: Service) -> None:
    ids = await service.setup_chat()
    await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"api_key": KEY})
    stored = await _stored_keys(service)
    assert stored and all(value.startswith(ENCRYPTED_PREFIX) and KEY not in value for value in stored)
    from tests.fakes import Reply

    service.fake.script(Reply("ok"))
    reply = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert reply.status_code == 200
    assert service.fake.last.headers.get("authorization") == f"Bearer {KEY}"  # decrypted for the client only
    if service.backend.name == "sqlite":
        path = Path(service.backend.url.removeprefix("sqlite:///"))
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for file in path.parent.glob(f"{path.name}*"):
            data = file.read_bytes()
            assert KEY.encode() not in data and b"sk-test-KEY-789" not in data, file


async def test_a_new_base_url_without_a_new_key_clears_the_key(service: Service) -> None:
    ids = await service.setup_chat()
    provider = f"/api/v2/providers/{ids['provider']}"
    renamed = (await service.http.patch(provider, json={"name": "renamed"})).json()["provider"]
    assert renamed["has_api_key"] is True  # a rename keeps it
    same = (await service.http.patch(provider, json={"base_url": service.fake.base_url})).json()["provider"]
    assert same["has_api_key"] is True  # the same address keeps it
    moved = (await service.http.patch(provider, json={"base_url": "http://127.0.0.1:9/v1"})).json()["provider"]
    assert moved["has_api_key"] is False
    assert await _stored_keys(service) == [None]
    both = await service.http.patch(provider, json={"base_url": service.fake.base_url, "api_key": KEY})
    assert both.json()["provider"]["has_api_key"] is True


async def test_a_new_kind_without_a_new_key_clears_the_key(service: Service) -> None:
    ids = await service.setup_chat()
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:
            row = await Repositories(session).providers.update(ids["provider"], {"kind": "anthropic"})
            assert row is not None and row.api_key is None
    finally:
        await database.close()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/v1", "gopher://x", "javascript:alert(1)"])
async def test_a_base_url_that_is_not_http_is_refused(service: Service, url: str) -> None:
    created = await service.http.post("/api/v2/providers", json={"name": "p", "kind": "openai", "base_url": url})
    assert created.status_code == 422, created.text
    ids = await service.setup_chat()
    patched = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"base_url": url})
    assert patched.status_code == 422
    assert (await service.http.get(f"/api/v2/providers/{ids['provider']}")).json()["provider"]["has_api_key"]


async def test_the_provider_hosts_setting_restricts_where_providers_point(
    backend: Backend, fake_provider: FakeProvider
) -> None:
    hosts = Settings.from_env({"CONTEXTSHIFT_PROVIDER_HOSTS": "api.openai.com, *.internal.example, 127.0.0.1"})
    async with serving(backend, fake_provider, hosts) as service:
        await _hosts_are_checked_on_save(service)


async def _hosts_are_checked_on_save(service: Service) -> None:
    ok = await service.http.post(
        "/api/v2/providers", json={"name": "a", "kind": "openai", "base_url": "https://llm.internal.example/v1"}
    )
    assert ok.status_code == 201
    refused = await service.http.post(
        "/api/v2/providers", json={"name": "b", "kind": "openai", "base_url": "http://169.254.169.254/latest"}
    )
    error = refused.json()["error"]
    assert (refused.status_code, error["code"]) == (422, "PROVIDER_HOST_NOT_ALLOWED")
    assert "169.254.169.254" in error["message"] and "CONTEXTSHIFT_PROVIDER_HOSTS" in error["message"]
    assert error["params"]["allowed"] == ["api.openai.com", "*.internal.example", "127.0.0.1"]
    moved = await service.http.patch(
        f"/api/v2/providers/{ok.json()['provider']['id']}", json={"base_url": "http://internal.example.evil.test"}
    )
    assert moved.json()["error"]["code"] == "PROVIDER_HOST_NOT_ALLOWED"
    names = [p["name"] for p in (await service.http.get("/api/v2/providers")).json()["providers"]]
    assert names == ["a"]


async def test_a_provider_saved_before_the_hosts_setting_narrowed_is_refused_before_its_key_leaves(
    service: Service,
) -> None:
    ids = await service.setup_chat()  # the fake provider on 127.0.0.1, saved while any host was allowed
    narrowed = Settings.from_env({"CONTEXTSHIFT_PROVIDER_HOSTS": "api.openai.com"})
    async with serving(service.backend, service.fake, narrowed) as restarted:
        await _saved_provider_is_refused(restarted, ids)
    widened = Settings.from_env({"CONTEXTSHIFT_PROVIDER_HOSTS": "127.0.0.1"})
    async with serving(service.backend, service.fake, widened) as restarted:
        turn = {"content": "hi", "stream": False}
        allowed = await restarted.http.post(f"/api/v2/chats/{ids['chat']}/generate", json=turn)
    assert allowed.status_code == 200 and len(service.fake.requests) == 1


async def _saved_provider_is_refused(service: Service, ids: dict[str, str]) -> None:
    turn = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert (turn.status_code, turn.json()["error"]["code"]) == (422, "PROVIDER_HOST_NOT_ALLOWED")
    assert (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"] == []
    endpoint = await service.http.post(
        "/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert endpoint.status_code == 400 and endpoint.json()["error"]["code"] == "provider_host_not_allowed"
    compact = await service.http.post(f"/api/v2/chats/{ids['chat']}/compact", json={})
    assert compact.json()["error"]["params"]["reason"] == "provider-host-not-allowed"
    assert service.fake.requests == []  # nothing, and no key, went to the provider


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_database_its_wal_files_and_the_key_file_are_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "modes.db"
    db = Database(f"sqlite:///{path}")
    await db.start()
    try:
        async with db.session() as session:
            await Repositories(session).providers.create(
                name="p", kind="openai", base_url="http://127.0.0.1:9", api_key=KEY
            )
        files = sorted(path.parent.glob("modes.db*"))
        assert {f.name for f in files} >= {"modes.db", "modes.db-wal"}
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    finally:
        await db.close()
    key = key_file()
    assert key.is_file() and _mode(key) == 0o600


async def test_an_existing_world_readable_database_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    sqlite3.connect(path).close()
    path.chmod(0o644)
    db = Database(f"sqlite:///{path}")
    await db.start()
    await db.close()
    assert _mode(path) == 0o600
