"""The web UI marks the history the ``recall`` strategy brought back (G4a, V5): after a turn, the message
recalled from far back says so, and is not marked as left out."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser


def test_a_recalled_message_is_marked_in_the_chat(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=900, response_reserve=400, context_strategy="recall", compaction_enabled=False)
    chat = f"/chats/{ids['chat']}/messages"
    fact = app.api("POST", chat, {"role": "user", "content": "The vault code for project Falcon is 48213."}, 201)
    for n in range(40):
        role = "user" if n % 2 == 0 else "assistant"
        app.api("POST", chat, {"role": role, "content": f"Small talk number {n} about the weather and lunch."}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("What is the vault code for project Falcon?")
    composer.press("Enter")
    expect(page.locator(".msg.role-assistant:not(.pending)", has_text="Echo: What is the vault code")).to_be_visible()
    audit = app.api("GET", f"/chats/{ids['chat']}/context-audit")["audit"]
    entry = next(e for e in audit["entries"] if e["identifier"] == fact["message"]["id"])
    assert entry["included"] is True and entry["reason"] == "recalled"
    marked = page.locator(f"#msg-{fact['message']['id']}")
    expect(marked).to_have_attribute("data-reason", "recalled")
    expect(marked).to_have_class(re.compile(r"\brecalled\b"))
    expect(marked.locator(".badge", has_text="recalled")).to_be_visible()
    expect(page.locator('.msg[data-reason="context-shift"]').first).to_be_visible()
