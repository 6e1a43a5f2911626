"""N2: no web page can use the service against its user. Host and Origin checks (DNS rebinding, cross-site
requests), JSON-only bodies, the security headers, and the browser's session cookie with its CSRF check."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select, update

from contextshift.api.app import create_app
from contextshift.api.auth import SESSION_LIFETIME
from contextshift.storage.tables import ApiTokenRow
from contextshift.storage.types import utcnow
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, Service, bearer


async def test_a_foreign_host_header_is_refused_before_anything_else(service: Service) -> None:
    async with service.client(ADMIN_TOKEN) as http:
        for path in ("/api/v2/providers", "/", "/healthz", "/app.js"):
            response = await http.get(path, headers={"Host": "evil.example"})
            assert response.status_code == 400, path
            assert response.json()["error"]["code"] == "HOST_NOT_ALLOWED"
        created = await http.post("/api/v2/bots", json={"name": "x"}, headers={"Host": "evil.example:8700"})
        assert (created.status_code, created.json()["error"]["code"]) == (400, "HOST_NOT_ALLOWED")
        assert (await http.get("/api/v2/bots")).json()["bots"] == []  # nothing was stored


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "localhost:8700", "[::1]:8700", "LOCALHOST"])
async def test_loopback_names_are_allowed(service: Service, host: str) -> None:
    async with service.client() as http:
        assert (await http.get("/healthz", headers={"Host": host})).status_code == 200


async def test_allowed_hosts_come_from_the_setting(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTSHIFT_ALLOWED_HOSTS", "chat.internal, box.lan:8700")
    app = create_app(f"sqlite:///{tmp_path}/hosts.db", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    with Server(app) as url:
        async with httpx.AsyncClient(timeout=30, base_url=url) as http:
            for host, expected in (("chat.internal", 200), ("box.lan", 200), ("other.lan", 400)):
                assert (await http.get("/healthz", headers={"Host": host})).status_code == expected, host
            origin = {"Origin": "http://chat.internal:8700", **bearer(ADMIN_TOKEN)}
            assert (await http.post("/api/v2/bots", json={"name": "x"}, headers=origin)).status_code == 201


async def test_a_change_from_another_origin_is_refused(service: Service) -> None:
    for origin in ("http://evil.example", "null", "http://[broken", service.url.replace("127.0.0.1", "localhost")):
        response = await service.http.post("/api/v2/bots", json={"name": "x"}, headers={"Origin": origin})
        assert (response.status_code, response.json()["error"]["code"]) == (403, "ORIGIN_NOT_ALLOWED"), origin
    own = await service.http.post("/api/v2/bots", json={"name": "mine"}, headers={"Origin": service.url})
    assert own.status_code == 201
    # Reading is not a change: a foreign Origin on GET gets the usual answer (CORS keeps it from the page).
    assert (await service.http.get("/api/v2/bots", headers={"Origin": "http://evil.example"})).status_code == 200
    assert [b["name"] for b in (await service.http.get("/api/v2/bots")).json()["bots"]] == ["mine"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
async def test_api_changes_refuse_bodies_that_are_not_json(service: Service, content_type: str) -> None:
    ids = await service.setup_chat()
    for path in ("/api/v2/bots", f"/api/v2/chats/{ids['chat']}/compact"):  # with a body, and body-less
        response = await service.http.post(path, content=b"name=x", headers={"Content-Type": content_type})
        assert (response.status_code, response.json()["error"]["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE"), path
    assert len((await service.http.get("/api/v2/bots")).json()["bots"]) == 1


async def test_every_response_has_the_security_headers(service: Service) -> None:
    async with service.client() as anonymous:
        for path in ("/", "/app.js", "/style.css", "/healthz", "/api/v2/bots", "/openapi.json"):
            response = await anonymous.get(path)
            assert response.headers["x-content-type-options"] == "nosniff", path
            assert response.headers["x-frame-options"] == "DENY", path
            assert response.headers["referrer-policy"] == "no-referrer", path
            policy = response.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "unsafe-inline" not in policy, path
            assert "frame-ancestors 'none'" in policy
        refused = await anonymous.get("/", headers={"Host": "evil.example"})
        assert refused.headers["x-frame-options"] == "DENY"


async def test_the_ui_has_no_inline_script_or_style(service: Service) -> None:
    page = (await service.http.get("/")).text
    assert "<script" in page and "<script>" not in page and " style=" not in page and "<style" not in page
    assert 'type="module" src="/app.js"' in page


async def test_a_token_url_becomes_a_session_cookie_and_leaves_the_address(service: Service) -> None:
    async with service.client() as browser:
        response = await browser.get(f"/?token={ADMIN_TOKEN}")
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = response.headers["set-cookie"]
        assert "contextshift_session=" in cookie and ADMIN_TOKEN not in cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert "Secure" not in cookie  # plain http on this machine; https gets Secure
        me = await browser.get("/api/v2/me")  # the cookie alone signs in
        assert me.json()["user"]["name"] == "admin"
        wrong = await browser.get("/?token=cs_wrong-token-0000000000")
        assert wrong.status_code == 303 and wrong.headers["location"].startswith("/#/signin")


async def test_a_cookie_signed_change_needs_the_csrf_token(service: Service) -> None:
    async with service.client() as browser:
        await browser.get(f"/?token={ADMIN_TOKEN}")
        page = await browser.get("/")
        csrf = browser.cookies.get("contextshift_csrf") or page.cookies.get("contextshift_csrf")
        assert csrf
        refused = await browser.post("/api/v2/bots", json={"name": "forged"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "CSRF_FAILED")
        forged = await browser.post("/api/v2/bots", json={"name": "forged"}, headers={"X-CSRF-Token": "x" + csrf})
        assert forged.status_code == 403
        made = await browser.post("/api/v2/bots", json={"name": "real"}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201, made.text
    # A bearer request needs none.
    assert (await service.http.post("/api/v2/bots", json={"name": "scripted"})).status_code == 201
    assert sorted(b["name"] for b in (await service.http.get("/api/v2/bots")).json()["bots"]) == ["real", "scripted"]


async def test_the_sign_in_page_posts_a_token_and_signs_out(service: Service) -> None:
    async with service.client() as browser:
        await browser.get("/")
        csrf = {"X-CSRF-Token": browser.cookies["contextshift_csrf"]}
        wrong = await browser.post("/session", json={"token": "cs_nope-000000000000"}, headers=csrf)
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "AUTH_INVALID")
        ok = await browser.post("/session", json={"token": ADMIN_TOKEN}, headers=csrf)
        assert ok.status_code == 200 and ok.json() == {"signed_in": True, "name": "admin"}
        assert (await browser.get("/api/v2/me")).status_code == 200
        out = await browser.delete("/session", headers=csrf)
        assert out.json() == {"signed_in": False, "name": None}
        assert (await browser.get("/api/v2/me")).status_code == 401


async def test_a_session_secret_is_no_bearer_token(service: Service) -> None:
    async with service.client() as browser:
        response = await browser.get(f"/?token={ADMIN_TOKEN}")
        session = response.cookies["contextshift_session"]
    async with service.client(session) as as_bearer:
        refused = await as_bearer.get("/api/v2/me")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "AUTH_INVALID")
    listed = (await service.http.get("/api/v2/tokens")).json()["tokens"]
    assert all(t["name"] != "browser" for t in listed)  # sessions are not among the API tokens


async def test_signing_in_deletes_the_browser_sessions_that_expired(service: Service) -> None:
    async with service.client() as browser:
        await browser.get(f"/?token={ADMIN_TOKEN}")
    async with service.client() as browser:
        await browser.get(f"/?token={ADMIN_TOKEN}")
        kept = browser.cookies["contextshift_session"]
    database = service.backend.database()
    await database.start()
    try:
        async with database.session() as session:  # the first session started longer ago than a lifetime
            old = utcnow() - SESSION_LIFETIME - timedelta(minutes=1)
            first = await session.scalar(
                select(ApiTokenRow.id).where(ApiTokenRow.kind == "session").order_by(ApiTokenRow.created_at).limit(1)
            )
            await session.execute(update(ApiTokenRow).where(ApiTokenRow.id == first).values(created_at=old))
        async with service.client() as browser:
            await browser.get(f"/?token={ADMIN_TOKEN}")
        async with database.session() as session:
            sessions = (await session.scalars(select(ApiTokenRow.id).where(ApiTokenRow.kind == "session"))).all()
    finally:
        await database.close()
    assert first not in sessions and len(sessions) == 2  # the expired one went; the live one and the new one stay
    async with httpx.AsyncClient(timeout=30, base_url=service.url, cookies={"contextshift_session": kept}) as browser:
        assert (await browser.get("/api/v2/me")).status_code == 200
