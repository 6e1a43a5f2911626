"""N2 (issue 25, point 4) over a real socket, on SQLite and PostgreSQL: a browser session belongs to the token
that opened it and ends when that token is revoked; ``/api/v2/sessions`` lists and ends sessions; the cookie
carries its expiry (``Max-Age``, 30 days unless ``CONTEXTSHIFT_SESSION_DAYS`` says otherwise)."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, TEST_LOGIN_LIMIT, Account, Server, Service, bearer
from tests.databases import Backend

SESSION = "contextshift_session"


async def _browser(service: Service, token: str) -> httpx.AsyncClient:
    """A browser signed in with ``token`` through the login URL (the caller closes it)."""
    browser = httpx.AsyncClient(base_url=service.url, timeout=30)
    response = await browser.get(f"/?token={token}", follow_redirects=False)
    assert response.status_code == 303 and SESSION in browser.cookies, response.text
    return browser


async def _new_token(service: Service, name: str) -> tuple[str, str]:
    made = await service.post("/api/v2/tokens", {"name": name})
    return made["token"]["id"], made["secret"]


async def test_the_session_cookie_carries_thirty_days_of_max_age(service: Service) -> None:
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as browser:
        response = await browser.post("/session", json={"token": service.token})
    cookie = response.headers["set-cookie"]
    assert f"{SESSION}=" in cookie and "Max-Age=2592000" in cookie and "HttpOnly" in cookie


async def test_the_session_lifetime_is_a_setting(backend: Backend) -> None:
    settings = Settings.from_env({"CONTEXTSHIFT_SESSION_DAYS": "2"})
    app = create_app(
        database=backend.database(),
        client_options=CLIENT_OPTIONS,
        admin_token=ADMIN_TOKEN,
        login_limit=TEST_LOGIN_LIMIT,
        settings=settings,
    )
    with Server(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=30) as browser,
            httpx.AsyncClient(base_url=url, timeout=30, headers=bearer(ADMIN_TOKEN)) as admin,
        ):
            login = await browser.get(f"/?token={ADMIN_TOKEN}", follow_redirects=False)
            assert "Max-Age=172800" in login.headers["set-cookie"]
            [listed] = (await admin.get("/api/v2/sessions")).json()["sessions"]
            created = datetime.fromisoformat(listed["created_at"])
            assert datetime.fromisoformat(listed["expires_at"]) - created == timedelta(days=2)
    for wrong in ("0", "-1", "many", "4000"):
        with pytest.raises(ValueError, match="CONTEXTSHIFT_SESSION_DAYS"):
            Settings.from_env({"CONTEXTSHIFT_SESSION_DAYS": wrong})


async def test_revoking_a_token_ends_the_sessions_it_opened_at_once(service: Service) -> None:
    laptop_token_id, laptop_token = await _new_token(service, "laptop")
    _, phone_token = await _new_token(service, "phone")
    laptop = await _browser(service, laptop_token)
    laptop_again = await _browser(service, laptop_token)
    phone = await _browser(service, phone_token)
    try:
        for browser in (laptop, laptop_again, phone):
            assert (await browser.get("/api/v2/me")).status_code == 200
        revoked = await service.http.delete(f"/api/v2/tokens/{laptop_token_id}")
        assert revoked.status_code == 200
        for browser in (laptop, laptop_again):
            ended = await browser.get("/api/v2/me")
            assert (ended.status_code, ended.json()["error"]["code"]) == (401, "AUTH_INVALID")
        assert (await phone.get("/api/v2/me")).status_code == 200  # another token's session stays
        listed = (await service.http.get("/api/v2/sessions")).json()["sessions"]
        assert [s["opened_by_name"] for s in listed] == ["phone"]
    finally:
        for browser in (laptop, laptop_again, phone):
            await browser.aclose()


async def test_sessions_are_listed_without_secrets_and_one_can_be_ended(service: Service, other_user: Account) -> None:
    token_id, token = await _new_token(service, "desk")
    first = await _browser(service, token)
    second = await _browser(service, token)
    bobs = await _browser(service, other_user.token)
    try:
        seen = await first.get("/api/v2/sessions")
        assert seen.status_code == 200
        sessions = seen.json()["sessions"]
        assert len(sessions) == 2
        assert {s["opened_by"] for s in sessions} == {token_id}
        assert [s["current"] for s in sessions].count(True) == 1
        secrets = {first.cookies[SESSION], second.cookies[SESSION], token}
        assert not any(secret in seen.text for secret in secrets)
        current = next(s for s in sessions if s["current"])
        created = datetime.fromisoformat(current["created_at"])
        assert datetime.fromisoformat(current["expires_at"]) - created == timedelta(days=30)
        # bob sees only his own, and cannot end the admin's
        bob_listed = (await other_user.http.get("/api/v2/sessions")).json()["sessions"]
        assert len(bob_listed) == 1 and bob_listed[0]["opened_by_name"] == "first token"
        other = next(s for s in sessions if not s["current"])
        refused = await other_user.http.delete(f"/api/v2/sessions/{other['id']}")
        assert (refused.status_code, refused.json()["error"]["code"]) == (404, "SESSION_NOT_FOUND")
        # an API token is not a session
        not_a_session = await service.http.delete(f"/api/v2/sessions/{token_id}")
        assert not_a_session.status_code == 404
        assert (await second.get("/api/v2/me")).status_code == 200
        ended = await service.http.delete(f"/api/v2/sessions/{other['id']}")
        assert (ended.status_code, ended.json()) == (200, {"deleted": True})
        assert (await second.get("/api/v2/me")).status_code == 401
        assert (await first.get("/api/v2/me")).status_code == 200
        assert (await bobs.get("/api/v2/me")).status_code == 200
        again = await service.http.delete(f"/api/v2/sessions/{other['id']}")
        assert again.status_code == 404
        assert len((await service.http.get("/api/v2/sessions")).json()["sessions"]) == 1
    finally:
        for browser in (first, second, bobs):
            await browser.aclose()
