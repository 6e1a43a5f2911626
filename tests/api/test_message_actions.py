"""Message actions through the API (V5, issue 11): regenerate keeps earlier replies as versions to page
through, continue adds to the newest reply, a user message's text can be edited, a failed redo leaves the reply
and records its error; chat search by title and content; "tools used" from the stored tool calls."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Account, Service
from tests.fakes import Error, Reply


async def _messages(service: Service, chat_id: str) -> list[dict[str, Any]]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/messages")).json()["messages"]  # type: ignore[no-any-return]


async def _turn(service: Service, chat_id: str, body: dict[str, Any], expect: int = 200) -> dict[str, Any]:
    return await service.post(f"/api/v2/chats/{chat_id}/generate", {**body, "stream": False}, expect)


async def _answered(service: Service) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    ids = await service.setup_chat()
    service.fake.script(Reply("First answer.", output_tokens=3))
    await _turn(service, ids["chat"], {"content": "Name a colour"})
    question, answer = await _messages(service, ids["chat"])
    return ids, question, answer


async def test_regenerate_stores_a_new_version_and_keeps_the_first(service: Service) -> None:
    ids, question, answer = await _answered(service)
    service.fake.script(Reply("Second answer.", output_tokens=4))
    done = await _turn(service, ids["chat"], {"regenerate_of": answer["id"]})
    assert done["message"]["id"] == answer["id"] and done["message"]["content"] == "Second answer."
    assert done["message"]["alternatives"] == 2 and done["message"]["alternative"] == 1
    assert done["message"]["reply_to"] == question["id"] and done["message"]["meta"]["usage"]["output_tokens"] == 4
    # The prompt was the one the first reply answered: the input last, the old reply not in it.
    assert [m["content"] for m in service.fake.last.messages] == ["Name a colour"]
    stored = await _messages(service, ids["chat"])
    assert [m["id"] for m in stored] == [question["id"], answer["id"]]

    path = f"/api/v2/chats/{ids['chat']}/messages/{answer['id']}"
    first = (await service.http.patch(path, json={"alternative": 0})).json()["message"]
    assert first["content"] == "First answer." and first["alternative"] == 0
    assert first["meta"]["usage"]["output_tokens"] == 3  # each version keeps its own reply facts
    service.fake.script(Reply("ok"))
    await _turn(service, ids["chat"], {"content": "and another?"})
    assert [m["content"] for m in service.fake.last.messages] == ["Name a colour", "First answer.", "and another?"]


async def test_choosing_a_version_that_does_not_exist_changes_nothing(service: Service) -> None:
    ids, _question, answer = await _answered(service)
    path = f"/api/v2/chats/{ids['chat']}/messages/{answer['id']}"
    for body in ({"alternative": 1}, {"alternative": 1, "pinned": True}):
        response = await service.http.patch(path, json=body)
        assert response.status_code == 422 and response.json()["error"]["code"] == "ALTERNATIVE_NOT_FOUND"
    assert (await service.http.patch(path, json={"alternative": -1})).status_code == 422
    [_, stored] = await _messages(service, ids["chat"])
    assert stored["pinned"] is False and stored["content"] == "First answer." and stored["alternatives"] == 1


async def test_continue_adds_to_the_newest_reply_and_sends_it_last(service: Service) -> None:
    ids, _question, answer = await _answered(service)
    service.fake.script(Reply(" And blue."))
    done = await _turn(service, ids["chat"], {"continue_of": answer["id"]})
    assert done["message"]["id"] == answer["id"] and done["message"]["content"] == "First answer. And blue."
    assert [m["role"] for m in service.fake.last.messages] == ["user", "assistant"]
    assert service.fake.last.messages[-1]["content"] == "First answer."
    assert len(await _messages(service, ids["chat"])) == 2


async def test_a_partial_reply_continued_to_its_end_is_whole_again(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("one two three", abort_after=2))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "count"})
    assert response.status_code == 200
    _question, partial = await _messages(service, ids["chat"])
    assert partial["meta"]["partial"] is True
    service.fake.script(Reply(" three"))
    done = await _turn(service, ids["chat"], {"continue_of": partial["id"]})
    assert done["message"]["content"] == partial["content"] + " three"
    assert "partial" not in done["message"]["meta"] and "error_code" not in done["message"]["meta"]


async def _streamed(service: Service, chat_id: str, body: dict[str, Any]) -> None:
    response = await service.http.post(f"/api/v2/chats/{chat_id}/generate", json={**body, "stream": True})
    assert response.status_code == 200, response.text


async def test_a_streamed_regenerate_ends_as_one_new_version_whatever_was_stored_while_it_streamed(
    service: Service,
) -> None:
    ids, _question, answer = await _answered(service)
    # Slow chunks: the stored copy (N5) is written while it streams, and the outcome takes its version's place.
    service.fake.script(Reply("Green, I think.", chunks=["Green, ", "I ", "think."], chunk_delay=0.2))
    await _streamed(service, ids["chat"], {"regenerate_of": answer["id"]})
    [_, reply] = await _messages(service, ids["chat"])
    assert (reply["content"], reply["alternatives"], reply["alternative"]) == ("Green, I think.", 2, 1)
    assert "partial" not in reply["meta"] and reply["meta"]["finish_reason"] == "stop"
    path = f"/api/v2/chats/{ids['chat']}/messages/{answer['id']}"
    first = (await service.http.patch(path, json={"alternative": 0})).json()["message"]
    assert first["content"] == "First answer."


async def test_a_streamed_continue_adds_its_text_once_and_a_cut_one_keeps_the_original(service: Service) -> None:
    ids, _question, answer = await _answered(service)
    service.fake.script(Reply(" And blue, too.", chunks=[" And ", "blue, ", "too."], chunk_delay=0.2))
    await _streamed(service, ids["chat"], {"continue_of": answer["id"]})
    [_, reply] = await _messages(service, ids["chat"])
    assert (reply["content"], reply["alternatives"]) == ("First answer. And blue, too.", 1)
    assert "partial" not in reply["meta"]

    service.fake.script(Reply(" Red.", chunks=[" Red", " and", " more"], chunk_delay=0.2, abort_after=2))
    await _streamed(service, ids["chat"], {"continue_of": answer["id"]})
    [_, cut] = await _messages(service, ids["chat"])
    assert cut["content"] == "First answer. And blue, too. Red and"
    assert (cut["meta"]["partial"], cut["meta"]["partial_reason"]) == (True, "provider-error")


@pytest.mark.parametrize("action", ["regenerate_of", "continue_of"])
async def test_only_the_newest_reply_can_be_redone(service: Service, action: str) -> None:
    ids, question, answer = await _answered(service)
    service.fake.script(Reply("later"))
    await _turn(service, ids["chat"], {"content": "next"})
    before = await _messages(service, ids["chat"])
    requests = len(service.fake.requests)
    for target in (answer["id"], question["id"]):
        response = await service.http.post(
            f"/api/v2/chats/{ids['chat']}/generate", json={action: target, "stream": False}
        )
        assert response.status_code == 409 and response.json()["error"]["code"] == "REDO_NOT_POSSIBLE"
    missing = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={action: "nope", "stream": False})
    assert missing.status_code == 404
    assert await _messages(service, ids["chat"]) == before and len(service.fake.requests) == requests


async def test_a_failed_regenerate_keeps_the_reply_and_records_the_error_on_it(service: Service) -> None:
    ids, question, answer = await _answered(service)
    service.fake.script(Error(500), Error(500))
    response = await service.http.post(
        f"/api/v2/chats/{ids['chat']}/generate", json={"regenerate_of": answer["id"], "stream": False}
    )
    assert response.status_code == 502 and "input_message_id" not in response.json()["error"]["params"]
    kept_question, kept = await _messages(service, ids["chat"])
    assert kept["content"] == "First answer." and kept["alternatives"] == 1
    assert kept["meta"]["error"] == {"code": "PROVIDER_SERVER_ERROR", "action": "regenerate"}
    assert "failed" not in kept_question["meta"] and kept_question["id"] == question["id"]
    service.fake.script(Reply("Recovered."))
    done = await _turn(service, ids["chat"], {"regenerate_of": answer["id"]})
    assert "error" not in done["message"]["meta"] and done["message"]["alternatives"] == 2


async def test_a_user_message_is_edited_and_its_counts_follow(service: Service) -> None:
    ids, question, answer = await _answered(service)
    path = f"/api/v2/chats/{ids['chat']}/messages/{question['id']}"
    edited = await service.http.patch(path, json={"content": "Name a bright colour please " * 20})
    assert edited.status_code == 200 and edited.json()["message"]["content"].startswith("Name a bright")
    preview = await service.post("/api/v2/context-preview", {"chat_id": ids["chat"]}, 200)
    entry = {e["identifier"]: e for e in preview["preview"]["entries"]}[question["id"]]
    assert entry["content"].startswith("Name a bright") and entry["tokens"] > 50  # not the old text's count
    service.fake.script(Reply("Yellow."))
    done = await _turn(service, ids["chat"], {"regenerate_of": answer["id"]})
    assert done["message"]["content"] == "Yellow."
    assert service.fake.last.messages[-1]["content"].startswith("Name a bright")


async def test_only_user_messages_can_be_edited_and_a_refusal_changes_nothing(service: Service) -> None:
    ids, question, answer = await _answered(service)
    base = f"/api/v2/chats/{ids['chat']}/messages"
    refused = await service.http.patch(f"{base}/{answer['id']}", json={"content": "forged", "pinned": True})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "MESSAGE_NOT_EDITABLE"
    for body in ({"content": ""}, {"content": 5}, {"content": "x" * 2_000_001}):
        assert (await service.http.patch(f"{base}/{question['id']}", json=body)).status_code == 422
    assert [(m["content"], m["pinned"]) for m in await _messages(service, ids["chat"])] == [
        (question["content"], False),
        (answer["content"], False),
    ]


async def test_another_users_messages_cannot_be_edited_or_redone(service: Service, other_user: Account) -> None:
    ids, question, answer = await _answered(service)
    edit = await other_user.http.patch(
        f"/api/v2/chats/{ids['chat']}/messages/{question['id']}", json={"content": "mine now"}
    )
    assert edit.status_code == 404
    redo = await other_user.http.post(
        f"/api/v2/chats/{ids['chat']}/generate", json={"regenerate_of": answer["id"], "stream": False}
    )
    assert redo.status_code == 404
    assert [m["content"] for m in await _messages(service, ids["chat"])] == [question["content"], answer["content"]]


async def test_search_finds_own_chats_by_title_and_by_stemmed_content(service: Service, other_user: Account) -> None:
    ids = await service.setup_chat()
    titled = await service.post("/api/v2/chats", {"bot_id": ids["bot"], "title": "Lisbon trip"})
    said = await service.post(
        f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "The zebra crossing was closed today"}
    )
    found = (await service.http.get("/api/v2/search/chats", params={"q": "LISBON"})).json()["results"]
    assert [(r["chat"]["id"], r["message"]) for r in found] == [(titled["chat"]["id"], None)]
    found = (await service.http.get("/api/v2/search/chats", params={"q": "zebras closed"})).json()["results"]
    assert [r["chat"]["id"] for r in found] == [ids["chat"]]
    assert found[0]["message"]["id"] == said["message"]["id"] and "zebra crossing" in found[0]["message"]["excerpt"]
    assert (await service.http.get("/api/v2/search/chats", params={"q": "zebra giraffe"})).json()["results"] == []
    theirs = (await other_user.http.get("/api/v2/search/chats", params={"q": "zebra"})).json()["results"]
    assert theirs == []
    for params in ({"q": ""}, {}, {"q": "x" * 201}, {"q": "a", "limit": 0}):
        response = await service.http.get("/api/v2/search/chats", params=params)
        assert response.status_code == 422 and response.json()["error"]["code"] == "VALIDATION"


async def test_tools_used_counts_the_stored_tool_calls(service: Service) -> None:
    ids = await service.setup_chat()
    base = f"/api/v2/chats/{ids['chat']}/messages"
    call = {"id": "c1", "type": "function", "function": {"name": "search_flights", "arguments": "{}"}}
    await service.post(base, {"role": "user", "content": "Find flights"})
    await service.post(base, {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "c2"}]})
    await service.post(base, {"role": "tool", "tool_call_id": "c1", "content": "none"})
    await service.post(base, {"role": "tool", "tool_call_id": "c2", "content": "none"})
    anthropic = [{"type": "tool_use", "id": "t1", "name": "book_hotel", "input": {}}]
    await service.post(base, {"role": "assistant", "content": anthropic})
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["tools_used"] == [{"name": "search_flights", "count": 2}, {"name": "book_hotel", "count": 1}]


async def test_an_edited_older_message_is_answered_again_after_rewinding_to_it(service: Service) -> None:
    ids, question, _answer = await _answered(service)
    service.fake.script(Reply("Blue, again."))
    await _turn(service, ids["chat"], {"content": "Another one?"})
    path = f"/api/v2/chats/{ids['chat']}/messages/{question['id']}"
    await service.http.patch(path, json={"content": "Name a fruit"})

    rewound = await service.post(f"{path}/rewind", {}, 200)
    assert rewound == {"deleted": 3}  # the first answer, the second question and its answer
    assert [m["id"] for m in await _messages(service, ids["chat"])] == [question["id"]]
    service.fake.script(Reply("A pear."))
    done = await _turn(service, ids["chat"], {"retry_of": question["id"]})
    assert done["message"]["content"] == "A pear." and done["message"]["reply_to"] == question["id"]
    assert [m["content"] for m in service.fake.last.messages] == ["Name a fruit"]  # no copy of the input
    assert [m["content"] for m in await _messages(service, ids["chat"])] == ["Name a fruit", "A pear."]
    assert (await service.post(f"{path}/rewind", {}, 200)) == {"deleted": 1}
    assert (await service.post(f"{path}/rewind", {}, 200)) == {"deleted": 0}  # already the newest


async def test_only_the_newest_unanswered_user_message_is_answered_again(service: Service) -> None:
    ids, question, answer = await _answered(service)
    before = await _messages(service, ids["chat"])
    for message_id in (question["id"], answer["id"]):  # answered already; a reply is not an input
        refused = await service.http.post(
            f"/api/v2/chats/{ids['chat']}/generate", json={"retry_of": message_id, "stream": False}
        )
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "RETRY_NOT_POSSIBLE"
    missing = await service.http.post(f"/api/v2/chats/{ids['chat']}/messages/no-such-message/rewind")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "MESSAGE_NOT_FOUND"
    assert await _messages(service, ids["chat"]) == before


async def test_another_users_chat_is_not_rewound(service: Service, other_user: Account) -> None:
    ids, question, _answer = await _answered(service)
    before = await _messages(service, ids["chat"])
    refused = await other_user.http.post(f"/api/v2/chats/{ids['chat']}/messages/{question['id']}/rewind")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "CHAT_NOT_FOUND"
    assert await _messages(service, ids["chat"]) == before
