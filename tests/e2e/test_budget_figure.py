"""One budget figure (issue 27): the context meter under the composer and the session status panel show the
next prompt's tokens against the same budget, the window less the reply's reserve."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser


def test_the_meter_and_the_status_panel_show_the_same_budget(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=2048, response_reserve=256)
    for i in range(6):
        role = "user" if i % 2 == 0 else "assistant"
        app.api("POST", f"/chats/{ids['chat']}/messages", {"role": role, "content": f"Turn {i}: the plan."}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator(".meter-budget")).to_have_text("1,792")
    status = page.locator(".status-panel")
    expect(status.locator(".status-budget")).to_have_text("1,792")
    expect(status.locator(".window-line")).to_contain_text("context window 2,048 − 256 reserved for the reply")
    used = page.locator(".meter-used").inner_text()
    expect(status.locator(".status-used")).to_have_text(used)
