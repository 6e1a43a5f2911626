"""Export and import in the web UI, and search in every language (issue 27): a chat exported as JSON and
imported from the chat list has the same messages; a SillyTavern ``.jsonl`` and a ChatGPT ``conversations.json``
made here import as chats; Chinese and Russian searches find their messages, and a hit in the chat that is
already open scrolls to its message and highlights it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser

#: Notes on ``window.flashed`` when the element gets the ``flash`` class (it is taken off again after a moment).
WATCH_FLASH = """(id) => {
  window.flashed = false;
  const el = document.getElementById(id);
  new MutationObserver(() => {
    if (el.classList.contains("flash")) window.flashed = true;
  }).observe(el, { attributes: true, attributeFilter: ["class"] });
}"""


def _messages(app: App, chat_id: str) -> list[tuple[str, Any, bool]]:
    found = app.api("GET", f"/chats/{chat_id}/messages?limit=500")["messages"]
    return [(m["role"], m["content"], m["pinned"]) for m in found]


def _say(app: App, chat_id: str, role: str, content: str) -> str:
    return str(app.api("POST", f"/chats/{chat_id}/messages", {"role": role, "content": content}, 201)["message"]["id"])


def _import(page: Any, path: Path) -> None:
    page.goto("/#/")
    form = page.locator("form.import-form")
    form.get_by_label("File").set_input_files(str(path))
    form.get_by_role("button", name="Import").click()


def test_a_chat_exported_as_json_imports_back_with_the_same_messages(page: Any, app: App, tmp_path: Path) -> None:
    ids = app.setup_chat()
    _say(app, ids["chat"], "user", "你好，我叫山姆。")
    answer = _say(app, ids["chat"], "assistant", "Nice to meet you, **Sam**.")
    app.api("PATCH", f"/chats/{ids['chat']}/messages/{answer}", {"pinned": True}, 200)
    page.goto(f"/#/chat/{ids['chat']}")
    page.get_by_label("Export this chat").click()
    with page.expect_download() as json_download:
        page.get_by_role("button", name="JSON (everything, to import again)").click()
    saved = tmp_path / "export.json"
    json_download.value.save_as(saved)
    assert json_download.value.suggested_filename == "Long chat.json"
    assert json.loads(saved.read_text(encoding="utf-8"))["format"] == "contextshift.chat"
    page.get_by_label("Export this chat").click()
    with page.expect_download() as md_download:
        page.get_by_role("button", name="Markdown (to read)").click()
    markdown = tmp_path / "export.md"
    md_download.value.save_as(markdown)
    assert "你好，我叫山姆。" in markdown.read_text(encoding="utf-8")
    _import(page, saved)
    expect(page.locator(".import-status, .chat-heading")).not_to_have_count(0)
    expect(page).not_to_have_url(f"{app.url}/#/")
    new_id = page.url.rsplit("/", 1)[-1]
    assert new_id != ids["chat"]
    expect(page.locator(".chat-heading")).to_have_text("Long chat")
    expect(page.locator("article.msg")).to_have_count(2)
    assert _messages(app, new_id) == _messages(app, ids["chat"])


def test_sillytavern_and_chatgpt_files_import_as_chats(page: Any, app: App, tmp_path: Path) -> None:
    app.setup_chat()
    tavern = tmp_path / "Seraphina.jsonl"
    lines = [
        {"user_name": "You", "character_name": "Seraphina"},
        {"name": "Seraphina", "is_user": False, "mes": "Welcome to the glade."},
        {"name": "You", "is_user": True, "mes": "Thank you."},
    ]
    tavern.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    _import(page, tavern)
    expect(page.locator(".chat-heading")).to_have_text("Seraphina (SillyTavern)")
    expect(page.locator("article.msg")).to_have_count(2)
    expect(page.locator("article.msg").first).to_contain_text("Welcome to the glade.")
    mapping = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["u"]},
        "u": {
            "id": "u",
            "parent": "root",
            "children": ["a"],
            "message": {"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["Пятница?"]}},
        },
        "a": {
            "id": "a",
            "parent": "u",
            "children": [],
            "message": {"author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["Да."]}},
        },
    }
    conversations = tmp_path / "conversations.json"
    conversation = {"title": "Неделя", "mapping": mapping, "current_node": "a"}
    conversations.write_text(json.dumps([conversation], ensure_ascii=False), encoding="utf-8")
    _import(page, conversations)
    expect(page.locator(".chat-heading")).to_have_text("Неделя")
    expect(page.locator("article.msg")).to_have_count(2)
    # a file that is no chat export: a clear error, and no chat is made
    before = len(app.api("GET", "/chats")["chats"])
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}', encoding="utf-8")
    _import(page, bad)
    expect(page.locator(".import-status")).to_contain_text("IMPORT_FORMAT_UNKNOWN")
    assert len(app.api("GET", "/chats")["chats"]) == before


def test_cjk_and_russian_searches_find_their_messages_and_a_hit_in_the_open_chat_scrolls_to_it(
    page: Any, app: App
) -> None:
    ids = app.setup_chat()
    sam = _say(app, ids["chat"], "user", "你好，我叫山姆。")
    friday = _say(app, ids["chat"], "assistant", "Встретимся в пятницу 🎉")
    for n in range(40):  # enough after them that both are scrolled out of view
        _say(app, ids["chat"], "user" if n % 2 == 0 else "assistant", f"Filler message number {n}.")
    page.goto(f"/#/chat/{ids['chat']}")
    expect(page.locator("article.msg")).to_have_count(42)
    target = page.locator(f"#msg-{sam}")
    expect(target).not_to_be_in_viewport()
    search = page.get_by_label("Search chats by title and content")
    search.fill("山姆")
    hit = page.locator(".search-results .chat-link")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("山姆")
    page.evaluate(WATCH_FLASH, f"msg-{sam}")
    hit.click()
    expect(target).to_be_in_viewport()
    expect(target).to_be_focused()
    page.wait_for_function("window.flashed === true")  # highlighted for a moment (the class comes and goes)
    assert page.url.endswith(f"#/chat/{ids['chat']}")
    search.fill("пятница")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("пятницу")
    hit.click()
    expect(page.locator(f"#msg-{friday}")).to_be_focused()
    expect(page.locator(f"#msg-{friday}")).to_be_in_viewport()
    search.fill("🎉")
    expect(hit).to_have_count(1)
