"""Code blocks in replies (V5, issue 27): highlighted by the vendored highlight.js, which is loaded only when a
reply has code, with a copy button that puts the exact code on the clipboard."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App, screenshot

pytestmark = pytest.mark.browser

#: Code whose characters a careless copy would change: markup-like text, entities, tabs, trailing spaces,
#: a blank line and non-ASCII.
CODE = 'def greet(name):\n    """Say <b>hi</b> & bye."""\n\treturn f"héllo {name}"  \n\n# done: 1 < 2 > 0'
REPLY = f"Here is the function:\n\n```python\n{CODE}\n```\n\nAnd a shell line:\n\n```\nls -la | wc -l\n```"


def _post(app: App, chat_id: str, role: str, content: str) -> str:
    body = {"role": role, "content": content}
    return app.api("POST", f"/chats/{chat_id}/messages", body, 201)["message"]["id"]  # type: ignore[no-any-return]


def test_a_code_block_is_highlighted_and_copied_exactly(page: Any, app: App) -> None:
    ids = app.setup_chat()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    _post(app, ids["chat"], "user", "Write a greeting function.")
    _post(app, ids["chat"], "assistant", "Plain words, no code here.")
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator(".msg.role-assistant")).to_contain_text("Plain words")
    expect(page.locator(".msg-actions").first).to_be_visible()
    assert not [u for u in fetched if "highlight" in u], "the highlighter loads only when a reply has code"

    reply = _post(app, ids["chat"], "assistant", REPLY)
    page.reload()
    message = page.locator(f"#msg-{reply}")
    blocks = message.locator(".code-block")
    expect(blocks).to_have_count(2)
    python = blocks.nth(0)
    expect(python.locator(".code-lang")).to_have_text("python")
    expect(python.locator("code.hljs .hljs-keyword").first).to_have_text("def")
    expect(python.locator("code .hljs-string").first).to_be_visible()
    assert [u for u in fetched if u.endswith("/vendor/highlight.min.js")]
    # highlighting only wraps the text in spans: what is shown is still the code, character for character
    assert python.locator("code").evaluate("c => c.textContent") == CODE + "\n"
    expect(python.locator("code b")).to_have_count(0)  # the <b> in the code stays text
    plain = blocks.nth(1)
    expect(plain.locator(".code-lang")).to_have_text("code")
    expect(plain.locator("code span")).to_have_count(0)  # no language named: left plain, not guessed

    screenshot(page, "chat-code-block")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app.url)
    copy = python.get_by_role("button", name="Copy code")
    copy.click()
    expect(page.locator(".toast").last).to_contain_text("Code copied.")
    assert page.evaluate("navigator.clipboard.readText()") == CODE
    page.locator(".toast").evaluate_all("items => items.forEach((t) => t.remove())")
    plain.get_by_role("button", name="Copy code").click()
    expect(page.locator(".toast").last).to_contain_text("Code copied.")
    assert page.evaluate("navigator.clipboard.readText()") == "ls -la | wc -l"
