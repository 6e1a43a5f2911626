"""Labelled controls on every main screen (issue 5: keyboard-usable, labelled controls): each visible input,
select and textarea has a label, each button and link has a name, and nothing needs a mouse-only element."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import App

pytestmark = pytest.mark.browser

UNLABELLED = """
() => {
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const problems = [];
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (!visible(el) || el.type === "hidden") continue;
    const named = el.labels?.length || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!named) problems.push(`unlabelled ${el.tagName.toLowerCase()} ${el.name || el.id}`);
  }
  for (const el of document.querySelectorAll("button, a[href], [role=tab]")) {
    if (!visible(el)) continue;
    const name = (el.getAttribute("aria-label") || el.textContent || el.title || "").trim();
    if (!name) problems.push(`nameless ${el.tagName.toLowerCase()} ${el.outerHTML.slice(0, 80)}`);
  }
  for (const el of document.querySelectorAll("[onclick], div[tabindex], span[tabindex]")) {
    if (el.getAttribute("role") === "tabpanel" || el.matches(".history")) continue;
    problems.push(`clickable non-control ${el.outerHTML.slice(0, 80)}`);
  }
  return problems;
}
"""


def test_main_screens_have_labelled_controls(page: Any, app: App) -> None:
    page.goto("/")
    page.get_by_role("heading", name="Welcome to contextshift").wait_for()
    assert page.evaluate(UNLABELLED) == []
    ids = app.setup_chat(context_window=4000)
    app.api("POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": "Hello"}, 201)
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Likes tea."}, 201)
    lore = app.api("POST", "/lorebooks", {"name": "Lore", "entries": [{"keys": ["tea"], "content": "Tea."}]}, 201)
    screens = [
        (f"/#/chat/{ids['chat']}", ".meter-used"),
        (f"/#/bot/{ids['bot']}", ".compaction-settings"),
        (f"/#/bot/{ids['bot']}/compaction", ".tabpanel:not([hidden]) .help"),
        ("/#/providers", ".provider-card"),
        ("/#/bots", ".card"),
        ("/#/welcome", ".onboarding"),
        (f"/#/bot/{ids['bot']}/memories", ".memory-item"),
        ("/#/lorebooks", ".lorebook-list"),
        (f"/#/lorebook/{lore['lorebook']['id']}", ".lore-entry"),
    ]
    for url, ready in screens:
        page.goto(url)
        page.locator(ready).first.wait_for()
        page.wait_for_timeout(300)
        assert page.evaluate(UNLABELLED) == [], url
    page.goto(f"/#/chat/{ids['chat']}")
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    page.locator(".prompt-view").wait_for()
    assert page.evaluate(UNLABELLED) == []
    page.get_by_role("tab", name="Memories").click()
    page.locator(".memories-panel .memory-item").wait_for()
    assert page.evaluate(UNLABELLED) == []
