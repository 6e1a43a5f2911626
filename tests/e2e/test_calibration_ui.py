"""T5 in the web UI: the context meter says "≈ calibrated" once the provider's usage corrects the estimate, and
the status panel shows the factor."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser


def test_the_meter_says_calibrated_and_the_status_panel_shows_the_factor(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=4000, compaction_enabled=False)
    model = app.api(
        "POST", "/models", {"provider_id": ids["provider"], "name": "mystery-model", "context_window": 4000}, 201
    )["model"]
    app.api("PATCH", f"/bots/{ids['bot']}", {"chat_model_id": model["id"]}, 200)
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator(".meter-box")).to_contain_text("≈ approximate")  # nothing learned yet
    app.fake.count_as(chars_per_token=2.6)
    for turn in range(3):
        app.api("POST", f"/chats/{ids['chat']}/generate", {"content": f"turn {turn} " * 20, "stream": False}, 200)
    factor = app.api("GET", f"/models/{model['id']}")["model"]["calibration"]["factor"]
    page.goto("/#/")
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator(".meter-box")).to_contain_text("≈ calibrated")
    line = page.locator(".status-line.calibration")
    expect(line).to_contain_text(f"×{factor:.2f}")
    expect(line).to_contain_text("from 3 calls")


def test_the_prompt_view_shows_the_calibration_and_the_retry(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=2000, compaction_enabled=False)
    model = app.api(
        "POST", "/models", {"provider_id": ids["provider"], "name": "mystery-model", "context_window": 2000}, 201
    )["model"]
    app.api("PATCH", f"/bots/{ids['bot']}", {"chat_model_id": model["id"]}, 200)
    for n in range(60):
        role = "user" if n % 2 == 0 else "assistant"
        app.api("POST", f"/chats/{ids['chat']}/messages", {"role": role, "content": f"line {n} " * 12}, 201)
    app.fake.count_as(chars_per_token=2.6, window=2000)
    app.api("POST", f"/chats/{ids['chat']}/generate", {"content": "first", "stream": False}, 200)
    app.api("POST", f"/chats/{ids['chat']}/generate", {"content": "second", "stream": False}, 200)
    app.fake.count_as(chars_per_token=1.6, window=2000)  # the model's content got denser: one more overflow
    app.api("POST", f"/chats/{ids['chat']}/generate", {"content": "third", "stream": False}, 200)
    assert [a["outcome"] for a in app.api("GET", f"/chats/{ids['chat']}/context-audit")["audit"]["attempts"]] == [
        "context-length-retry",
        "completed",
    ]
    page.goto(f"/#/chat/{ids['chat']}")
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Last prompt").click()
    expect(page.locator(".prompt-view .calibration-label")).to_contain_text("approximate, calibrated ×")
    expect(page.locator(".prompt-view .attempts-line")).to_contain_text("context-length-retry")
    expect(page.locator(".prompt-view .attempts-line")).to_contain_text("completed")
