"""The memories and lorebook editors (issue 11): a daily user lists, adds, edits and deletes a bot's memories (in
the bot's Memories tab and in a chat's side panel) and edits a lorebook and all of its entries' fields; each change
shows in the chat's next-prompt preview. Keyboard-usable, labelled, and no horizontal scrolling at phone width."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import PHONE, App
from .test_accessibility import UNLABELLED

pytestmark = pytest.mark.browser

NO_OVERFLOW = "document.documentElement.scrollWidth <= window.innerWidth"


def _accept_dialogs(page: Any) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def _preview_blocks(page: Any, source: str) -> Any:
    """The blocks of one source in the chat's next-prompt preview (the prompt view's list)."""
    return page.locator(f'.prompt-view[data-kind="preview"] li.entry[data-source="{source}"]')


def _open_preview(page: Any) -> None:
    page.get_by_role("tab", name="Prompt view").click()
    page.get_by_role("button", name="Next prompt (preview)").click()
    page.locator('.prompt-view[data-kind="preview"]').wait_for()


def _memories(app: App, bot_id: str) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = app.api("GET", f"/bots/{bot_id}/memories")["memories"]
    return memories


def test_memories_added_edited_and_deleted_in_the_chat_panel_change_the_next_prompt(page: Any, app: App) -> None:
    _accept_dialogs(page)
    ids = app.setup_chat(context_window=8000)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("What is the code of my gym locker?")
    page.get_by_role("tab", name="Memories").click()
    panel = page.locator(".memories-panel")

    # Add one for this chat, with the keyboard only: type, tab to the scope, Enter on the button.
    new = panel.get_by_label("New memory")
    new.fill("The gym locker code is 68753.")
    expect(panel.get_by_label("Remember it in")).to_have_value(ids["chat"])
    panel.get_by_role("button", name="Add memory").focus()
    page.keyboard.press("Enter")
    item = panel.locator(".memory-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("The gym locker code is 68753.")
    expect(item).to_contain_text("this chat")
    expect(new).to_be_focused()  # ready for the next one
    (stored,) = _memories(app, ids["bot"])
    assert (stored["content"], stored["chat_id"]) == ("The gym locker code is 68753.", ids["chat"])
    # A bot-wide one, unrelated to the question.
    new.fill("Maria is vegetarian.")
    panel.get_by_label("Remember it in").select_option(label="Every chat of this bot")
    panel.get_by_role("button", name="Add memory").click()
    expect(item).to_have_count(2)
    expect(panel.locator('.memory-item[data-scope="bot"]')).to_contain_text("every chat")

    # The preview sent the relevant one and left the other out.
    _open_preview(page)
    sent = _preview_blocks(page, "memory")
    expect(sent.filter(has_text="68753")).to_have_attribute("data-reason", "fit")
    expect(sent.filter(has_text="vegetarian")).to_have_attribute("data-reason", "low-relevance")

    # Edit: the new text is what the next prompt holds; focus is back on the memory's Edit button.
    page.get_by_role("tab", name="Memories").click()
    panel.get_by_role("button", name="Edit memory: The gym locker code is 68753.").click()
    text = panel.get_by_label("Memory text")
    expect(text).to_be_focused()
    text.fill("The gym locker code is 99120.")
    text.press("Tab")
    page.keyboard.press("Enter")  # Save
    edit = panel.get_by_role("button", name="Edit memory: The gym locker code is 99120.")
    expect(edit).to_be_focused()
    _open_preview(page)
    expect(sent.filter(has_text="99120")).to_have_attribute("data-reason", "fit")
    expect(sent.filter(has_text="68753")).to_have_count(0)

    # A blank edit is refused next to the field, in plain words; nothing changes.
    page.get_by_role("tab", name="Memories").click()
    edit.click()
    text.fill("   ")
    panel.get_by_role("button", name="Save").click()
    error = panel.locator(".memory-edit [data-error-for=content]")
    expect(error).to_have_text("Cannot be empty: write at least one character other than spaces.")
    expect(text).to_have_attribute("aria-invalid", "true")
    expect(text).to_be_focused()
    text.press("Escape")
    expect(edit).to_be_focused()
    assert {m["content"] for m in _memories(app, ids["bot"])} == {"The gym locker code is 99120.", "Maria is vegetarian."}

    # Delete: gone from the list, the store and the preview; focus on the next memory's Edit button.
    panel.get_by_role("button", name="Delete memory: The gym locker code is 99120.").click()
    expect(item).to_have_count(1)
    expect(panel.get_by_role("button", name="Edit memory: Maria is vegetarian.")).to_be_focused()
    assert [m["content"] for m in _memories(app, ids["bot"])] == ["Maria is vegetarian."]
    _open_preview(page)
    expect(sent.filter(has_text="99120")).to_have_count(0)
    expect(sent.filter(has_text="vegetarian")).to_have_count(1)


def test_the_bots_memories_tab_lists_every_chats_memories_and_edits_them(page: Any, app: App) -> None:
    _accept_dialogs(page)
    ids = app.setup_chat(context_window=8000)
    other = app.api("POST", "/chats", {"bot_id": ids["bot"], "title": "Trip to Porto"}, 201)["chat"]
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Prefers window seats."}, 201)
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Porto hotel is near the river.", "chat_id": other["id"]}, 201)
    page.goto(f"/#/bot/{ids['bot']}/memories")
    panel = page.locator(".memories-editor")
    expect(panel.locator(".memory-item")).to_have_count(2)
    expect(panel.locator('.memory-item[data-scope="chat"]')).to_contain_text("Trip to Porto")
    # Add one to the other chat from here.
    panel.get_by_label("New memory").fill("Porto dinner booked for 8 pm.")
    panel.get_by_label("Remember it in").select_option(label="Only in “Trip to Porto”")
    panel.get_by_role("button", name="Add memory").click()
    expect(panel.locator(".memory-item")).to_have_count(3)
    stored = {m["content"]: m["chat_id"] for m in _memories(app, ids["bot"])}
    assert stored["Porto dinner booked for 8 pm."] == other["id"]
    # An empty memory is refused next to the field.
    panel.get_by_role("button", name="Add memory").click()
    expect(panel.locator(".memory-add [data-error-for=content]")).to_contain_text("Cannot be empty")
    expect(panel.get_by_label("New memory")).to_be_focused()
    assert len(_memories(app, ids["bot"])) == 3
    # Delete the last one: focus goes to the one before it.
    panel.get_by_role("button", name="Delete memory: Porto dinner booked for 8 pm.").click()
    expect(panel.locator(".memory-item")).to_have_count(2)
    expect(panel.get_by_role("button", name="Edit memory: Porto hotel is near the river.")).to_be_focused()
    # The route keeps the tab: a reload lands on it.
    page.reload()
    expect(page.get_by_role("tab", name="Memories")).to_have_attribute("aria-selected", "true")
    expect(page.locator(".memory-item")).to_have_count(2)
