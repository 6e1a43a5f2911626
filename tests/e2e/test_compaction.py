"""Compaction in the web UI (V5, C4, C6, C12, C14): the bot's compaction settings and model picker, the
session status panel's "Compact now", the summary in the history, the bot's Compaction tab, slash commands."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import FakeProvider, Reply

from .conftest import App, screenshot

pytestmark = pytest.mark.browser

SUMMARY = (
    "Summary: planning a long weekend in Porto. Train from Lisbon at 09:00 (34 EUR each), hotel Ribeira Flats "
    "by the river (2 nights, 180 EUR), dinner at Cantinho booked for Saturday 20:00, museum tickets still open."
)
TOPICS = ["the train from Lisbon", "the hotel by the river", "the dinner booking", "the museum tickets"]


def fill_history(app: App, chat_id: str, count: int = 30) -> None:
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Turn {i}: " + " ".join(f"Let us settle {TOPICS[i % 4]} and note the price." for _ in range(3))
        app.api("POST", f"/chats/{chat_id}/messages", {"role": role, "content": text}, 201)


def test_compaction_settings_compact_now_summary_and_log(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    fill_history(app, ids["chat"])
    # A separate summarizer on a second fake provider, and models the picker must not offer.
    with FakeProvider() as summarizer:
        provider = app.api(
            "POST", "/providers", {"name": "summarizer", "kind": "openai", "base_url": summarizer.base_url}, 201
        )["provider"]
        mini = app.api(
            "POST", "/models", {"provider_id": provider["id"], "name": "gpt-4o-mini", "context_window": 16000}, 201
        )["model"]
        app.api("POST", "/models", {"provider_id": provider["id"], "name": "no-window-model"}, 201)
        codex = app.api(
            "POST", "/providers", {"name": "codex", "kind": "openai-codex", "base_url": summarizer.base_url}, 201
        )["provider"]
        app.api("POST", "/models", {"provider_id": codex["id"], "name": "codex-mini", "context_window": 9000}, 201)

        # -- the bot's settings: ratio only when the threshold is above 0; the picker lists eligible models -
        page.goto(f"/#/bot/{ids['bot']}")
        picker = page.get_by_label("Compaction model")
        expect(picker).to_be_visible()
        options = picker.locator("option").all_inner_texts()
        assert options[0] == "Use chat model (default)"
        assert any("gpt-4o-mini" in o for o in options) and any(o.startswith("gpt-4o ·") for o in options)
        assert not any("codex-mini" in o or "no-window-model" in o for o in options), options
        expect(page.get_by_label("Compaction enabled")).to_be_checked()
        threshold = page.get_by_label("Threshold (tokens, 0 = automatic)")
        expect(threshold).to_have_value("0")
        expect(page.get_by_label("Ratio (legacy)")).to_be_hidden()
        threshold.fill("3000")
        expect(page.get_by_label("Ratio (legacy)")).to_be_visible()
        threshold.fill("0")
        expect(page.get_by_label("Ratio (legacy)")).to_be_hidden()
        picker.select_option(mini["id"])
        page.locator(".compaction-settings").evaluate("el => el.scrollIntoView({block: 'center'})")
        screenshot(page, "bot-settings")
        page.get_by_role("button", name="Save settings").click()
        expect(page.get_by_text("Settings saved.")).to_be_visible()
        bot = app.api("GET", f"/bots/{ids['bot']}")["bot"]
        assert bot["compaction_model_id"] == mini["id"] and bot["compaction_threshold"] == 0
        assert bot["compaction_ratio_used"] is False

        # -- the session status panel and "Compact now" -------------------------------------------------
        summarizer.script(*[Reply(SUMMARY)] * 4)
        page.goto(f"/#/chat/{ids['chat']}")
        status = page.locator(".status-panel")
        expect(status).to_contain_text("Automatic compaction")
        expect(status.locator(".status-line").first).to_contain_text("of 6,976 tokens")
        page.get_by_role("button", name="Compact now").click()
        expect(status.locator(".compact-result")).to_contain_text("Compacted")
        expect(page.locator(".summary-card")).to_contain_text("Summary: planning a long weekend in Porto")
        # A long run of summarized messages is collapsed until asked for.
        page.get_by_role("button", name=re.compile(r"^Show \d+ summarized messages$")).click()
        summarized = page.locator(".msg.summarized")
        expect(summarized.first).to_contain_text("summarized")
        assert summarized.count() >= 2
        expect(status).to_contain_text("Last compaction")
        expect(status.locator(".log-item")).to_contain_text("completed")
        assert summarizer.requests and not [r for r in app.fake.requests if "chat/completions" in r.path]
        screenshot(page, "status-panel")
        page.locator(".summary-card").evaluate("el => el.scrollIntoView({block: 'center'})")
        screenshot(page, "chat-compacted")

        # The prompt preview now carries the stored summary in place of what it covers.
        page.get_by_role("tab", name="Prompt view").click()
        page.get_by_role("button", name="Next prompt (preview)").click()
        summary_block = page.locator('.prompt-view[data-kind="preview"] .entry[data-source="summary"]')
        expect(summary_block).to_contain_text("Summary: planning a long weekend in Porto")
        expect(summary_block.locator(".stands-for")).to_contain_text(f"Stands for {summarized.count()} messages")

        # -- the bot's Compaction tab: the log -----------------------------------------------------------
        page.goto(f"/#/bot/{ids['bot']}/compaction")
        log = page.locator(".log-row").first
        expect(log).to_contain_text("manual")
        expect(log).to_contain_text("gpt-4o-mini")
        expect(log.locator(".badge").first).to_have_text("completed")
        detail = page.locator(".log-detail").first
        detail.locator("summary").click()
        expect(detail).to_contain_text("museum tickets still open")
        screenshot(page, "compaction-log")

        # -- "Use chat model (default)" resets the compaction model to null ------------------------------
        page.get_by_role("tab", name="Settings").click()
        page.get_by_label("Compaction model").select_option("")
        page.get_by_role("button", name="Save settings").click()
        expect(page.get_by_text("Settings saved.")).to_be_visible()
        assert app.api("GET", f"/bots/{ids['bot']}")["bot"]["compaction_model_id"] is None


def test_slash_commands_are_answered_in_the_chat(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("/sta")
    expect(page.locator(".command-hint")).to_be_visible()
    composer.fill("/status")
    composer.press("Enter")
    answer = page.locator(".msg.command.role-assistant").last
    expect(answer).to_contain_text("Context:")
    expect(answer).to_contain_text("8,000")
    expect(page.locator(".msg.command.role-user").last).to_contain_text("/status")
    composer.fill("/compact")
    composer.press("Enter")
    expect(page.locator(".msg.command.role-assistant")).to_have_count(2)
    expect(page.locator(".msg.command.role-assistant").last).to_contain_text("compact")
    assert app.fake.requests == [], "a slash command must not call the chat model"
