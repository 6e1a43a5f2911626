"""A bot's memories (P4) are edited and deleted one by one: ``PATCH`` and ``DELETE /bots/{bot_id}/memories/{id}``.

Another user's memory is not there (404, nothing changes), a memory is reached only through its own bot, and a
rejected edit changes nothing. An edited memory is what the next prompt retrieves.
"""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Account, Service


async def _memories(service: Service, bot_id: str) -> list[dict[str, Any]]:
    response = await service.http.get(f"/api/v2/bots/{bot_id}/memories")
    assert response.status_code == 200, response.text
    memories: list[dict[str, Any]] = response.json()["memories"]
    return memories


async def test_a_memory_is_edited_and_deleted_through_its_bot(service: Service) -> None:
    ids = await service.setup_chat()
    bot = ids["bot"]
    wide = (await service.post(f"/api/v2/bots/{bot}/memories", {"content": "Likes tea."}))["memory"]
    own = (await service.post(f"/api/v2/bots/{bot}/memories", {"content": "Flies on Friday.", "chat_id": ids["chat"]}))[
        "memory"
    ]

    path = f"/api/v2/bots/{bot}/memories/{wide['id']}"
    edited = await service.http.patch(path, json={"content": " Likes green tea. "})
    assert edited.status_code == 200, edited.text
    memory = edited.json()["memory"]
    assert (memory["id"], memory["content"], memory["chat_id"]) == (wide["id"], " Likes green tea. ", None)
    assert memory["created_at"] == wide["created_at"]
    assert [(m["id"], m["content"]) for m in await _memories(service, bot)] == [
        (wide["id"], " Likes green tea. "),
        (own["id"], "Flies on Friday."),
    ]

    deleted = await service.http.delete(f"/api/v2/bots/{bot}/memories/{own['id']}")
    assert (deleted.status_code, deleted.json()) == (200, {"deleted": True})
    assert [m["id"] for m in await _memories(service, bot)] == [wide["id"]]
    again = await service.http.delete(f"/api/v2/bots/{bot}/memories/{own['id']}")
    assert (again.status_code, again.json()["error"]["code"]) == (404, "MEMORY_NOT_FOUND")
    gone = await service.http.patch(f"/api/v2/bots/{bot}/memories/{own['id']}", json={"content": "back"})
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "MEMORY_NOT_FOUND")


async def test_another_users_memory_is_not_found_and_stays_as_it_was(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    bot = ids["bot"]
    memory = (await service.post(f"/api/v2/bots/{bot}/memories", {"content": "The admin's locker code is 4411."}))[
        "memory"
    ]
    before = await _memories(service, bot)
    path = f"/api/v2/bots/{bot}/memories/{memory['id']}"

    for response in (
        await other_user.http.patch(path, json={"content": "taken over"}),
        await other_user.http.delete(path),
    ):
        assert (response.status_code, response.json()["error"]["code"]) == (404, "BOT_NOT_FOUND")
        assert "4411" not in response.text
    # Through a bot of their own, the admin's memory is not there either.
    theirs = (await other_user.http.post("/api/v2/bots", json={"name": "bob's"})).json()["bot"]["id"]
    for response in (
        await other_user.http.patch(f"/api/v2/bots/{theirs}/memories/{memory['id']}", json={"content": "taken over"}),
        await other_user.http.delete(f"/api/v2/bots/{theirs}/memories/{memory['id']}"),
    ):
        assert (response.status_code, response.json()["error"]["code"]) == (404, "MEMORY_NOT_FOUND")
        assert "4411" not in response.text
    assert await _memories(service, bot) == before


async def test_a_memory_is_reached_only_through_its_own_bot(service: Service) -> None:
    ids = await service.setup_chat()
    memory = (await service.post(f"/api/v2/bots/{ids['bot']}/memories", {"content": "Likes tea."}))["memory"]
    second = (await service.post("/api/v2/bots", {"name": "Second"}))["bot"]["id"]
    wrong = f"/api/v2/bots/{second}/memories/{memory['id']}"
    patched = await service.http.patch(wrong, json={"content": "Likes coffee."})
    deleted = await service.http.delete(wrong)
    for response in (patched, deleted):
        assert (response.status_code, response.json()["error"]["code"]) == (404, "MEMORY_NOT_FOUND")
    assert [m["content"] for m in await _memories(service, ids["bot"])] == ["Likes tea."]


async def test_a_rejected_memory_edit_changes_nothing(service: Service) -> None:
    ids = await service.setup_chat()
    memory = (await service.post(f"/api/v2/bots/{ids['bot']}/memories", {"content": "Likes tea."}))["memory"]
    path = f"/api/v2/bots/{ids['bot']}/memories/{memory['id']}"
    for body in ({"content": "   "}, {"content": ""}, {}, {"content": None}, {"content": "x", "chat_id": ids["chat"]}):
        response = await service.http.patch(path, json=body)
        assert (response.status_code, response.json()["error"]["code"]) == (422, "VALIDATION"), body
    too_long = await service.http.patch(path, json={"content": "x" * 100_001})
    assert (too_long.status_code, too_long.json()["error"]["code"]) == (422, "VALIDATION")
    assert too_long.json()["error"]["params"]["errors"][0]["loc"] == ["body", "content"]
    assert await _memories(service, ids["bot"]) == [memory]


async def test_the_next_prompt_retrieves_the_edited_memory_and_not_a_deleted_one(service: Service) -> None:
    ids = await service.setup_chat()
    bot = ids["bot"]
    memory = (await service.post(f"/api/v2/bots/{bot}/memories", {"content": "The gym locker code is 1111."}))["memory"]

    async def memory_blocks() -> list[tuple[str, str, bool]]:
        preview = await service.post(
            "/api/v2/context-preview", {"chat_id": ids["chat"], "user_message": "What is my gym locker code?"}, 200
        )
        entries = preview["preview"]["entries"]
        return [(e["identifier"], e["content"], e["included"]) for e in entries if e["source"] == "memory"]

    assert await memory_blocks() == [(f"memory.{memory['id']}", "The gym locker code is 1111.", True)]
    path = f"/api/v2/bots/{bot}/memories/{memory['id']}"
    await service.http.patch(path, json={"content": "The gym locker code is 2222."})
    assert await memory_blocks() == [(f"memory.{memory['id']}", "The gym locker code is 2222.", True)]
    await service.http.delete(path)
    assert await memory_blocks() == []
