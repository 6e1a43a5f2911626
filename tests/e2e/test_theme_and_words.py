"""The theme switch (light, dark or the system's, remembered) and words that used to be wrong (V5, issue 27):
"1 chat", and no Pin or Exclude on a slash command or its answer, which are never sent to the model."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser

LIGHT_BG = "rgb(246, 247, 249)"  # --bg in style.css
DARK_BG = "rgb(20, 23, 28)"


def _background(page: Any) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")  # type: ignore[no-any-return]


def test_the_theme_switch_is_remembered_and_system_follows_the_os(page: Any, app: App) -> None:
    page.emulate_media(color_scheme="light")
    page.goto("/#/")
    switch = page.get_by_label("Colour theme")
    expect(switch).to_have_value("system")
    assert _background(page) == LIGHT_BG
    switch.select_option("dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert _background(page) == DARK_BG
    assert page.evaluate("localStorage.getItem('contextshift.theme')") == "dark"

    page.reload()  # remembered, and on <html> before the app's script runs
    expect(page.get_by_label("Colour theme")).to_have_value("dark")
    assert _background(page) == DARK_BG

    page.goto("/#/account")  # the account page's choice is the same setting
    page.get_by_role("group", name="Theme").get_by_label("Light").check()
    expect(page.get_by_label("Colour theme")).to_have_value("light")
    page.emulate_media(color_scheme="dark")
    assert _background(page) == LIGHT_BG  # light chosen: the OS's dark does not apply

    page.get_by_label("Colour theme").select_option("system")
    expect(page.locator("html")).not_to_have_attribute("data-theme", "light")
    assert _background(page) == DARK_BG  # system: follows the OS
    assert page.evaluate("localStorage.getItem('contextshift.theme')") is None
    page.emulate_media(color_scheme="light")
    assert _background(page) == LIGHT_BG


def test_the_bots_page_counts_one_chat_and_two_chats(page: Any, app: App) -> None:
    ids = app.setup_chat()
    other = app.api("POST", "/bots", {"name": "Other", "chat_model_id": ids["model"]}, 201)["bot"]
    for _ in range(2):
        app.api("POST", "/chats", {"bot_id": other["id"]}, 201)
    page.goto("/#/bots")
    cards = page.locator(".card-list .card")
    expect(cards.filter(has_text="Helper")).to_contain_text("1 chat")
    expect(cards.filter(has_text="Helper")).not_to_contain_text("1 chats")
    expect(cards.filter(has_text="Other")).to_contain_text("2 chats")


def test_a_slash_command_and_its_answer_offer_no_pin_or_exclude(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    app.api("POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": "An ordinary message."}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("/status")
    composer.press("Enter")
    answer = page.locator(".msg.command.role-assistant").last
    expect(answer).to_contain_text("Context:")
    for command in (answer, page.locator(".msg.command.role-user").last):
        expect(command.get_by_role("button", name="Copy")).to_be_visible()
        expect(command.get_by_role("button", name="Delete")).to_be_visible()
        expect(command.locator('[data-action="pin"], [data-action="exclude"]')).to_have_count(0)
    ordinary = page.locator(".msg.role-user:not(.command)").first
    expect(ordinary.get_by_role("button", name="Pin")).to_be_visible()
    expect(ordinary.get_by_role("button", name="Exclude")).to_be_visible()
    assert app.fake.requests == []
