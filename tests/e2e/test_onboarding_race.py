"""The onboarding form and what the user made meanwhile (issue 27): a step already done elsewhere (another tab,
the API) is not done twice, and a view the user went to while the onboarding loaded is not drawn over."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser


def test_a_step_done_in_another_tab_is_not_done_twice(page: Any, app: App) -> None:
    page.goto("/")
    expect(page.get_by_role("heading", name="1. Where do replies come from?")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("From the onboarding")
    page.get_by_label("Kind").select_option("openai")
    page.get_by_label("Base URL").fill(app.fake.base_url)
    # Meanwhile, another tab adds a provider, a model and a bot.
    provider = app.api(
        "POST", "/providers", {"name": "Other tab", "kind": "openai", "base_url": app.fake.base_url}, 201
    )
    app.api("POST", "/models", {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "type": "chat"}, 201)
    page.get_by_role("button", name="Add provider").click()
    expect(page.get_by_text("Nothing was added twice.")).to_be_visible()
    expect(page.get_by_role("heading", name="3. Create a bot")).to_be_visible()
    assert [p["name"] for p in app.api("GET", "/providers")["providers"]] == ["Other tab"]

    page.get_by_label("Bot name").fill("Onboarding bot")
    model = app.api("GET", "/models")["models"][0]
    app.api("POST", "/bots", {"name": "Other tab's bot", "chat_model_id": model["id"]}, 201)
    page.get_by_role("button", name="Create bot and start chatting").click()
    expect(page.get_by_role("heading", name="You are set up.")).to_be_visible()
    assert [b["name"] for b in app.api("GET", "/bots")["bots"]] == ["Other tab's bot"]


def test_a_page_opened_while_the_onboarding_loads_is_not_drawn_over(page: Any, app: App) -> None:
    page.goto("/#/providers")
    expect(page.get_by_role("form", name="Add a provider")).to_be_visible()
    held: list[Any] = []

    def hold_first(route: Any) -> None:  # the onboarding's catalog load waits; every later one goes through
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/api/v2/chats?limit=500", hold_first)
    page.evaluate("() => { location.hash = '#/welcome'; }")
    page.wait_for_function("() => location.hash === '#/welcome'")
    while not held:
        page.wait_for_timeout(20)
    page.evaluate("() => { location.hash = '#/bots'; }")
    expect(page.locator(".onboarding")).to_have_count(0)
    expect(page.get_by_role("heading", name="Bots", exact=True)).to_be_visible()
    held[0].continue_()
    page.wait_for_function("() => true")
    page.wait_for_timeout(300)  # not a timing assertion: gives the released load the chance to draw, wrongly
    expect(page.get_by_role("heading", name="Bots", exact=True)).to_be_visible()
    expect(page.locator(".onboarding")).to_have_count(0)
