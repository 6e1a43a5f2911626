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
