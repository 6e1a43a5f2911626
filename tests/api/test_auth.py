"""N2: authentication is always on. Bearer tokens on every API route, the first admin, users and tokens.

The route table comes from the service's own OpenAPI document, so a route added later is checked too.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from contextshift.api.app import create_app
from contextshift.service.accounts import Bootstrap
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Account, Server, Service, bearer
from tests.databases import Backend


def _operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (method, path) of the API in the OpenAPI document, path parameters filled with a made-up id."""
    found = []
    for path, item in document["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete") and path.startswith(("/api/v2", "/v1")):
                found.append((method.upper(), re.sub(r"\{[^}]+\}", "0123456789abcdef", path)))
    return found


async def test_every_api_route_refuses_a_request_without_a_token(service: Service) -> None:
    document = (await service.http.get("/openapi.json")).json()
    operations = _operations(document)
    assert len(operations) >= 40
    async with service.client() as anonymous, service.client("cs_not-a-real-token-000000000000") as wrong:
        for method, path in operations:
            for client, code in ((anonymous, "AUTH_REQUIRED"), (wrong, "AUTH_INVALID")):
                response = await client.request(method, path, json={} if method != "GET" else None)
                assert response.status_code == 401, (method, path, response.text)
                error = response.json()["error"]
                if path.startswith("/v1/messages"):  # Anthropic's error shape, for its SDK
                    assert response.json()["type"] == "error" and error["type"] == "authentication_error"
                    assert error["message"]
                elif path.startswith("/v1"):  # OpenAI's error shape, for its SDKs
                    assert error["code"] == "invalid_api_key" and error["message"]
                else:
                    assert (error["code"], error["params"]) == (code, {}) and error["message"]
                assert response.headers["www-authenticate"].startswith("Bearer")


async def test_malformed_bodies_and_unknown_api_paths_are_refused_before_anything_else(service: Service) -> None:
    async with service.client() as anonymous:
        json_type = {"content-type": "application/json"}
        garbage = await anonymous.post("/api/v2/bots", content=b"{not json", headers=json_type)
        unknown = await anonymous.get("/api/v2/no-such-route")
    assert (garbage.status_code, garbage.json()["error"]["code"]) == (401, "AUTH_REQUIRED")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (401, "AUTH_REQUIRED")


@pytest.mark.parametrize("header", ["Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer two words", f"Token {ADMIN_TOKEN}"])
async def test_an_authorization_header_that_is_not_a_bearer_token_is_invalid(service: Service, header: str) -> None:
    async with service.client() as anonymous:
        response = await anonymous.get("/api/v2/bots", headers={"Authorization": header})
    assert (response.status_code, response.json()["error"]["code"]) == (401, "AUTH_INVALID")


async def test_health_the_ui_and_the_openapi_document_stay_open(service: Service) -> None:
    async with service.client() as anonymous:
        health = await anonymous.get("/healthz")
        page = await anonymous.get("/")
        document = await anonymous.get("/openapi.json")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert document.status_code == 200


async def test_the_openapi_document_declares_the_bearer_scheme_on_every_api_route(service: Service) -> None:
    document = (await service.http.get("/openapi.json")).json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["token"] == {"type": "http", "scheme": "bearer", "description": schemes["token"]["description"]}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path.startswith(("/api/v2", "/v1")):
                assert operation.get("security") == [{"token": []}], (method, path)
                assert "401" in operation["responses"], (method, path)
    assert "security" not in document["paths"]["/healthz"]["get"]


async def test_me_names_the_caller(service: Service, other_user: Account) -> None:
    admin = (await service.http.get("/api/v2/me")).json()["user"]
    bob = (await other_user.http.get("/api/v2/me")).json()["user"]
    assert (admin["name"], admin["role"], admin["disabled"]) == ("admin", "admin", False)
    assert (bob["id"], bob["name"], bob["role"]) == (other_user.id, "bob", "user")


async def test_only_admins_manage_users(service: Service, other_user: Account) -> None:
    for method, path, body in [
        ("GET", "/api/v2/users", None),
        ("POST", "/api/v2/users", {"name": "carol"}),
        ("GET", f"/api/v2/users/{other_user.id}", None),
        ("PATCH", f"/api/v2/users/{other_user.id}", {"role": "admin"}),
        ("DELETE", f"/api/v2/users/{other_user.id}", None),
    ]:
        response = await other_user.http.request(method, path, json=body)
        assert (response.status_code, response.json()["error"]["code"]) == (403, "FORBIDDEN"), (method, path)
    users = (await service.http.get("/api/v2/users")).json()["users"]
    assert [(u["name"], u["role"]) for u in users] == [("admin", "admin"), ("bob", "user")]


async def test_a_new_users_token_is_shown_once_and_signs_them_in(service: Service) -> None:
    created = await service.post("/api/v2/users", {"name": "carol", "role": "admin"})
    assert created["user"]["role"] == "admin" and created["token"].startswith("cs_")
    async with service.client(created["token"]) as carol:
        assert (await carol.get("/api/v2/me")).json()["user"]["name"] == "carol"
        assert (await carol.get("/api/v2/users")).status_code == 200
    listing = await service.http.get("/api/v2/users")
    assert created["token"] not in listing.text


async def test_user_names_are_unique(service: Service, other_user: Account) -> None:
    again = await service.http.post("/api/v2/users", json={"name": "bob"})
    assert (again.status_code, again.json()["error"]["code"]) == (409, "USER_NAME_TAKEN")
    me = (await service.http.get("/api/v2/me")).json()["user"]
    renamed = await service.http.patch(f"/api/v2/users/{me['id']}", json={"name": "bob"})
    assert (renamed.status_code, renamed.json()["error"]["code"]) == (409, "USER_NAME_TAKEN")
    blank = await service.http.post("/api/v2/users", json={"name": " "})
    assert blank.status_code == 422


async def test_a_disabled_user_is_signed_out_at_once_and_back_when_enabled(
    service: Service, other_user: Account
) -> None:
    off = await service.http.patch(f"/api/v2/users/{other_user.id}", json={"disabled": True})
    assert off.json()["user"]["disabled"] is True
    refused = await other_user.http.get("/api/v2/me")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "AUTH_INVALID")
    await service.http.patch(f"/api/v2/users/{other_user.id}", json={"disabled": False})
    assert (await other_user.http.get("/api/v2/me")).status_code == 200


async def test_the_last_enabled_admin_cannot_be_demoted_disabled_or_deleted(service: Service) -> None:
    me = (await service.http.get("/api/v2/me")).json()["user"]
    for method, body in (("PATCH", {"role": "user"}), ("PATCH", {"disabled": True}), ("DELETE", None)):
        response = await service.http.request(method, f"/api/v2/users/{me['id']}", json=body)
        assert (response.status_code, response.json()["error"]["code"]) == (409, "LAST_ADMIN")
    await service.post("/api/v2/users", {"name": "carol", "role": "admin"})
    demoted = await service.http.patch(f"/api/v2/users/{me['id']}", json={"role": "user"})
    assert demoted.json()["user"]["role"] == "user"
    refused = await service.http.get("/api/v2/users")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FORBIDDEN")


async def test_a_deleted_users_tokens_stop_working(service: Service, other_user: Account) -> None:
    assert (await service.http.delete(f"/api/v2/users/{other_user.id}")).json() == {"deleted": True}
    refused = await other_user.http.get("/api/v2/me")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "AUTH_INVALID")
    again = await service.http.delete(f"/api/v2/users/{other_user.id}")
    assert (again.status_code, again.json()["error"]["code"]) == (404, "USER_NOT_FOUND")


async def test_tokens_are_listed_without_secrets_and_revoked_at_once(service: Service, other_user: Account) -> None:
    made = await other_user.http.post("/api/v2/tokens", json={"name": "laptop script"})
    assert made.status_code == 201
    token, secret = made.json()["token"], made.json()["secret"]
    assert set(token) == {"id", "name", "created_at", "last_used_at", "context_strategy"}
    assert token["name"] == "laptop script"
    async with service.client(secret) as script:
        assert (await script.get("/api/v2/me")).json()["user"]["name"] == "bob"
        listing = await other_user.http.get("/api/v2/tokens")
        assert secret not in listing.text and other_user.token not in listing.text
        names = [t["name"] for t in listing.json()["tokens"]]
        assert names == ["first token", "laptop script"]
        used = next(t for t in listing.json()["tokens"] if t["id"] == token["id"])
        assert used["last_used_at"] is not None
        # Another user's token answers as if it did not exist, and stays valid.
        foreign = await service.http.delete(f"/api/v2/tokens/{token['id']}")
        assert (foreign.status_code, foreign.json()["error"]["code"]) == (404, "TOKEN_NOT_FOUND")
        assert (await script.get("/api/v2/me")).status_code == 200
        assert (await other_user.http.delete(f"/api/v2/tokens/{token['id']}")).json() == {"deleted": True}
        revoked = await script.get("/api/v2/me")
        assert (revoked.status_code, revoked.json()["error"]["code"]) == (401, "AUTH_INVALID")
    assert [t["name"] for t in (await other_user.http.get("/api/v2/tokens")).json()["tokens"]] == ["first token"]


async def test_tokens_are_stored_as_hashes_only(service: Service, other_user: Account) -> None:
    secret = (await other_user.http.post("/api/v2/tokens", json={"name": "x"})).json()["secret"]
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:
            stored = (await session.execute(text("SELECT token_hash FROM api_tokens"))).scalars().all()
    finally:
        await database.close()
    assert hashlib.sha256(secret.encode()).hexdigest() in stored
    assert all(secret not in value and ADMIN_TOKEN not in value for value in stored)
    if service.backend.name == "sqlite":
        path = Path(service.backend.url.removeprefix("sqlite:///"))
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for file in path.parent.glob(f"{path.name}*"):
            data = file.read_bytes()
            assert secret.encode() not in data and other_user.token.encode() not in data
            assert ADMIN_TOKEN.encode() not in data


async def test_a_first_start_without_a_configured_token_makes_one_and_tells_it_once(tmp_path: Path) -> None:
    told: list[Bootstrap] = []
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with Server(create_app(url, client_options=CLIENT_OPTIONS, admin_token="", on_started=told.append)) as base:
        async with httpx.AsyncClient(timeout=30, base_url=base) as http:
            assert told and told[0].secret is not None and told[0].secret.startswith("cs_")
            me = await http.get("/api/v2/me", headers=bearer(told[0].secret))
            assert me.json()["user"] == {**me.json()["user"], "name": "admin", "role": "admin"}
    with Server(create_app(url, client_options=CLIENT_OPTIONS, admin_token="", on_started=told.append)) as base:
        async with httpx.AsyncClient(timeout=30, base_url=base) as http:
            assert len(told) == 2 and told[1].secret is None and told[1].admin_id == told[0].admin_id
            assert (await http.get("/api/v2/me", headers=bearer(told[0].secret))).status_code == 200


async def test_the_admin_token_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("CONTEXTSHIFT_ADMIN_TOKEN", "first-admin-token-from-env")
    told: list[Bootstrap] = []
    with Server(create_app(url, on_started=told.append)) as base:
        async with httpx.AsyncClient(timeout=30, base_url=base, headers=bearer("first-admin-token-from-env")) as http:
            assert (await http.get("/api/v2/me")).json()["user"]["role"] == "admin"
    assert told[0].secret is None
    # A later start with another configured token adds it to the same admin; the first one keeps working.
    monkeypatch.setenv("CONTEXTSHIFT_ADMIN_TOKEN", "second-admin-token-from-env")
    with Server(create_app(url)) as base:
        async with httpx.AsyncClient(timeout=30, base_url=base) as http:
            for token in ("first-admin-token-from-env", "second-admin-token-from-env"):
                assert (await http.get("/api/v2/me", headers=bearer(token))).json()["user"]["name"] == "admin"


def test_a_guessable_admin_token_is_refused_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from contextshift.service.errors import ServiceError

    monkeypatch.setenv("CONTEXTSHIFT_ADMIN_TOKEN", "secret")
    with pytest.raises(ServiceError) as refused:
        create_app(f"sqlite:///{tmp_path / 'weak.db'}")
    assert refused.value.code == "ADMIN_TOKEN_TOO_WEAK" and "secret" not in refused.value.message


async def test_instances_starting_together_on_one_postgresql_make_one_admin(backend: Backend) -> None:
    if backend.name != "postgresql":
        pytest.skip("several instances share a database only on PostgreSQL (V8)")
    from contextshift.service.accounts import bootstrap

    databases = [backend.database() for _ in range(3)]
    for database in databases:
        await database.start()
    try:
        results = await asyncio.gather(*(bootstrap(d, None) for d in databases))
        async with databases[0].session() as session:
            users = (await session.execute(text("SELECT name FROM users"))).scalars().all()
    finally:
        for database in databases:
            await database.close()
    assert users == ["admin"] and len({r.admin_id for r in results}) == 1
    assert len([r for r in results if r.secret is not None]) == 1
