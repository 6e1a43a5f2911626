"""The web UI journey of issue 5 (V5, A4, A5): onboarding → provider, model, bot → a chat with a streamed
reply → a long chat shows excluded messages marked → pin and exclude change the next preview → the prompt
view lists blocks and reasons."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Reply

from .conftest import App, screenshot

pytestmark = pytest.mark.browser

STREAMED = "Hello! I am the fake model, and this reply arrives one word at a time over the event stream."
TOPICS = ["the train to Porto", "a hotel near the river", "a dinner reservation", "the museum tickets", "the budget"]


def meter(page: Any) -> tuple[int, int]:
    """The context meter: prompt tokens of the next prompt, and how many messages it leaves out."""
    used = int(page.locator(".meter-used").inner_text().replace(",", ""))
    excluded = int(page.locator(".meter-excluded").get_attribute("data-count") or "0")
    return used, excluded


def wait_for_change(page: Any, before: tuple[int, int], timeout: float = 8.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = meter(page)
        if now != before:
            return now
        page.wait_for_timeout(50)
    raise AssertionError(f"the context meter did not change from {before}")


def send(page: Any, text: str) -> None:
    composer = page.get_by_label("Message", exact=True)
    composer.fill(text)
    composer.press("Enter")


def test_onboarding_streaming_marks_preview_and_prompt_view(page: Any, app: App) -> None:
    # -- onboarding on an empty database ---------------------------------------------------------------
    page.goto("/")
    expect(page.get_by_role("heading", name="Welcome to contextshift")).to_be_visible()
    expect(page.get_by_role("button", name="Import the examples")).to_be_visible()
    screenshot(page, "onboarding")

    page.get_by_label("Name", exact=True).fill("Local fake")
    page.get_by_label("Kind").select_option("openai")
    page.get_by_label("Base URL").fill(app.fake.base_url)
    page.get_by_label("API key").fill("sk-e2e-SECRET-key")
    page.get_by_role("button", name="Add provider").click()

    expect(page.get_by_role("heading", name="2. Which model?")).to_be_visible()
    page.get_by_label("Model name").fill("gpt-4o")
    page.get_by_label("Context window (tokens)").fill("2000")
    page.get_by_role("button", name="Add model").click()

    expect(page.get_by_role("heading", name="3. Create a bot")).to_be_visible()
    page.get_by_label("Bot name").fill("Helper")
    page.get_by_role("button", name="Create bot and start chatting").click()
    expect(page.locator(".chat-heading")).to_have_text("Chat with Helper")

    providers = app.api("GET", "/providers")["providers"]
    assert [p["name"] for p in providers] == ["Local fake"] and providers[0]["has_api_key"]
    assert "sk-e2e-SECRET-key" not in app.http.get("/api/v2/providers").text
    bot = app.api("GET", "/bots")["bots"][0]
    chat_id = page.locator(".chat-view").get_attribute("data-chat-id")
    assert chat_id and bot["name"] == "Helper"

    # -- a streamed reply: tokens arrive over time, the stop button shows while they do ------------------
    app.fake.script(Reply(STREAMED, chunk_delay=0.08))
    send(page, "Hi there!")
    streaming = page.locator("#streaming-reply")
    expect(streaming).to_contain_text("Hello!")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    partial = streaming.locator(".text").inner_text()
    assert STREAMED not in partial, "the whole reply arrived at once: it was not streamed"
    screenshot(page, "chat-streaming")
    expect(page.locator(".msg.role-assistant:not(.pending)").last).to_contain_text("over the event stream.")
    expect(page.locator("#streaming-reply")).to_have_count(0)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert app.fake.last.json["stream"] is True

    # -- a long chat: messages outside the last prompt are marked with their reason ----------------------
    # Compaction off: this part is about shifting (compaction has its own test).
    app.api("PATCH", f"/bots/{bot['id']}", {"response_reserve": 256, "compaction_enabled": False}, 200)
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        words = " ".join(f"We talked about {TOPICS[i % 5]} and what it costs." for _ in range(4 + i % 3))
        app.api("POST", f"/chats/{chat_id}/messages", {"role": role, "content": f"Note {i}: {words}"}, 201)
    page.reload()
    send(page, "What did we talk about?")
    expect(page.locator(".msg.role-assistant:not(.pending)", has_text="Echo: What did we talk about?")).to_be_visible()
    shifted = page.locator('.msg[data-reason="context-shift"]')
    expect(shifted.first).to_contain_text("not in next prompt: context-shift")
    assert shifted.count() >= 3
    # The history's marks are the next prompt's (the preview); the last prompt's are in the prompt view.
    expect(page.locator(".boundary").first).to_contain_text("The next prompt would start here")
    audit = app.api("GET", f"/chats/{chat_id}/context-audit")["audit"]
    preview = app.api("POST", "/context-preview", {"chat_id": chat_id}, 200)["preview"]
    dropped = [e["identifier"] for e in preview["entries"] if e["reason"] == "context-shift"]
    for message_id in dropped:
        expect(page.locator(f"#msg-{message_id}")).to_have_attribute("data-reason", "context-shift")

    # -- exclude and pin change the next preview ---------------------------------------------------------
    expect(page.locator(".meter-used")).not_to_have_text("…")
    before = meter(page)
    messages = app.api("GET", f"/chats/{chat_id}/messages")["messages"]
    in_context = next(m for m in messages if m["content"].startswith("Note 38"))
    page.locator(f"#msg-{in_context['id']}").get_by_role("button", name="Exclude").click()
    expect(page.locator(f"#msg-{in_context['id']}")).to_contain_text("excluded by you")
    after_exclude = wait_for_change(page, before)
    stored = app.api("GET", f"/chats/{chat_id}/messages")["messages"]
    assert [m["meta"].get("manualExcluded") for m in stored if m["id"] == in_context["id"]] == [True]

    oldest_out = next(m for m in stored if m["id"] in dropped)
    page.locator(f"#msg-{oldest_out['id']}").get_by_role("button", name="Pin").click()
    expect(page.locator(f"#msg-{oldest_out['id']}").get_by_role("button", name="Unpin")).to_have_attribute(
        "aria-pressed", "true"
    )
    wait_for_change(page, after_exclude)

    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    preview = page.locator('.prompt-view[data-kind="preview"]')
    expect(preview.locator(f'.entry[data-identifier="{in_context["id"]}"]')).to_have_attribute("data-reason", "manual")
    expect(preview.locator(f'.entry[data-identifier="{oldest_out["id"]}"]')).to_have_attribute(
        "data-reason", "protected"
    )

    # -- the prompt view of the last audit: blocks in order, reasons, budget, tokenizer, provider messages -
    page.get_by_role("button", name="Last prompt").click()
    view = page.locator('.prompt-view[data-kind="audit"]')
    expect(view).to_contain_text("completed")
    expect(view.locator(".budget-line")).to_contain_text("Context limit 2,000 − reserve 256 = budget 1,744")
    expect(view.locator(".tokenizer-line")).to_contain_text("o200k_base")
    entries = view.locator(".entry:not(.not-loaded)")  # older history the prompt never read is one line
    assert entries.count() == len(audit["entries"])
    for reason in ("protected", "fit", "context-shift"):
        expect(view.locator(f'.entry[data-reason="{reason}"]').first).to_be_visible()
    expect(view.locator('.entry[data-source="input"]')).to_contain_text("What did we talk about?")
    page.get_by_text("Provider messages (").click()
    expect(view.locator(".provider-messages pre")).to_contain_text("What did we talk about?")
    view.locator('.entry[data-reason="context-shift"]').first.scroll_into_view_if_needed()
    screenshot(page, "prompt-view-long-chat")
