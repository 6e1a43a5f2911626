"""The chat view's actions (V5, issue 11): marks from the next-prompt preview (never stale), pin on a summarized
message, edit, regenerate with versions to page through, continue a partial reply, copy, retry without a
duplicate input, errors kept on their message, markdown, summarized runs, search, subtotals, token counts,
focus after every action and the contrast of out-of-context actions; at laptop and phone width."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.api.test_compaction import SUMMARY
from tests.fakes import Error, Reply

from .conftest import PHONE, App

pytestmark = pytest.mark.browser

#: How long a check right after a turn waits (a 2-core machine shared by several test runs can be slow).
TURN = 15_000
#: The issue's laptop size for the chat screen (the phone test uses PHONE, 390×844).
DESKTOP = {"width": 1280, "height": 800}
#: The WCAG contrast ratio of each action button of an out-of-context message, with every ancestor's opacity
#: applied and its background taken from the nearest element that has one.
CONTRAST_OF_OUT_ACTIONS = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const opacity = (el) => {
    let o = 1;
    for (; el; el = el.parentElement) o *= Number(getComputedStyle(el).opacity);
    return o;
  };
  const buttons = document.querySelectorAll('.msg[data-state="out"] .msg-actions button');
  return [...buttons].map((b) => {
    const fg = rgb(getComputedStyle(b).color);
    const bg = background(b);
    const o = opacity(b);
    const seen = fg.slice(0, 3).map((v, i) => v * o + bg[i] * (1 - o));
    const [light, dark] = [lum(seen), lum(bg)].sort((x, y) => y - x);
    return (light + 0.05) / (dark + 0.05);
  });
}"""
LONG = " ".join(f"word{i}" for i in range(60))


def _messages(app: App, chat_id: str) -> list[dict[str, Any]]:
    return app.api("GET", f"/chats/{chat_id}/messages?limit=500")["messages"]  # type: ignore[no-any-return]


def _fill(app: App, chat_id: str, count: int) -> list[str]:
    ids = []
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        body = {"role": role, "content": f"turn {n}: {LONG}"}
        ids.append(app.api("POST", f"/chats/{chat_id}/messages", body, 201)["message"]["id"])
    return ids


def _chat(page: Any, app: App, *, context_window: int = 8000, viewport: dict[str, int] | None = None) -> dict[str, str]:
    ids = app.setup_chat(context_window=context_window)
    page.set_viewport_size(viewport or DESKTOP)
    return ids


def _send(page: Any, text: str) -> None:
    composer = page.get_by_label("Message", exact=True)
    composer.fill(text)
    composer.press("Enter")


def _reply(page: Any) -> Any:
    return page.locator(".msg.role-assistant:not(.pending)").last


def test_pinning_an_old_message_drops_its_stale_not_in_prompt_mark(page: Any, app: App) -> None:
    ids = _chat(page, app, context_window=600)
    raw = _fill(app, ids["chat"], 16)
    page.goto(f"/#/chat/{ids['chat']}")
    old = page.locator(f"#msg-{raw[2]}")
    expect(old).to_contain_text("not in next prompt: context-shift")
    assert "not in the next prompt" in (old.get_attribute("aria-label") or "")
    old.get_by_role("button", name="Pin").click()
    expect(old.get_by_role("button", name="Unpin")).to_be_focused()  # focus stays on the control used
    expect(old).to_contain_text("pinned")
    expect(old).not_to_contain_text("not in next prompt")
    expect(old).to_have_attribute("aria-label", re.compile(r", in the next prompt$"))
    expect(old).to_have_attribute("data-state", "in")
    # Meter and prompt view read the same preview: they agree, after the change too (pinning it pushed another
    # message out, so the count may stay the same).
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    meter = page.locator(".meter-excluded").get_attribute("data-count")
    expect(page.locator(".prompt-view .counts")).to_contain_text(f"{meter} left out")
    expect(page.locator(f'.prompt-view .entry[data-identifier="{raw[2]}"]')).to_contain_text("sent: protected")
    expect(page.locator(".prompt-view .entry.not-loaded")).to_have_count(
        1 if "not read" in page.locator(".prompt-view .counts").inner_text() else 0
    )


def test_pin_on_a_summarized_message_sends_it_raw_and_the_run_collapses(page: Any, app: App) -> None:
    ids = _chat(page, app, context_window=4000)
    raw = _fill(app, ids["chat"], 12)
    app.fake.script(Reply(SUMMARY, output_tokens=20))
    assert app.api("POST", f"/chats/{ids['chat']}/compact", {}, 200)["status"] == "completed"
    covered = [m["id"] for m in _messages(app, ids["chat"]) if m["summarized_by"]]
    page.goto(f"/#/chat/{ids['chat']}")
    toggle = page.get_by_role("button", name=f"Show {len(covered)} summarized messages")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator(f"#msg-{covered[1]}")).to_have_count(0)
    expect(page.locator(".meter-summarized")).to_have_attribute("data-count", str(len(covered)))
    toggle.click()
    hide = page.get_by_role("button", name=f"Hide {len(covered)} summarized messages")
    expect(hide).to_be_focused()
    target = page.locator(f"#msg-{covered[1]}")
    expect(target).to_contain_text("summarized")
    target.get_by_role("button", name="Pin").click()
    expect(target).to_have_attribute("data-state", "in")
    expect(target).to_contain_text("pinned")
    expect(page.locator(".meter-summarized")).to_have_attribute("data-count", str(len(covered) - 1))
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    expect(page.locator(f'.prompt-view .entry[data-identifier="{covered[1]}"]')).to_contain_text("sent: protected")
    expect(page.locator('.prompt-view .entry[data-source="summary"]')).to_contain_text(
        f"Stands for {len(covered) - 1} messages"
    )
    assert raw[: len(covered)] == covered


def test_markdown_renders_bold_and_code_and_never_runs_html(page: Any, app: App) -> None:
    ids = _chat(page, app)
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    app.api("POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": f"Look: {hostile}"}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(
        Reply(
            "Here is **bold** text.\n\n```python\nprint('hi')\n```\n\n<script>window.__pwned = 3</script>",
            chunk_delay=0.02,
        )
    )
    _send(page, "Show me markdown")
    reply = _reply(page)
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator("pre code")).to_contain_text("print('hi')")
    expect(reply).to_contain_text("<script>window.__pwned = 3</script>")  # shown as text
    user = page.locator(".msg.role-user").first
    expect(user).to_contain_text("<script>window.__pwned = 1</script>")
    assert page.locator(".history script, .history img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_streaming_replies_render_markdown_as_they_come(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("**Loud** " + " ".join(f"w{i}" for i in range(100)), chunk_delay=0.03))
    _send(page, "stream please")
    expect(page.locator("#streaming-reply strong")).to_have_text("Loud")
    expect(page.locator("#streaming-reply")).to_contain_text("w20")  # still streaming, rendered already
    expect(_reply(page)).to_contain_text("w99", timeout=20_000)


def test_regenerate_keeps_earlier_replies_to_page_through(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("First answer."), Reply("Second answer."))
    _send(page, "Name a colour")
    reply = _reply(page)
    expect(reply).to_contain_text("First answer.")
    reply.get_by_role("button", name="Regenerate").click()
    expect(_reply(page)).to_contain_text("Second answer.", timeout=TURN)
    reply = _reply(page)
    expect(reply.locator(".alternative-count")).to_have_text("2 / 2", timeout=TURN)
    expect(reply.get_by_role("button", name="Regenerate")).to_be_focused()
    # The regenerated prompt is the one the first reply answered: the input once, no old reply in it.
    sent = app.fake.last.messages
    assert [m["role"] for m in sent][-1] == "user" and "First answer." not in str(sent)
    reply.get_by_role("button", name="Previous version").click()
    expect(_reply(page)).to_contain_text("First answer.", timeout=TURN)
    expect(_reply(page).locator(".alternative-count")).to_have_text("1 / 2", timeout=TURN)
    expect(_reply(page).get_by_role("button", name="Next version")).to_be_enabled()
    page.reload()
    expect(_reply(page)).to_contain_text("First answer.", timeout=TURN)
    stored = _messages(app, ids["chat"])
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["alternatives"] == 2 and stored[1]["alternative"] == 0


def test_editing_the_last_input_and_regenerating_from_there(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("About cats."), Reply("About dogs."))
    _send(page, "Tell me about cats")
    expect(_reply(page)).to_contain_text("About cats.", timeout=TURN)
    user = page.locator(".msg.role-user").last
    user.get_by_role("button", name="Edit").click()
    box = user.get_by_label("Edit the message")
    expect(box).to_be_focused()
    box.fill("Tell me about dogs")
    user.get_by_role("button", name="Save and regenerate").click()
    expect(_reply(page)).to_contain_text("About dogs.", timeout=TURN)
    assert "Tell me about dogs" in str(app.fake.last.messages[-1])
    stored = _messages(app, ids["chat"])
    assert [m["content"] for m in stored if m["role"] == "user"] == ["Tell me about dogs"]
    assert stored[1]["alternatives"] == 2
    # Edit alone, and cancel with Escape: focus goes back to the Edit button.
    user = page.locator(".msg.role-user").last
    user.get_by_role("button", name="Edit").click()
    user.get_by_label("Edit the message").press("Escape")
    expect(user.get_by_role("button", name="Edit")).to_be_focused()


def test_editing_an_older_input_branches_and_the_prompt_view_follows_the_branch(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("About cats."), Reply("About mice."), Reply("About owls."))
    _send(page, "Tell me about cats")
    expect(_reply(page)).to_contain_text("About cats.", timeout=TURN)
    _send(page, "And mice?")
    expect(_reply(page)).to_contain_text("About mice.", timeout=TURN)
    before = _messages(app, ids["chat"])
    first = page.locator(".msg.role-user").first
    first.get_by_role("button", name="Edit").click()
    first.get_by_label("Edit the message").fill("Tell me about owls")
    expect(first.get_by_role("button", name="Save and regenerate", exact=True)).to_have_count(0)
    expect(first).to_contain_text("The 3 later messages stay with the current version of this message")
    first.get_by_role("button", name="Save as a new branch and regenerate").click()
    expect(_reply(page)).to_contain_text("About owls.", timeout=TURN)
    expect(page.locator(".msg")).to_have_count(2)
    assert [m["content"] for m in app.fake.last.messages] == ["Tell me about owls"]
    owls = _messages(app, ids["chat"])[1]["id"]
    branches = first.get_by_role("group", name="Branches from this message")
    expect(branches).to_contain_text("2 / 2")

    # The next prompt follows the branch shown: the new one, then (paged back) the old one, nothing lost.
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    entry = lambda message_id: page.locator(f'.prompt-view .entry[data-identifier="{message_id}"]')  # noqa: E731
    expect(entry(owls)).to_have_count(1)
    expect(entry(before[3]["id"])).to_have_count(0)
    branches.get_by_role("button", name="Previous branch").click()
    expect(page.locator(".msg")).to_have_count(4)
    expect(first).to_contain_text("Tell me about cats")
    expect(branches).to_contain_text("1 / 2")
    expect(entry(before[3]["id"])).to_have_count(1)
    expect(entry(owls)).to_have_count(0)
    assert [m["id"] for m in _messages(app, ids["chat"])] == [m["id"] for m in before]
    app.fake.script(Reply("About bats."))
    _send(page, "And bats?")
    expect(_reply(page)).to_contain_text("About bats.", timeout=TURN)
    sent = [m["content"] for m in app.fake.last.messages]
    assert sent == ["Tell me about cats", "About cats.", "And mice?", "About mice.", "And bats?"]
    branches.get_by_role("button", name="Next branch").click()
    expect(page.locator(".msg")).to_have_count(2)
    expect(first).to_contain_text("Tell me about owls")


def test_continue_a_partial_reply(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply(" ".join(f"part{i}" for i in range(300)), chunk_delay=0.05))
    _send(page, "A long story, please")
    expect(page.locator("#streaming-reply")).to_contain_text("part3")
    page.get_by_role("button", name="Stop").click()
    reply = _reply(page)
    expect(reply).to_contain_text("partial: stopped")
    before = _messages(app, ids["chat"])[1]["content"]
    app.fake.script(Reply(" and the end."))
    reply.get_by_role("button", name="Continue").click()
    expect(_reply(page)).to_contain_text("and the end.", timeout=TURN)
    expect(_reply(page)).not_to_contain_text("partial")
    stored = _messages(app, ids["chat"])
    assert len(stored) == 2 and stored[1]["content"] == before + " and the end."
    assert app.fake.last.messages[-1]["role"] == "assistant"  # the partial reply went last, to go on from


def test_retry_after_a_failed_turn_without_a_duplicate_input_and_the_error_stays(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Error(500), Error(500))  # the provider client tries a 5xx twice before giving up
    _send(page, "Are you there?")
    user = page.locator(".msg.role-user").last
    expect(user.locator(".msg-error")).to_contain_text("PROVIDER_SERVER_ERROR", timeout=TURN)
    page.reload()  # the error is stored on its message
    user = page.locator(".msg.role-user").last
    expect(user.locator(".msg-error")).to_contain_text("This message was not answered.", timeout=TURN)
    app.fake.script(Reply("Yes, here."))
    user.get_by_role("button", name="Retry").click()
    expect(_reply(page)).to_contain_text("Yes, here.", timeout=TURN)
    stored = _messages(app, ids["chat"])
    assert [(m["role"], m["content"]) for m in stored] == [("user", "Are you there?"), ("assistant", "Yes, here.")]
    expect(page.locator(".msg-error")).to_have_count(0)
    # A regenerate that fails leaves the reply and says so on it, across a reload.
    app.fake.script(Error(500), Error(500))
    _reply(page).get_by_role("button", name="Regenerate").click()
    expect(_reply(page).locator(".msg-error")).to_contain_text("Regenerating this reply failed", timeout=TURN)
    page.reload()
    expect(_reply(page)).to_contain_text("Yes, here.", timeout=TURN)
    expect(_reply(page).locator(".msg-error")).to_contain_text("PROVIDER_SERVER_ERROR", timeout=TURN)


def test_copy_puts_the_text_on_the_clipboard(page: Any, app: App) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    ids = _chat(page, app)
    app.api("POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": "Copy **me** exactly"}, 201)
    page.goto(f"/#/chat/{ids['chat']}")
    page.locator(".msg.role-user").get_by_role("button", name="Copy").click()
    expect(page.locator(".toast")).to_contain_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == "Copy **me** exactly"


def test_focus_after_the_delete_confirmation_goes_to_the_next_message(page: Any, app: App) -> None:
    ids = _chat(page, app)
    raw = _fill(app, ids["chat"], 3)
    page.goto(f"/#/chat/{ids['chat']}")
    first = page.locator(f"#msg-{raw[0]}")
    first.get_by_role("button", name="Delete").click()
    expect(first.get_by_role("button", name="Keep")).to_be_focused()
    first.get_by_role("button", name="Delete").click()
    expect(first).to_have_count(0)
    expect(page.locator(f"#msg-{raw[1]}").get_by_role("button", name="Delete")).to_be_focused()
    assert page.evaluate("document.activeElement !== document.body")


def test_search_finds_chats_by_title_and_by_content(page: Any, app: App) -> None:
    ids = _chat(page, app)
    other = app.api("POST", "/chats", {"bot_id": ids["bot"], "title": "Lisbon trip"}, 201)["chat"]
    said = app.api(
        "POST", f"/chats/{ids['chat']}/messages", {"role": "user", "content": "The zebra crossing was closed"}, 201
    )
    page.goto(f"/#/chat/{ids['chat']}")
    search = page.get_by_label("Search chats by title and content")
    search.fill("lisbon")
    results = page.locator(".search-results .chat-link")
    expect(results).to_have_count(1)
    expect(results).to_contain_text("Lisbon trip")
    search.fill("zebras")  # stemmed: the message says "zebra"
    expect(results).to_have_count(1)
    expect(results).to_contain_text("Long chat")
    expect(results).to_contain_text("zebra crossing")
    expect(search).to_be_focused()
    search.press("Escape")
    expect(page.locator(".search-results")).to_have_count(0)
    # A content hit opens its chat on the message that matched.
    page.goto(f"/#/chat/{other['id']}")
    search = page.get_by_label("Search chats by title and content")
    search.fill("zebra")
    page.locator(".search-results .chat-link").click()
    expect(page.locator(".chat-heading")).to_have_text("Long chat")
    expect(page.locator(f"#msg-{said['message']['id']}")).to_be_focused()


def test_status_lists_stored_tool_calls_and_prompt_view_subtotals(page: Any, app: App) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto("/")
    page.get_by_role("button", name="Import the examples").click()
    expect(page.locator(".chat-link")).to_have_count(3)
    page.locator(".chat-link", has_text="Travel").click()
    expect(page.locator(".chat-heading")).to_contain_text("Travel")
    page.get_by_role("tab", name="Session status").click()
    tools = page.locator(".status-block", has=page.get_by_role("heading", name="Tools used"))
    expect(tools.locator("li")).not_to_have_count(0)
    expect(tools).not_to_contain_text("None in this session")
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    table = page.locator(".prompt-view table.subtotals")
    for label in ("System", "Lorebook", "Memory", "History", "Summary", "Input", "Prompt"):
        expect(table).to_contain_text(label)
    total = int(table.locator("tfoot td").inner_text().replace(",", ""))
    assert total == int(page.locator(".prompt-view .prompt-tokens").inner_text().replace(",", ""))


def test_replies_show_their_token_counts(page: Any, app: App) -> None:
    ids = _chat(page, app)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("Counted reply.", output_tokens=7))
    _send(page, "count me")
    expect(_reply(page).locator(".reply-tokens")).to_have_text("reply 7 tok", timeout=TURN)
    expect(page.locator(".msg.role-user .tokens").first).to_contain_text("tok")


def test_action_buttons_of_out_of_context_messages_pass_wcag_aa(page: Any, app: App) -> None:
    ids = _chat(page, app, context_window=600)
    _fill(app, ids["chat"], 16)
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator('.msg[data-state="out"]').first).to_be_visible()
    ratios = page.evaluate(CONTRAST_OF_OUT_ACTIONS)
    assert ratios and min(ratios) >= 4.5, ratios


def test_the_chat_actions_work_at_phone_width(page: Any, app: App) -> None:
    ids = _chat(page, app, viewport=PHONE)
    page.goto(f"/#/chat/{ids['chat']}")
    app.fake.script(Reply("Phone **answer**."), Reply("Second phone answer."))
    _send(page, "hello from a phone")
    reply = _reply(page)
    expect(reply.locator("strong")).to_have_text("answer")
    button = reply.get_by_role("button", name="Regenerate")
    expect(button).to_be_in_viewport()
    button.click()
    expect(_reply(page)).to_contain_text("Second phone answer.", timeout=TURN)
    expect(_reply(page).locator(".alternative-count")).to_have_text("2 / 2", timeout=TURN)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
