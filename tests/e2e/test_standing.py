"""Standing instructions in the chat view (G4b): an old one is marked and sent, and the user can dismiss it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser

LONG = " ".join(f"word{i}" for i in range(60))


def test_an_old_standing_instruction_is_marked_in_the_next_prompt_and_can_be_dismissed(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=600)
    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ids["chat"]
    fact = app.api("POST", f"/chats/{chat}/messages", {"role": "user", "content": "I'm lactose intolerant."}, 201)
    for n in range(16):
        body = {"role": "user" if n % 2 else "assistant", "content": f"turn {n}: {LONG}"}
        app.api("POST", f"/chats/{chat}/messages", body, 201)
    page.goto(f"/#/chat/{chat}")
    old = page.locator(f"#msg-{fact['message']['id']}")
    expect(old).to_contain_text("standing instruction")
    expect(old).to_have_attribute("data-reason", "standing")
    expect(old).to_have_attribute("aria-label", re.compile(r"in the next prompt as a standing instruction$"))
    old.get_by_role("button", name="Dismiss instruction").click()
    expect(old.get_by_role("button", name="Pin")).to_be_focused()
    expect(old).not_to_contain_text("standing instruction")
    expect(old).to_contain_text("not in next prompt: context-shift")
    assert app.api("GET", f"/chats/{chat}/messages?limit=500")["messages"][0]["standing"] is False
