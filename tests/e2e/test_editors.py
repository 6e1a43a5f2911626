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
    assert {m["content"] for m in _memories(app, ids["bot"])} == {
        "The gym locker code is 99120.",
        "Maria is vegetarian.",
    }

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
    app.api(
        "POST",
        f"/bots/{ids['bot']}/memories",
        {"content": "Porto hotel is near the river.", "chat_id": other["id"]},
        201,
    )
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


def _add_entry(
    page: Any, *, keys: str, content: str, secondary: str = "", order: str | None = None, **more: Any
) -> None:
    page.get_by_role("button", name="+ Add entry").click()
    form = page.get_by_role("form", name="New entry")
    expect(form.get_by_label("Keys (comma-separated)")).to_be_focused()
    form.get_by_label("Keys (comma-separated)").fill(keys)
    form.get_by_label("Secondary keys (comma-separated, optional)").fill(secondary)
    form.get_by_label("Text").fill(content)
    if order is not None:
        form.get_by_label("Order").fill(order)
    if more.get("position"):
        form.get_by_label("Position").select_option(more["position"])
    if more.get("constant"):
        form.get_by_label("Always include (constant): no key needed, never dropped").check()
    form.get_by_role("button", name="Add entry").click()
    expect(form).to_have_count(0)


def _lore_in_preview(page: Any, chat_id: str, text: str) -> Any:
    page.goto(f"/#/chat/{chat_id}")
    page.get_by_label("Message", exact=True).fill(text)
    _open_preview(page)
    page.locator('.prompt-view[data-kind="preview"] .entries').wait_for()
    return _preview_blocks(page, "lorebook")


def test_a_lorebooks_entries_are_edited_and_one_is_sent_when_its_key_appears(page: Any, app: App) -> None:
    _accept_dialogs(page)
    ids = app.setup_chat(context_window=8000)
    page.goto("/#/bots")
    page.get_by_role("link", name="Lorebooks").click()
    page.get_by_label("Lorebook name").fill("Valyria")
    page.get_by_role("button", name="Create lorebook").click()
    expect(page.get_by_role("heading", name="Valyria", level=1)).to_be_visible()
    expect(page.get_by_role("button", name="+ Add entry")).to_be_focused()  # an empty lorebook: add the first entry

    _add_entry(page, keys="dragon, Vermax", content="Vermax is a green dragon.")
    expect(page.get_by_role("button", name="Edit entry 1")).to_be_focused()
    _add_entry(
        page, keys="castle", secondary="night", content="The castle gates close at night.", order="50", position="after"
    )
    _add_entry(page, keys="", content="Magic is rare in Valyria.", constant=True)
    expect(page.locator(".lore-entry")).to_have_count(3)
    expect(page.locator(".lore-entry").nth(2)).to_contain_text("always included")
    book = app.api("GET", "/lorebooks")["lorebooks"][0]
    fields = ["keys", "secondary_keys", "content", "constant", "enabled", "order", "position"]
    assert [[e[k] for k in fields] for e in book["entries"]] == [
        [["dragon", "Vermax"], [], "Vermax is a green dragon.", False, True, 100, "before"],
        [["castle"], ["night"], "The castle gates close at night.", False, True, 50, "after"],
        [[], [], "Magic is rare in Valyria.", True, True, 100, "before"],
    ]

    # The bot uses it (its settings list the lorebook with an Edit link), and the preview sends what matches.
    page.goto(f"/#/bot/{ids['bot']}")
    page.get_by_label("Valyria (3 entries)").check()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("link", name="Edit the lorebook Valyria")).to_be_visible()
    lore = _lore_in_preview(page, ids["chat"], "Tell me about Vermax.")
    expect(lore.filter(has_text="green dragon")).to_have_class("entry in")
    expect(lore.filter(has_text="Magic is rare")).to_have_attribute("data-reason", "protected")
    expect(lore.filter(has_text="castle gates")).to_have_attribute("data-reason", "not-triggered")

    # Edit entry 2's keys, secondary keys, order and position (depth) and turn it constant and back.
    page.goto("/#/bots")
    page.get_by_role("link", name="Lorebooks").click()
    page.get_by_role("link", name="Valyria").click()
    page.get_by_role("button", name="Edit entry 2").click()
    form = page.get_by_role("form", name="Entry 2")
    expect(form.get_by_label("Keys (comma-separated)")).to_have_value("castle")
    form.get_by_label("Keys (comma-separated)").fill("castle, gate")
    form.get_by_label("Secondary keys (comma-separated, optional)").fill("")
    form.get_by_label("Order").fill("5")
    expect(form.get_by_label("Depth (messages from the end of the history)")).to_be_hidden()
    form.get_by_label("Position").select_option("depth")
    form.get_by_label("Depth (messages from the end of the history)").fill("2")
    form.get_by_role("button", name="Save entry").click()
    expect(page.get_by_role("button", name="Edit entry 2")).to_be_focused()
    expect(page.locator(".lore-entry").nth(1)).to_contain_text("depth 2")
    second = app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"][1]
    assert [second[k] for k in fields] + [second["depth"]] == [
        ["castle", "gate"],
        [],
        "The castle gates close at night.",
        False,
        True,
        5,
        "depth",
        2,
    ]
    # Constant: on, saved; then off again (the keys still decide).
    page.get_by_role("button", name="Edit entry 2").click()
    form.get_by_label("Always include (constant): no key needed, never dropped").check()
    form.get_by_role("button", name="Save entry").click()
    expect(page.locator(".lore-entry").nth(1)).to_contain_text("always included")
    assert app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"][1]["constant"] is True
    page.get_by_role("button", name="Edit entry 2").click()
    form.get_by_label("Always include (constant): no key needed, never dropped").uncheck()
    form.get_by_role("button", name="Save entry").click()
    expect(page.locator(".lore-entry").nth(1)).to_contain_text("by keys")

    # A number the API refuses: said next to the field, in plain words; nothing stored changes.
    before = app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]
    page.get_by_role("button", name="Edit entry 1").click()
    form = page.get_by_role("form", name="Entry 1")
    form.get_by_label("Order").fill("2000000")
    form.get_by_role("button", name="Save entry").click()
    error = form.locator("[data-error-for=order]")
    expect(error).to_have_text("Must be at most 1,000,000.")
    expect(form.get_by_label("Order")).to_be_focused()
    expect(form.get_by_label("Order")).to_have_attribute("aria-invalid", "true")
    assert app.api("GET", f"/lorebooks/{book['id']}")["lorebook"] == before
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Edit entry 1")).to_be_focused()

    # Turn the constant entry off (Enabled unchecked): it is no longer sent.
    page.get_by_role("button", name="Edit entry 3").click()
    page.get_by_role("form", name="Entry 3").get_by_label("Enabled").uncheck()
    page.get_by_role("form", name="Entry 3").get_by_role("button", name="Save entry").click()
    expect(page.locator(".lore-entry").nth(2)).to_contain_text("disabled")
    assert app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"][2]["enabled"] is False

    # The edited entry is sent when its new key appears, without the secondary key it no longer has ("night").
    lore = _lore_in_preview(page, ids["chat"], "When does the gate close?")
    expect(lore.filter(has_text="castle gates")).to_have_attribute("data-reason", "fit")
    expect(lore.filter(has_text="castle gates")).to_have_class("entry in")
    expect(lore.filter(has_text="green dragon")).to_have_attribute("data-reason", "not-triggered")
    expect(lore.filter(has_text="Magic is rare")).to_have_attribute("data-reason", "disabled")

    # Remove entry 1: the entry that took its place gets the focus.
    page.goto(f"/#/lorebook/{book['id']}")
    page.get_by_role("button", name="Remove entry 1").click()
    expect(page.locator(".lore-entry")).to_have_count(2)
    expect(page.get_by_role("button", name="Edit entry 1")).to_be_focused()
    expect(page.locator(".lore-entry").first).to_contain_text("castle gates")
    assert [e["content"] for e in app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"]] == [
        "The castle gates close at night.",
        "Magic is rare in Valyria.",
    ]

    # Rename (a blank name is refused next to the field), then delete the lorebook.
    name = page.get_by_label("Name", exact=True)
    name.fill("  ")
    page.get_by_role("button", name="Rename", exact=True).click()
    expect(page.locator(".lorebook-name [data-error-for=name]")).to_contain_text("Cannot be empty")
    name.fill("Valyria lore")
    page.get_by_role("button", name="Rename", exact=True).click()
    expect(page.get_by_role("heading", name="Valyria lore", level=1)).to_be_visible()
    expect(name).to_be_focused()
    assert app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["name"] == "Valyria lore"
    page.get_by_role("button", name="Delete lorebook").click()
    expect(page.get_by_role("heading", name="Lorebooks", level=1)).to_be_visible()
    expect(page.get_by_text("No lorebooks yet.")).to_be_visible()
    assert app.http.get(f"/api/v2/lorebooks/{book['id']}").status_code == 404


def test_opening_another_entry_asks_before_discarding_changes(page: Any, app: App) -> None:
    entries = [{"keys": ["a"], "content": "First."}, {"keys": ["b"], "content": "Second."}]
    book = app.api("POST", "/lorebooks", {"name": "Lore", "entries": entries}, 201)["lorebook"]
    page.goto(f"/#/lorebook/{book['id']}")
    page.get_by_role("button", name="Edit entry 1").click()
    page.get_by_role("form", name="Entry 1").get_by_label("Text").fill("First, changed.")
    asked: list[str] = []

    def answer(accept: bool) -> Any:
        def handle(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    page.once("dialog", answer(False))
    page.get_by_role("button", name="Edit entry 2").click()
    expect(page.get_by_role("form", name="Entry 1").get_by_label("Text")).to_have_value("First, changed.")
    page.once("dialog", answer(True))
    page.get_by_role("button", name="Edit entry 2").click()
    expect(page.get_by_role("form", name="Entry 2")).to_be_visible()
    expect(page.get_by_role("form", name="Entry 1")).to_have_count(0)
    assert asked == ["Discard your changes to entry 1?"] * 2
    # Nothing was stored; an untouched form is left without asking.
    assert [e["content"] for e in app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"]] == [
        "First.",
        "Second.",
    ]
    page.get_by_role("button", name="+ Add entry").click()
    expect(page.get_by_role("form", name="New entry")).to_be_visible()
    assert len(asked) == 2


def test_an_entry_is_added_and_edited_with_the_keyboard_alone(page: Any, app: App) -> None:
    book = app.api("POST", "/lorebooks", {"name": "Lore"}, 201)["lorebook"]
    page.goto(f"/#/lorebook/{book['id']}")
    expect(page.get_by_role("button", name="+ Add entry")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.type("harbour, port")  # keys
    page.keyboard.press("Tab")
    page.keyboard.type("ship")  # secondary keys
    page.keyboard.press("Tab")
    page.keyboard.type("The harbour closes at dusk.")  # text
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # constant
    for _ in range(2):  # enabled, then order
        page.keyboard.press("Tab")
    page.keyboard.press("Control+a")
    page.keyboard.type("7")
    page.keyboard.press("Tab")  # position
    page.keyboard.press("Tab")  # the Add entry button
    expect(page.get_by_role("button", name="Add entry", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Edit entry 1")).to_be_focused()
    (entry,) = app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"]
    assert (entry["keys"], entry["secondary_keys"], entry["content"], entry["constant"], entry["order"]) == (
        ["harbour", "port"],
        ["ship"],
        "The harbour closes at dusk.",
        True,
        7,
    )
    # Edit and leave with Escape: back on the entry's Edit button, nothing stored changes.
    page.keyboard.press("Enter")
    expect(page.get_by_role("form", name="Entry 1").get_by_label("Keys (comma-separated)")).to_be_focused()
    page.keyboard.type(", quay")
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Edit entry 1")).to_be_focused()
    assert app.api("GET", f"/lorebooks/{book['id']}")["lorebook"]["entries"][0]["keys"] == ["harbour", "port"]


OVERFLOWING = """
(selector) => {
  const out = [];
  for (const root of document.querySelectorAll(selector)) {
    for (const el of [root, ...root.querySelectorAll("*")]) {
      const box = el.getBoundingClientRect();
      if (box.width && (box.right > window.innerWidth + 1 || box.left < -1)) out.push(el.outerHTML.slice(0, 90));
    }
  }
  return out;
}
"""


def test_the_editors_fit_a_phone_screen_without_horizontal_scrolling(page: Any, app: App) -> None:
    page.set_viewport_size(PHONE)
    ids = app.setup_chat(context_window=8000)
    long_word = "Supercalifragilisticexpialidocious" * 3
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": f"A long memory: {long_word}."}, 201)
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Chat memory.", "chat_id": ids["chat"]}, 201)
    entries = [{"keys": ["dragon", long_word], "secondary_keys": ["night"], "content": f"Lore {long_word}"}]
    book = app.api("POST", "/lorebooks", {"name": "Phone lore", "entries": entries}, 201)["lorebook"]

    page.goto(f"/#/bot/{ids['bot']}/memories")
    page.locator(".memory-item").first.wait_for()
    page.get_by_role("button", name="Edit memory: Chat memory.").click()
    assert page.evaluate(NO_OVERFLOW)
    assert page.evaluate(OVERFLOWING, ".memories-editor") == []

    page.goto(f"/#/chat/{ids['chat']}")
    page.get_by_role("button", name="Memories", exact=True).click()
    page.locator(".memories-panel .memory-item").first.wait_for()
    expect(page.locator(".memories-panel").get_by_label("New memory")).to_be_in_viewport()
    assert page.evaluate(NO_OVERFLOW)
    assert page.evaluate(OVERFLOWING, ".inspector") == []

    page.goto("/#/lorebooks")
    page.locator(".lorebook-list").wait_for()
    assert page.evaluate(NO_OVERFLOW)
    page.goto(f"/#/lorebook/{book['id']}")
    page.get_by_role("button", name="Edit entry 1").click()
    page.get_by_label("Position").select_option("depth")
    expect(page.get_by_role("button", name="Save entry")).to_be_visible()
    assert page.evaluate(NO_OVERFLOW)
    assert page.evaluate(OVERFLOWING, ".lorebook-page") == []
    page.get_by_role("button", name="+ Add entry").click()
    assert page.evaluate(NO_OVERFLOW)
    assert page.evaluate(OVERFLOWING, ".lorebook-page") == []


def test_the_editor_screens_have_labelled_controls(page: Any, app: App) -> None:
    ids = app.setup_chat(context_window=8000)
    app.api("POST", f"/bots/{ids['bot']}/memories", {"content": "Likes tea."}, 201)
    book = app.api("POST", "/lorebooks", {"name": "Lore", "entries": [{"keys": ["a"], "content": "A."}]}, 201)
    page.goto(f"/#/bot/{ids['bot']}/memories")
    page.locator(".memory-item").wait_for()
    page.get_by_role("button", name="Edit memory: Likes tea.").click()
    assert page.evaluate(UNLABELLED) == []
    page.goto(f"/#/lorebook/{book['lorebook']['id']}")
    page.get_by_role("button", name="Edit entry 1").click()
    page.get_by_role("button", name="+ Add entry").click()
    assert page.evaluate(UNLABELLED) == []
