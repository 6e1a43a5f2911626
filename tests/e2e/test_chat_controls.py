"""Chat controls (V5, A1, A2, N5): the stop button cancels a streaming reply (what came is kept, marked partial),
a failed generation is explained in plain words in the chat and in the prompt view, the keyboard alone can work
the chat, delete asks first."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Error, Reply

from .conftest import App

pytestmark = pytest.mark.browser

SLOW = " ".join(f"word{i}" for i in range(200))


def test_stop_button_cancels_the_stream(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply(SLOW, chunk_delay=0.05))
    composer = page.get_by_label("Message", exact=True)
    composer.fill("Tell me a very long story.")
    composer.press("Enter")
    expect(page.locator("#streaming-reply")).to_contain_text("word2")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".notice-msg")).to_contain_text("Stopped.")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert app.fake.wait_for(lambda: app.fake.last.disconnected.is_set(), timeout=5)

    def cancelled() -> bool:
        audit = app.api("GET", f"/chats/{ids['chat']}/context-audit")["audit"]
        return audit is not None and audit["status"] == "cancelled"

    assert app.fake.wait_for(cancelled, timeout=5)
    messages = app.api("GET", f"/chats/{ids['chat']}/messages")["messages"]
    # N5: what was streamed before the stop is kept, marked partial, and the chat shows it so.
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["meta"]["partial"] is True and messages[1]["meta"]["partial_reason"] == "cancelled"
    assert messages[1]["content"] and SLOW.startswith(messages[1]["content"])
    page.reload()
    expect(page.locator(".msg.role-assistant").last).to_contain_text("partial: stopped")
    # The prompt view says it in plain words.
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Last prompt").click()
    expect(page.locator(".prompt-view .error-box")).to_contain_text("GENERATION_CANCELLED")
    expect(page.locator(".prompt-view .error-box")).to_contain_text("stopped before it finished")


def test_failed_generation_in_plain_words(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Error(401))
    composer = page.get_by_label("Message", exact=True)
    composer.fill("Hello?")
    composer.press("Enter")
    # The input is kept and the error stays on it (a reload shows it too), in plain words.
    notice = page.locator(".msg.role-user .msg-error")
    expect(notice).to_contain_text("PROVIDER_AUTH")
    expect(notice).to_contain_text("refused the API key")
    assert "SECRET" not in page.content()
    notice.get_by_role("button", name="Open the prompt view").click()
    box = page.locator('.prompt-view[data-kind="audit"] .error-box')
    expect(box).to_contain_text("PROVIDER_AUTH")
    expect(page.locator('.prompt-view[data-kind="audit"]')).to_contain_text("failed")

    # Over budget: nothing is sent, the text goes back into the composer, the reason is explained.
    requests = len(app.fake.requests)
    app.api("PATCH", f"/bots/{ids['bot']}", {"system_prompt": "Rules. " * 4000}, 200)
    page.reload()
    composer.fill("Still there?")
    expect(page.locator(".meter-text")).to_contain_text("Over budget")
    composer.press("Enter")
    expect(page.locator(".notice-msg.error")).to_contain_text("TOKEN_BUDGET_EXCEEDED")
    expect(page.locator(".notice-msg.error")).to_contain_text("Nothing was sent to the model")
    expect(composer).to_have_value("Still there?")
    assert len(app.fake.requests) == requests


def test_keyboard_only_chat_and_confirmed_delete(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    for text in ("First note", "Second note"):
        app.api("POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": text}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    expect(composer).to_be_focused()
    page.keyboard.type("Typed with the keyboard")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(composer).to_have_value("Typed with the keyboard\nsecond line")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.role-assistant:not(.pending)")).to_contain_text("Echo: Typed with the keyboard")

    # Tabs of the side panel move with the arrow keys.
    page.get_by_role("tab", name="Session status").focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Prompt view")).to_be_focused()
    expect(page.get_by_role("tab", name="Prompt view")).to_have_attribute("aria-selected", "true")

    # Delete asks first; "Keep" keeps, "Delete" deletes.
    first = app.api("GET", f"/chats/{ids['chat']}/messages")["messages"][0]
    item = page.locator(f"#msg-{first['id']}")
    item.get_by_role("button", name="Delete").focus()
    page.keyboard.press("Enter")
    expect(item).to_contain_text("Delete this message?")
    item.get_by_role("button", name="Keep").click()
    expect(item).not_to_contain_text("Delete this message?")
    item.get_by_role("button", name="Delete").click()
    item.get_by_role("button", name="Delete").click()
    expect(item).to_have_count(0)
    remaining = app.api("GET", f"/chats/{ids['chat']}/messages")["messages"]
    assert first["id"] not in {m["id"] for m in remaining}
