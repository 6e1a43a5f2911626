"""V5 chat titles: ``PATCH /chats/{id}`` renames a chat; an untitled chat takes its first user message as title."""

from __future__ import annotations

from contextshift.service.titles import TITLE_LENGTH, auto_title
from tests.api.conftest import Service
from tests.fakes import Reply


async def _title(service: Service, chat_id: str) -> str:
    response = await service.http.get(f"/api/v2/chats/{chat_id}")
    return str(response.json()["chat"]["title"])


async def test_a_chat_is_renamed_and_the_title_is_trimmed(service: Service) -> None:
    ids = await service.setup_chat()
    response = await service.http.patch(f"/api/v2/chats/{ids['chat']}", json={"title": "  Trip to Lisbon  "})
    assert response.status_code == 200, response.text
    assert response.json()["chat"]["title"] == "Trip to Lisbon"
    assert await _title(service, ids["chat"]) == "Trip to Lisbon"


async def test_a_blank_long_or_extra_field_rename_is_refused_and_changes_nothing(service: Service) -> None:
    ids = await service.setup_chat()
    await service.http.patch(f"/api/v2/chats/{ids['chat']}", json={"title": "Kept"})
    for body in (
        {"title": "   "},
        {"title": ""},
        {"title": "x" * 501},
        {"title": 5},
        {},
        {"title": None},
        {"title": "a", "type": "x"},
    ):
        response = await service.http.patch(f"/api/v2/chats/{ids['chat']}", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "VALIDATION"
    assert await _title(service, ids["chat"]) == "Kept"


async def test_renaming_an_unknown_chat_answers_chat_not_found(service: Service) -> None:
    response = await service.http.patch("/api/v2/chats/nope", json={"title": "x"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "CHAT_NOT_FOUND"


async def test_the_first_generated_turn_titles_an_untitled_chat_once(service: Service) -> None:
    ids = await service.setup_chat()
    assert await _title(service, ids["chat"]) == ""
    service.fake.script(Reply("Sure."), Reply("Fine."))
    chat = f"/api/v2/chats/{ids['chat']}/generate"
    await service.post(chat, {"content": "Plan a\n weekend   in Porto", "stream": False}, 200)
    await service.post(chat, {"content": "Something else entirely", "stream": False}, 200)
    assert await _title(service, ids["chat"]) == "Plan a weekend in Porto"


async def test_a_stored_user_message_titles_an_untitled_chat_but_not_a_renamed_one(service: Service) -> None:
    ids = await service.setup_chat()
    messages = f"/api/v2/chats/{ids['chat']}/messages"
    await service.post(messages, {"role": "assistant", "content": "Hello, I am the bot."})
    assert await _title(service, ids["chat"]) == ""
    await service.post(messages, {"role": "user", "content": "/status"})
    assert await _title(service, ids["chat"]) == ""
    await service.post(messages, {"role": "user", "content": "What is the capital of Portugal?"})
    assert await _title(service, ids["chat"]) == "What is the capital of Portugal?"
    await service.http.patch(f"/api/v2/chats/{ids['chat']}", json={"title": "Geography"})
    other = (await service.post("/api/v2/chats", {"bot_id": ids["bot"], "title": "Chosen"}))["chat"]
    await service.post(f"/api/v2/chats/{other['id']}/messages", {"role": "user", "content": "hello"})
    assert await _title(service, ids["chat"]) == "Geography"
    assert await _title(service, other["id"]) == "Chosen"


def test_a_long_first_message_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = "Please help me plan a three week trip through Portugal and Spain with a small budget"
    title = auto_title(text)
    assert title == "Please help me plan a three week trip through Portugal and…"
    assert len(title) <= TITLE_LENGTH
    assert auto_title("x" * 100) == "x" * (TITLE_LENGTH - 1) + "…"
    assert auto_title(" \n\t ") == ""
