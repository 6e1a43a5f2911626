"""Signing out, signing back in through a deep link, and the account page (V5, N2, issue 27): the user's API
tokens (created with the secret shown once, listed, renamed, revoked) and, for an admin, the users (created,
given a role, disabled, deleted), in Chromium against the real service."""

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
