"""A message's number in the web UI is its position among the chat's messages (issue 27: "after 'regenerate from
here' the new reply is numbered #55 after #39"): seqs are never reused (a rewind, a delete or a branch leaves
gaps), so each message of a page carries its ``position``, 1, 2, 3… with no gaps, also on older pages. On SQLite
and PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Service
from tests.fakes import Reply


async def _page(service: Service, chat_id: str, query: str = "") -> dict[str, Any]:
    response = await service.http.get(f"/api/v2/chats/{chat_id}/messages{query}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def _turn(service: Service, chat_id: str, body: dict[str, Any]) -> None:
    await service.post(f"/api/v2/chats/{chat_id}/generate", {**body, "stream": False}, 200)


async def test_a_rewound_chat_numbers_its_new_turn_right_after_the_kept_messages(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("Red."), Reply("Green."), Reply("Blue."))
    await _turn(service, ids["chat"], {"content": "Name a colour"})
    await _turn(service, ids["chat"], {"content": "Another one?"})
    first_reply = (await _page(service, ids["chat"]))["messages"][1]
    path = f"/api/v2/chats/{ids['chat']}/messages/{first_reply['id']}/rewind"
    await service.post(path, {}, 200)
    await _turn(service, ids["chat"], {"content": "And a third?"})

    messages = (await _page(service, ids["chat"]))["messages"]
    assert [m["content"] for m in messages] == ["Name a colour", "Red.", "And a third?", "Blue."]
    assert [m["seq"] for m in messages] == [1, 2, 5, 6]
    assert [m["position"] for m in messages] == [1, 2, 3, 4]


async def test_a_branch_numbers_the_shown_continuation_from_the_branch_point(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("Red."), Reply("Green."), Reply("A pear."))
    await _turn(service, ids["chat"], {"content": "Name a colour"})
    await _turn(service, ids["chat"], {"content": "Another one?"})
    question = (await _page(service, ids["chat"]))["messages"][0]
    await service.post(f"/api/v2/chats/{ids['chat']}/messages/{question['id']}/branch", {"content": "A fruit"}, 200)
    await _turn(service, ids["chat"], {"retry_of": question["id"]})

    messages = (await _page(service, ids["chat"]))["messages"]
    assert [(m["seq"], m["position"]) for m in messages] == [(1, 1), (5, 2)]
    old = await service.http.patch(f"/api/v2/chats/{ids['chat']}/messages/{question['id']}", json={"alternative": 0})
    assert old.status_code == 200, old.text
    messages = (await _page(service, ids["chat"]))["messages"]
    assert [(m["seq"], m["position"]) for m in messages] == [(1, 1), (2, 2), (3, 3), (4, 4)]


async def test_older_pages_continue_the_positions_after_a_delete(service: Service) -> None:
    ids = await service.setup_chat()
    stored = []
    for n in range(7):
        body = {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"}
        stored.append((await service.post(f"/api/v2/chats/{ids['chat']}/messages", body))["message"])
    deleted = await service.http.delete(f"/api/v2/chats/{ids['chat']}/messages/{stored[2]['id']}")
    assert deleted.status_code == 200, deleted.text

    pages = [await _page(service, ids["chat"], "?limit=2")]
    while pages[-1]["has_more"]:
        oldest = pages[-1]["messages"][0]["seq"]
        pages.append(await _page(service, ids["chat"], f"?limit=2&before_seq={oldest}"))
    seen = [(m["content"], m["position"]) for page in reversed(pages) for m in page["messages"]]
    assert [len(page["messages"]) for page in pages] == [2, 2, 2]
    assert seen == [("turn 0", 1), ("turn 1", 2), ("turn 3", 3), ("turn 4", 4), ("turn 5", 5), ("turn 6", 6)]
    # A page that starts inside the chat is numbered from its own first message, the same as the whole list.
    middle = await _page(service, ids["chat"], f"?limit=3&before_seq={stored[5]['seq']}")
    assert [(m["content"], m["position"]) for m in middle["messages"]] == [("turn 1", 2), ("turn 3", 3), ("turn 4", 4)]
    assert middle["has_more"] is True
