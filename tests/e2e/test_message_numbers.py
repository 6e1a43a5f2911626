"""Message numbers in the chat view (issue 27: "after 'regenerate from here' the new reply is numbered #55 after
#39"): a message's number is its place among the chat's messages, #1, #2, #3… with no gaps after a branch, a
rewind or a delete, the same in the prompt view's links, and on older pages loaded later."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import Reply

from .conftest import App

pytestmark = pytest.mark.browser

#: How long a check right after a turn waits (a 2-core machine shared by several test runs can be slow).
TURN = 15_000
#: More messages than the history's first page (the newest 200), so that one older page is loaded on demand.
FILLED = 203


def _numbers(count: int, first: int = 1) -> list[str]:
    return [f"#{n}" for n in range(first, first + count)]


def _messages(app: App, chat_id: str) -> list[dict[str, Any]]:
    return app.api("GET", f"/chats/{chat_id}/messages?limit=500")["messages"]  # type: ignore[no-any-return]


def _has_gaps(app: App, chat_id: str) -> bool:
    """Whether the stored seqs of the chat's messages skip some numbers (they are never reused)."""
    seqs = [m["seq"] for m in _messages(app, chat_id)]
    return seqs != list(range(seqs[0], seqs[0] + len(seqs)))


def _send(page: Any, text: str, answer: str) -> None:
    composer = page.get_by_label("Message", exact=True)
    composer.fill(text)
    composer.press("Enter")
    expect(page.locator(".msg.role-assistant:not(.pending)").last).to_contain_text(answer, timeout=TURN)


def test_numbers_have_no_gap_after_a_branch_and_a_rewind_also_in_the_prompt_view(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    numbers = page.locator(".msg .msg-head .seq")
    app.fake.script(Reply("About cats."), Reply("About mice."), Reply("About owls."), Reply("About bats."))
    _send(page, "Tell me about cats", "About cats.")
    _send(page, "And mice?", "About mice.")
    expect(numbers).to_have_text(_numbers(4))

    # A branch from the first message parks the later ones: its reply is #2, the next exchange #3 and #4.
    first = page.locator(".msg.role-user").first
    first.get_by_role("button", name="Edit").click()
    first.get_by_label("Edit the message").fill("Tell me about owls")
    first.get_by_role("button", name="Save as a new branch and regenerate").click()
    expect(page.locator(".msg.role-assistant:not(.pending)").last).to_contain_text("About owls.", timeout=TURN)
    expect(numbers).to_have_text(_numbers(2), timeout=TURN)
    _send(page, "And bats?", "About bats.")
    expect(numbers).to_have_text(_numbers(4), timeout=TURN)
    assert _has_gaps(app, ids["chat"])  # what the numbers used to show
    expect(page.locator(".msg").last).to_have_attribute("aria-label", re.compile(r", message 4(,|$)"))

    # The prompt view's links to the chat say the same numbers.
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    shown = page.locator(".prompt-view .entry .show-in-chat")
    expect(shown).to_have_count(4, timeout=TURN)
    labels = [shown.nth(n).get_attribute("aria-label") for n in range(4)]
    assert labels == [f"Show message {n} in the chat" for n in range(1, 5)]

    # A rewind to the owls' reply deletes the two after it; the next exchange is #3 and #4 again.
    owls = _messages(app, ids["chat"])[1]["id"]
    assert app.api("POST", f"/chats/{ids['chat']}/messages/{owls}/rewind", {}, 200) == {"deleted": 2}
    page.reload()
    expect(numbers).to_have_text(_numbers(2), timeout=TURN)
    app.fake.script(Reply("About moles."))
    _send(page, "And moles?", "About moles.")
    expect(numbers).to_have_text(_numbers(4), timeout=TURN)
    assert _has_gaps(app, ids["chat"])


def test_older_messages_loaded_later_continue_the_numbers_after_a_delete(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    made = []
    for n in range(FILLED):
        body = {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"}
        made.append(app.api("POST", f"/chats/{ids['chat']}/messages", body, 201)["message"]["id"])
    app.api("DELETE", f"/chats/{ids['chat']}/messages/{made[5]}", expect=200)
    page.goto(f"/#/chat/{ids['chat']}")
    numbers = page.locator(".msg .msg-head .seq")

    # The newest 200 of the 202 messages left are #3–#202; the older page brings #1 and #2, no number twice.
    expect(numbers).to_have_count(200, timeout=TURN)
    expect(numbers.first).to_have_text("#3")
    expect(numbers.last).to_have_text(f"#{FILLED - 1}")
    page.get_by_role("button", name="Load older messages").click()
    expect(numbers).to_have_count(FILLED - 1, timeout=TURN)
    assert numbers.all_inner_texts() == _numbers(FILLED - 1)
    expect(page.locator(".msg").nth(5)).to_contain_text("turn 6")
    expect(page.locator(".msg").nth(5).locator(".seq")).to_have_text("#6")
