"""The chat's model picker (issue 27): a chat uses the bot's model until another is chosen for it; the choice is
stored on the chat, the meter and the prompt view follow its window, the next turn goes to its provider, and the
audit (the prompt view's "Last prompt") names it. Against the installed wheel, in Chromium."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Reply

from .conftest import App

pytestmark = pytest.mark.browser

TURN = 15_000


def test_a_chat_model_chosen_in_the_chat_view_answers_and_the_audit_names_it(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    provider = {"name": "second", "kind": "anthropic", "base_url": app.fake.base_url, "api_key": "sk-ant-E2E"}
    second = app.api("POST", "/providers", provider, 201)["provider"]
    model = {"provider_id": second["id"], "name": "claude-3-5-haiku", "type": "chat", "context_window": 3000}
    other = app.api("POST", "/models", model, 201)["model"]
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/#/chat/{ids['chat']}")
    picker = page.get_by_label("Model", exact=True)
    expect(picker).to_have_value("")
    expect(picker.locator("option:checked")).to_have_text("Bot's model (gpt-4o · fake)")
    expect(page.locator(".meter-text")).to_have_attribute("title", re.compile("context window 8,000 "))

    picker.select_option(other["id"])
    expect(picker).to_be_focused()
    expect(page.locator(".meter-text")).to_have_attribute("title", re.compile("context window 3,000 "))
    assert app.api("GET", f"/chats/{ids['chat']}", None, 200)["chat"]["model_id"] == other["id"]
    app.fake.script(Reply("Hello from the other model."))
    composer = page.get_by_label("Message", exact=True)
    composer.fill("Hello")
    composer.press("Enter")
    expect(page.locator(".msg.role-assistant:not(.pending)").last).to_contain_text("Hello from", timeout=TURN)
    assert app.fake.last.protocol == "anthropic" and app.fake.last.body["model"] == "claude-3-5-haiku"
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Last prompt").click()
    expect(page.locator(".prompt-panel")).to_contain_text("claude-3-5-haiku")

    page.reload()  # stored on the chat: the picker shows it after a reload
    expect(page.get_by_label("Model", exact=True)).to_have_value(other["id"])
    page.get_by_label("Model", exact=True).select_option("")
    expect(page.locator(".meter-text")).to_have_attribute("title", re.compile("context window 8,000 "))
    assert app.api("GET", f"/chats/{ids['chat']}", None, 200)["chat"]["model_id"] is None
