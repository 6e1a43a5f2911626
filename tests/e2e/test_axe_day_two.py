"""The day-two screens under axe (issue 27), like ``test_axe.py``'s main screens: the account page (a new token's
secret shown, the users table) and a chat with highlighted code in the light and the dark theme, at laptop size
and phone width, with no serious or critical violation and nothing scrolling sideways on a phone."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LAPTOP, PHONE, App
from .test_axe import OVERFLOW, _chat_with_history, _scan

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_account_page_and_highlighted_code_in_both_themes_pass_axe(browser: Any, app: App, size: str) -> None:
    ids = _chat_with_history(app)
    app.api("POST", "/users", {"name": "Dana"}, 201)
    viewport = LAPTOP if size == "laptop" else PHONE
    context = browser.new_context(viewport=viewport, base_url=app.url, reduced_motion="reduce", bypass_csp=True)
    context.set_default_timeout(30_000)
    tab = context.new_page()
    tab.goto(f"/?token={app.token}")
    found: dict[str, Any] = {}
    for theme in ("light", "dark"):
        tab.evaluate(f"localStorage.setItem('contextshift.theme', '{theme}')")
        tab.goto("/#/account")
        tab.reload()
        tab.locator("#users tbody tr").first.wait_for()
        tab.locator("#new-token-name").fill("axe")
        tab.get_by_role("button", name="Create token").click()
        tab.locator("#new-secret").wait_for()
        if violations := _scan(tab):
            found[f"account, {theme}"] = violations
        if size == "phone" and (overflow := tab.evaluate(OVERFLOW)):
            found[f"account, {theme}, sideways"] = overflow
        tab.goto(f"/#/chat/{ids['chat']}")
        tab.locator(".code-block code.hljs").last.wait_for()
        tab.wait_for_timeout(300)
        if violations := _scan(tab):
            found[f"chat, {theme}"] = violations
        if size == "phone" and (overflow := tab.evaluate(OVERFLOW)):
            found[f"chat, {theme}, sideways"] = overflow
    context.close()
    assert found == {}
