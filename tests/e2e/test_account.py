"""Signing out, signing back in through a deep link, and the account page (V5, N2, issue 27): the user's API
tokens (created with the secret shown once, listed, renamed, revoked), their browser sessions (listed, this one
marked, ended) and, for an admin, the users (created, given a role, disabled, deleted), in Chromium against the
real service."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.api.conftest import bearer

from .conftest import PHONE, App, screenshot

pytestmark = pytest.mark.browser


def _status_with(app: App, secret: str) -> int:
    """The HTTP status of GET /api/v2/me with ``secret`` as the bearer token."""
    with httpx.Client(base_url=app.url, timeout=30, headers=bearer(secret)) as client:
        return client.get("/api/v2/me").status_code


def test_signing_out_ends_the_session_and_a_deep_link_survives_signing_in(page: Any, app: App) -> None:
    ids = app.setup_chat()
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.get_by_role("heading", name="Long chat")).to_be_visible()
    session = {c["name"]: c["value"] for c in page.context.cookies()}["contextshift_session"]

    page.locator("#sign-out").click()
    expect(page.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
    expect(page.locator("#signed-out")).to_have_text("You are signed out.")
    assert "contextshift_session" not in {c["name"] for c in page.context.cookies()}
    with httpx.Client(base_url=app.url, timeout=30, cookies={"contextshift_session": session}) as client:
        assert client.get("/api/v2/me").status_code == 401  # the old cookie signs no one in any more
    expect(page.locator("#sign-out")).to_have_count(0)

    page.goto(f"/#/chat/{ids['chat']}")  # a deep link while signed out: the sign-in page, then the chat
    expect(page.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
    page.locator("#signin-token").fill(app.token)
    page.locator("#signin-submit").click()
    expect(page.get_by_role("heading", name="Long chat")).to_be_visible()
    assert page.url.endswith(f"/#/chat/{ids['chat']}")
    expect(page.locator("#account-link")).to_contain_text(app.api("GET", "/me", expect=200)["user"]["name"])

    page.locator("#sign-out").click()
    expect(page.locator("#signed-out")).to_be_visible()
    page.goto(f"/?token={app.token}#/chat/{ids['chat']}")  # the login URL with a deep link: the chat too
    expect(page.get_by_role("heading", name="Long chat")).to_be_visible()
    assert page.url == f"{app.url}/#/chat/{ids['chat']}"  # and the token left the address bar


def test_a_token_is_created_shown_once_renamed_and_revoked(page: Any, app: App) -> None:
    before = app.api("GET", "/tokens", expect=200)["tokens"]  # the admin's own (the service's first start)
    page.goto("/#/account")
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()
    expect(page.locator(".token-table tbody tr")).to_have_count(len(before))
    page.get_by_label("Name", exact=True).first.fill("ci script")
    page.get_by_role("button", name="Create token").click()

    secret = page.locator("#new-secret").inner_text()
    assert re.fullmatch(r"cs_\S+", secret), secret
    assert _status_with(app, secret) == 200  # the secret shown is the token itself
    expect(page.locator('[data-action="copy-secret"]')).to_be_focused()
    made = [t for t in app.api("GET", "/tokens", expect=200)["tokens"] if t["id"] not in {b["id"] for b in before}]
    assert [t["name"] for t in made] == ["ci script"]
    row = page.locator(f'tr[data-token-id="{made[0]["id"]}"]')
    expect(row).to_contain_text("ci script")
    expect(row).to_contain_text("never")  # last used: the check above went through the API, the list is older

    screenshot(page, "account-tokens")
    page.locator('[data-action="done-secret"]').click()
    expect(page.locator("#new-secret")).to_have_count(0)
    assert secret not in page.content()  # shown once: gone from the page

    row.get_by_role("button", name="Rename ci script").click()
    rename = row.get_by_label("New name for ci script")
    expect(rename).to_be_focused()
    rename.fill("deploy bot")
    row.get_by_role("button", name="Save").click()
    expect(row.locator(".token-name")).to_have_text("deploy bot")
    names = {t["id"]: t["name"] for t in app.api("GET", "/tokens", expect=200)["tokens"]}
    assert names[made[0]["id"]] == "deploy bot"

    row.get_by_role("button", name="Revoke deploy bot").click()
    expect(row.locator('[data-action="confirm-revoke"]')).to_be_focused()
    row.get_by_role("button", name="Keep").click()
    assert _status_with(app, secret) == 200  # kept: nothing changed
    row.get_by_role("button", name="Revoke deploy bot").click()
    row.locator('[data-action="confirm-revoke"]').click()
    expect(row).to_have_count(0)
    expect(page.locator(".token-table tbody tr")).to_have_count(len(before))
    assert app.api("GET", "/tokens", expect=200)["tokens"] == before
    assert _status_with(app, secret) == 401


def test_an_admin_creates_changes_disables_and_deletes_a_user(page: Any, app: App) -> None:
    page.goto("/#/account")
    users = page.locator("#users")
    expect(users.get_by_role("heading", name="Users")).to_be_visible()
    users.get_by_label("Name", exact=True).fill("Dana")
    users.get_by_label("Role", exact=True).select_option("user")
    users.get_by_role("button", name="Create user").click()
    secret = users.locator("#new-secret").inner_text()
    assert _status_with(app, secret) == 200  # the new user's first token, shown once
    dana = next(u for u in app.api("GET", "/users", expect=200)["users"] if u["name"] == "Dana")
    assert (dana["role"], dana["disabled"]) == ("user", False)
    row = users.locator(f'tr[data-user-id="{dana["id"]}"]')

    row.get_by_label("Role of Dana").select_option("admin")
    expect(page.locator(".toast").last).to_have_text(re.compile("^Dana is now an admin."))
    assert app.api("GET", f"/users/{dana['id']}", expect=200)["user"]["role"] == "admin"

    row.get_by_label("Dana is disabled").check()
    expect(page.locator(".toast").last).to_have_text(re.compile("^Dana is disabled."))
    expect(row.get_by_label("Dana is disabled")).to_be_checked()
    assert app.api("GET", f"/users/{dana['id']}", expect=200)["user"]["disabled"] is True
    assert _status_with(app, secret) == 401  # a disabled user's token stops working

    # The only enabled admin cannot step down: the refusal is shown and nothing changes.
    me = app.api("GET", "/me", expect=200)["user"]
    mine = users.locator(f'tr[data-user-id="{me["id"]}"]')
    mine.get_by_label(f"Role of {me['name']}").select_option("user")
    expect(page.locator(".toast.error")).to_contain_text("only enabled admin")
    expect(mine.get_by_label(f"Role of {me['name']}")).to_have_value("admin")
    assert app.api("GET", "/me", expect=200)["user"]["role"] == "admin"

    row.get_by_role("button", name="Delete Dana").click()
    row.locator('[data-action="confirm-delete-user"]').click()
    expect(users.locator(f'tr[data-user-id="{dana["id"]}"]')).to_have_count(0)
    assert [u["name"] for u in app.api("GET", "/users", expect=200)["users"]] == [me["name"]]


def test_on_a_phone_the_account_page_signs_out(page: Any, app: App) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/#/")
    expect(page.get_by_role("heading", name="Welcome to contextshift")).to_be_visible()  # the home view is done
    expect(page.locator("#sign-out")).to_be_hidden()  # no room in a phone's header: the menu has the account link
    page.get_by_role("button", name="Show chats").click()
    page.locator("#menu-account-link").click()
    expect(page.get_by_role("heading", name="Account")).to_be_visible()
    page.locator("#account-sign-out").click()
    expect(page.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
    assert app.http.get("/api/v2/me").status_code == 200  # the admin's API token still works: only the session ended


def test_two_browser_sessions_are_listed_and_ending_the_other_signs_it_out(page: Any, browser: Any, app: App) -> None:
    other = browser.new_context(viewport=PHONE, base_url=app.url, reduced_motion="reduce")
    other.set_default_timeout(30_000)
    try:
        second = other.new_page()
        second.goto(f"/?token={app.token}")  # the same user signs in a second time, in another browser
        expect(second.locator("#sign-out")).to_have_count(1)
        assert second.request.get(f"{app.url}/api/v2/me").status == 200

        page.goto("/#/account")
        sessions = page.locator("#sessions")
        expect(sessions.get_by_role("heading", name="Browser sessions")).to_be_visible()
        rows = sessions.locator(".session-table tbody tr")
        expect(rows).to_have_count(2)
        listed = app.api("GET", "/sessions", expect=200)["sessions"]  # the admin's API token: no session is its own
        assert len(listed) == 2 and not any(s["current"] for s in listed)
        opener = {t["id"]: t["name"] for t in app.api("GET", "/tokens", expect=200)["tokens"]}
        mine = page.locator('.session-table tr[data-current="true"]')
        expect(mine).to_have_count(1)
        expect(mine.locator(".this-browser")).to_have_text("this browser")
        theirs = page.locator('.session-table tr[data-current="false"]')
        expect(theirs.locator(".this-browser")).to_have_count(0)
        for session in listed:
            row = sessions.locator(f'tr[data-session-id="{session["id"]}"]')
            expect(row).to_contain_text(opener[session["opened_by"]] or "(unnamed token)")
        other_id = theirs.get_attribute("data-session-id")
        assert other_id in {s["id"] for s in listed}

        theirs.locator('[data-action="end-session"]').click()
        expect(theirs.locator('[data-action="confirm-end-session"]')).to_be_focused()
        theirs.get_by_role("button", name="Keep").click()
        assert second.request.get(f"{app.url}/api/v2/me").status == 200  # kept: it still signs in
        theirs.locator('[data-action="end-session"]').click()
        theirs.locator('[data-action="confirm-end-session"]').click()
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-current", "true")
        assert second.request.get(f"{app.url}/api/v2/me").status == 401  # that browser's next call is refused
        assert other_id not in {s["id"] for s in app.api("GET", "/sessions", expect=200)["sessions"]}
        second.goto("/#/account")
        expect(second.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
        assert page.request.get(f"{app.url}/api/v2/me").status == 200  # this browser is still signed in
    finally:
        other.close()


def test_ending_this_browsers_session_shows_the_sign_in_page(page: Any, app: App) -> None:
    page.goto("/#/account")
    mine = page.locator('#sessions tr[data-current="true"]')
    mine.get_by_role("button", name="End session of this browser").click()
    expect(mine.get_by_role("group", name="Confirm ending the session of this browser")).to_contain_text(
        "This browser is signed out."
    )
    mine.locator('[data-action="confirm-end-session"]').click()
    expect(page.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
    expect(page.locator("#signed-out")).to_have_text("You are signed out.")
    assert page.request.get(f"{app.url}/api/v2/me").status == 401
    assert app.api("GET", "/sessions", expect=200)["sessions"] == []
    assert app.http.get("/api/v2/me").status_code == 200  # the API token it was opened with still works
