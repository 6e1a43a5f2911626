"""Chat titles (V5): rename a chat in the sidebar (Enter saves, Escape cancels, focus returns to the chat's
link); an untitled chat takes its first message as title, in the list and the heading, without a reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Reply

from .conftest import App

pytestmark = pytest.mark.browser


def test_a_chat_is_renamed_in_the_sidebar(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator("h1.chat-heading")).to_have_text("Long chat")
    sidebar = page.locator("#sidebar")
    sidebar.get_by_role("button", name="Rename Long chat").click()
    title = sidebar.get_by_label("Chat title")
    expect(title).to_be_focused()
    title.fill("Discarded name")
    title.press("Escape")
    expect(sidebar.get_by_label("Chat title")).to_have_count(0)
    assert app.api("GET", f"/chats/{ids['chat']}")["chat"]["title"] == "Long chat"
    sidebar.get_by_role("button", name="Rename Long chat").click()
    sidebar.get_by_label("Chat title").fill("  Weekend in Porto ")
    sidebar.get_by_label("Chat title").press("Enter")
    link = sidebar.get_by_role("link", name="Weekend in Porto")
    expect(link).to_be_focused()
    expect(page.locator("h1.chat-heading")).to_have_text("Weekend in Porto")
    assert app.api("GET", f"/chats/{ids['chat']}")["chat"]["title"] == "Weekend in Porto"
    page.reload()
    expect(sidebar.get_by_role("link", name="Weekend in Porto")).to_be_visible()
    expect(page.locator("h1.chat-heading")).to_have_text("Weekend in Porto")


def test_a_blank_rename_is_refused_and_keeps_the_title(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    sidebar = page.locator("#sidebar")
    sidebar.get_by_role("button", name="Rename Long chat").click()
    sidebar.get_by_label("Chat title").fill("   ")
    sidebar.get_by_label("Chat title").press("Enter")
    expect(page.locator(".toast")).to_contain_text("at least one character")
    expect(sidebar.get_by_label("Chat title")).to_be_focused()
    assert app.api("GET", f"/chats/{ids['chat']}")["chat"]["title"] == "Long chat"


def test_the_first_message_titles_an_untitled_chat(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    chat = app.api("POST", "/chats", {"bot_id": ids["bot"]}, 201)["chat"]
    page.goto(f"/#/chat/{chat['id']}")
    expect(page.locator("h1.chat-heading")).to_have_text("Chat with Helper")
    app.fake.script(Reply("Porto has the Ribeira."))
    composer = page.get_by_label("Message", exact=True)
    composer.fill("What should I see in Porto?")
    composer.press("Enter")
    expect(page.locator(".msg.role-assistant").last).to_contain_text("Porto has the Ribeira.")
    expect(page.locator("h1.chat-heading")).to_have_text("What should I see in Porto?")
    expect(page.locator("#sidebar").get_by_role("link", name="What should I see in Porto?")).to_be_visible()
    assert page.title() == "What should I see in Porto? · contextshift"
