"""The web UI lists the caller's recent calls to the OpenAI-compatible endpoint and shows one call's audit (V7)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from playwright.sync_api import expect

from .conftest import App, screenshot

pytestmark = pytest.mark.browser


def test_recent_endpoint_calls_are_listed_with_what_was_left_out(page: Any, app: App) -> None:
    app.setup_chat(context_window=600)
    client = openai.OpenAI(base_url=f"{app.url}/v1", api_key=app.token, max_retries=0)
    history: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."}]
    for n in range(30):
        history += [
            {"role": "user", "content": f"question {n} " + "about the weather " * 5},
            {"role": "assistant", "content": f"answer {n} " + "it is sunny " * 5},
        ]
    history.append({"role": "user", "content": "and tomorrow?"})
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, max_tokens=100)  # type: ignore[arg-type]
    excluded = int(raw.headers["x-contextshift-excluded"])
    assert excluded > 0

    page.goto("/#/endpoint")
    expect(page.get_by_role("heading", name="OpenAI- and Anthropic-compatible endpoint")).to_be_visible()
    expect(page.locator("pre.snippet").first).to_contain_text(f'OpenAI(base_url="{app.url}/v1"')
    expect(page.locator("pre.snippet").nth(1)).to_contain_text(f'Anthropic(base_url="{app.url}"')
    card = page.locator(".card", has_text="gpt-4o")
    expect(card).to_contain_text(f"{excluded} message(s) left out")
    expect(card).to_contain_text("completed")
    card.get_by_role("link", name="gpt-4o").click()
    expect(page.get_by_role("heading", name="Endpoint call")).to_be_visible()
    expect(page.locator(".prompt-view")).to_contain_text("and tomorrow?")
    screenshot(page, "endpoint-call")
