"""The bundled examples (issue 5 onboarding): imported on an empty database, their context meter and prompt
preview work before any provider is configured; with a provider their prompt view shows the last audit."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Reply

from .conftest import PHONE, App, screenshot

pytestmark = pytest.mark.browser

NARRATOR = (
    "Brother Tamsin turns the sealed letter over twice before he answers. \u201cThe Abbey bell has not rung in nine "
    "years,\u201d he says quietly, \u201cbut the monks dreamed of fire last night.\u201d Behind him, a lantern gutters."
)


def test_examples_explore_without_a_provider_then_generate(page: Any, app: App, browser: Any) -> None:
    page.goto("/")
    page.get_by_role("button", name="Import the examples").click()
    expect(page.locator(".chat-heading")).to_have_text("Roleplay lorebook")
    assert {b["name"] for b in app.api("GET", "/bots")["bots"]} == {
        "Example: Roleplay lorebook",
        "Example: Support anthropic tools",
        "Example: Travel agent tools",
    }
    expect(page.locator(".chat-link")).to_have_count(3)
    composer = page.get_by_label("Message", exact=True)
    expect(composer).not_to_have_value("")  # the example's current input, as a draft

    # No provider: the meter and the next-prompt preview still work (approximate tokenizer).
    expect(page.locator(".meter-box")).to_contain_text("approximate")
    assert int(page.locator(".meter-excluded").get_attribute("data-count") or "0") > 0
    assert int(page.locator(".meter-summarized").get_attribute("data-count") or "0") > 0
    # Long runs of summarized messages are collapsed until asked for.
    page.get_by_role("button", name=re.compile(r"^Show \d+ summarized messages$")).first.click()
    expect(page.locator('.msg[data-state="summarized"]').first).to_contain_text("summarized")
    page.get_by_role("tab", name="Prompt view").click()
    preview = page.locator('.prompt-view[data-kind="preview"]')
    summary = preview.locator('.entry[data-source="summary"]')
    expect(summary).to_contain_text("Stands for")
    expect(preview.locator('.entry[data-source="lorebook"]').first).to_be_visible()
    summary.scroll_into_view_if_needed()
    screenshot(page, "examples-preview")

    # Sending needs a chat model: the service says so, nothing is stored, the draft stays in the composer.
    draft = composer.input_value()
    before = len(
        app.api("GET", f"/chats/{page.locator('.chat-view').get_attribute('data-chat-id')}/messages")["messages"]
    )
    composer.press("Enter")
    expect(page.locator(".notice-msg.error")).to_contain_text("MODEL_NOT_CONFIGURED")
    expect(page.locator(".notice-msg.error")).to_contain_text("no chat model yet")
    expect(composer).to_have_value(draft)
    after = app.api("GET", f"/chats/{page.locator('.chat-view').get_attribute('data-chat-id')}/messages")["messages"]
    assert len(after) == before

    # A second import adds nothing.
    again = app.api("POST", "/examples/import", {}, 201)
    assert again["imported"] == [] and len(again["skipped"]) == 3

    # With a provider and a model, the example chat generates and the prompt view shows the last audit.
    provider = app.api("POST", "/providers", {"name": "fake", "kind": "openai", "base_url": app.fake.base_url}, 201)[
        "provider"
    ]
    model = app.api(
        "POST",
        "/models",
        {"provider_id": provider["id"], "name": "gpt-4o", "context_window": 1600, "max_output_tokens": 300},
        201,
    )["model"]
    roleplay = next(b for b in app.api("GET", "/bots")["bots"] if b["name"] == "Example: Roleplay lorebook")
    app.api("PATCH", f"/bots/{roleplay['id']}", {"chat_model_id": model["id"], "compaction_enabled": False}, 200)
    page.reload()
    app.fake.script(Reply(NARRATOR, chunk_delay=0.01))
    page.get_by_label("Message", exact=True).press("Enter")  # send the example's draft
    expect(page.locator(".msg.role-assistant:not(.pending)").last).to_contain_text("Brother Tamsin turns")
    expect(page.locator(".boundary").first).to_be_visible()
    page.get_by_label("Message", exact=True).fill("I ask Brother Tamsin what the monks saw in the fire.")
    expect(page.locator(".meter-used")).not_to_have_text("…")
    page.wait_for_timeout(700)  # the debounced preview of the draft
    page.locator(".boundary").first.evaluate("el => el.scrollIntoView({block: 'center'})")
    screenshot(page, "chat-meter")

    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Last prompt").click()
    audit_view = page.locator('.prompt-view[data-kind="audit"]')
    expect(audit_view).to_contain_text("completed")
    expect(audit_view.locator('.entry[data-reason="summarized"]').first).to_be_visible()
    expect(audit_view.locator('.entry[data-source="summary"]')).to_contain_text("Stands for")
    screenshot(page, "prompt-view")

    # The same chat at phone width.
    phone = browser.new_context(
        viewport=PHONE,
        base_url=app.url,
        device_scale_factor=2,
        reduced_motion="reduce",
        extra_http_headers={"Authorization": f"Bearer {app.token}"},
    )
    try:
        small = phone.new_page()
        small.goto(page.url)
        expect(small.locator(".chat-heading")).to_have_text("Roleplay lorebook")
        expect(small.locator(".meter-used")).not_to_have_text("…")
        expect(small.locator("#sidebar")).to_be_hidden()
        small.locator(".boundary").first.evaluate("el => el.scrollIntoView({block: 'center'})")
        screenshot(small, "phone-chat")
        small.get_by_role("button", name="Show chats").click()
        expect(small.locator("#sidebar")).to_be_visible()
        small.keyboard.press("Escape")
        small.get_by_role("button", name="Prompt", exact=True).click()
        expect(small.locator("#inspector")).to_be_visible()
        expect(small.locator(".prompt-view")).to_be_visible()
        screenshot(small, "phone-prompt-view")
    finally:
        phone.close()
