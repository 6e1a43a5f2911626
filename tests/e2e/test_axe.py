"""Accessibility and phone width on every main screen (issue 11): a scan with axe-core (vendored under
``tests/e2e/vendor/axe-core``, so it runs offline) finds no serious or critical WCAG 2.1 A/AA violation, at laptop
size and at phone width (390×844), and no screen scrolls sideways on a phone.

axe is injected into the page by the test (a browser context that bypasses the app's CSP for that one script);
the app itself is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import LAPTOP, PHONE, App

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
#: The impacts that fail the scan; "moderate" and "minor" findings are reported by axe but not failed here.
FAILING = ("serious", "critical")

SCAN = """
async () => {
  const result = await axe.run(document, {
    runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
    resultTypes: ["violations"],
  });
  return result.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ") + " :: " + (n.failureSummary || "").split("\\n")[1]),
  }));
}
"""

#: How far the page is wider than the viewport, in CSS pixels (0 when nothing scrolls sideways).
OVERFLOW = "() => Math.max(0, document.documentElement.scrollWidth - window.innerWidth)"


def _chat_with_history(app: App) -> dict[str, str]:
    """A chat whose older messages no longer fit the window, so the history shows out-of-context marks."""
    ids = app.setup_chat(context_window=600)
    for turn in range(12):
        question = {"role": "user", "content": f"Question {turn}: " + "words " * 30}
        app.api("POST", f"/chats/{ids['chat']}/messages", question, 201)
        app.api(
            "POST",
            f"/chats/{ids['chat']}/messages",
            {"role": "assistant", "content": f"**Answer {turn}**\n\n```python\nprint({turn})\n```\n" + "more " * 30},
            201,
        )
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Likes green tea."}, 201)
    entries = [{"keys": ["tea"], "content": "Tea grows on hills."}, {"keys": ["hill"], "content": "Hills are green."}]
    lore = app.api("POST", "/lorebooks", {"name": "Lore", "entries": entries}, 201)
    return {**ids, "lorebook": lore["lorebook"]["id"]}


def _screens(ids: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, URL, a selector that is there once the screen has rendered)."""
    return [
        ("home", "/#/", ".card"),
        ("welcome", "/#/welcome", ".onboarding"),
        ("chat", f"/#/chat/{ids['chat']}", ".meter-used"),
        ("bots", "/#/bots", ".card"),
        ("bot settings", f"/#/bot/{ids['bot']}", ".compaction-settings"),
        ("bot compaction", f"/#/bot/{ids['bot']}/compaction", ".tabpanel:not([hidden]) .help"),
        ("providers", "/#/providers", ".provider-card"),
        ("endpoint", "/#/endpoint", "main h1"),
        ("bot memories", f"/#/bot/{ids['bot']}/memories", ".memory-item"),
        ("lorebooks", "/#/lorebooks", ".lorebook-list"),
        ("lorebook editor", f"/#/lorebook/{ids['lorebook']}", ".lore-entry"),
    ]


def _scan(tab: Any) -> list[dict[str, Any]]:
    if not tab.evaluate("() => typeof window.axe !== 'undefined'"):
        tab.add_script_tag(path=str(AXE))
    violations: list[dict[str, Any]] = tab.evaluate(SCAN)
    return [v for v in violations if v["impact"] in FAILING]


@pytest.fixture
def scanner(browser: Any, app: App) -> Any:
    def open_tab(viewport: dict[str, int]) -> Any:
        context = browser.new_context(viewport=viewport, base_url=app.url, reduced_motion="reduce", bypass_csp=True)
        context.set_default_timeout(30_000)
        tab = context.new_page()
        tab.goto(f"/?token={app.token}")
        return tab

    return open_tab


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_every_main_screen_has_no_serious_accessibility_violation(scanner: Any, app: App, size: str) -> None:
    ids = _chat_with_history(app)
    tab = scanner(LAPTOP if size == "laptop" else PHONE)
    found: dict[str, list[dict[str, Any]]] = {}
    for name, url, ready in _screens(ids):
        tab.goto(url)
        tab.locator(ready).first.wait_for()
        tab.wait_for_timeout(300)
        if violations := _scan(tab):
            found[name] = violations
    tab.goto(f"/#/chat/{ids['chat']}")
    if size == "phone":  # the details panel is closed on a phone: the chat's "Prompt" button opens it
        tab.locator(".chat-head-actions").get_by_role("button", name="Prompt", exact=True).click()
    else:
        tab.get_by_role("tab", name="Prompt view").click()
    tab.get_by_role("button", name="Next prompt (preview)").click()
    tab.locator(".prompt-view").wait_for()
    if violations := _scan(tab):
        found["prompt view"] = violations
    tab.get_by_role("tab", name="Memories").click()
    tab.locator(".memories-panel .memory-item").first.wait_for()
    if violations := _scan(tab):
        found["chat memories"] = violations
    tab.context.close()
    assert found == {}


def test_the_sign_in_screen_has_no_serious_accessibility_violation(browser: Any, app: App) -> None:
    context = browser.new_context(viewport=PHONE, base_url=app.url, reduced_motion="reduce", bypass_csp=True)
    context.set_default_timeout(30_000)
    tab = context.new_page()
    tab.goto("/#/signin")
    tab.locator("main form").first.wait_for()
    violations = _scan(tab)
    overflow = tab.evaluate(OVERFLOW)
    context.close()
    assert (violations, overflow) == ([], 0)


def test_no_main_screen_scrolls_sideways_at_phone_width(scanner: Any, app: App) -> None:
    ids = _chat_with_history(app)
    tab = scanner(PHONE)
    wide: dict[str, int] = {}
    for name, url, ready in _screens(ids):
        tab.goto(url)
        tab.locator(ready).first.wait_for()
        tab.wait_for_timeout(300)
        if overflow := tab.evaluate(OVERFLOW):
            wide[name] = overflow
    tab.context.close()
    assert wide == {}
