"""Standing instructions through the service (G4b): flagged when stored, kept in every prompt however old,
dismissable, and never folded into a compaction summary (three passes with a summarizer that drops them)."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Service
from tests.api.test_compaction import compact, fill, is_summarizer, messages
from tests.fakes import Reply

FACT = "I'm lactose intolerant."
DROPS_IT = "The user and the assistant talked about many numbered turns; nothing else."


async def _say(service: Service, chat_id: str, text: str, role: str = "user") -> dict[str, Any]:
    body = {"role": role, "content": text}
    return (await service.post(f"/api/v2/chats/{chat_id}/messages", body))["message"]  # type: ignore[no-any-return]


async def _flags(service: Service, chat_id: str) -> dict[str, bool]:
    return {m["content"]: m["standing"] for m in await messages(service, chat_id)}


async def _preview(service: Service, chat_id: str) -> dict[str, Any]:
    response = await service.http.post("/api/v2/context-preview", json={"chat_id": chat_id, "user_message": "next"})
    assert response.status_code == 200, response.text
    return response.json()["preview"]  # type: ignore[no-any-return]


def _sent(service: Service) -> list[str]:
    """The contents of the last chat request (a background compaction may have asked the summarizer since)."""
    chat = next(r for r in reversed(service.fake.requests) if not is_summarizer(r))
    return [str(m.get("content")) for m in chat.json["messages"]]


def _reasons(preview: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {e["identifier"]: (e["included"], e["reason"]) for e in preview["entries"]}


async def test_user_instructions_are_flagged_when_stored_and_conflicts_and_retractions_clear_them(
    service: Service,
) -> None:
    ids = await service.setup_chat()
    chat = ids["chat"]
    for text in ("Call me Ada.", FACT, "Tell me a joke.", "Always cite sources.", "У меня аллергия на орехи."):
        await _say(service, chat, text)
    await _say(service, chat, "Always cite sources.", role="assistant")  # only the user's own messages count
    assert await _flags(service, chat) == {
        "Call me Ada.": True,
        FACT: True,
        "Tell me a joke.": False,
        "Always cite sources.": False,  # the assistant's copy, stored last, is the one the dict keeps
        "У меня аллергия на орехи.": True,
    }
    await _say(service, chat, "Call me Dr. Okafor.")  # newest on the topic "name" wins
    await _say(service, chat, "Забудь это.")  # takes back the newest: "Call me Dr. Okafor."
    flags = {m["id"]: (m["content"], m["standing"]) for m in await messages(service, chat)}
    standing = sorted(text for text, on in flags.values() if on)
    assert standing == ["Always cite sources.", FACT, "У меня аллергия на орехи."]


async def test_an_old_standing_instruction_is_in_every_prompt_until_the_user_dismisses_it(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=200)
    chat = ids["chat"]
    fact = (await _say(service, chat, FACT))["id"]
    assert (await messages(service, chat))[0]["standing"] is True
    raw = await fill(service, chat, 40)
    preview = await _preview(service, chat)
    assert preview["history"]["not_loaded"] > 0  # the instruction is older than the loaded window
    reasons = _reasons(preview)
    assert reasons[fact] == (True, "standing")
    assert reasons.get(raw[0], (False, "not loaded"))[0] is False

    service.fake.script(Reply("Noted."))
    await service.post(f"/api/v2/chats/{chat}/generate", {"content": "Suggest a dessert.", "stream": False}, 200)
    sent = _sent(service)
    assert FACT in sent
    audit = (await service.http.get(f"/api/v2/chats/{chat}/context-audit")).json()["audit"]
    assert {e["identifier"]: e["reason"] for e in audit["entries"]}[fact] == "standing"

    response = await service.http.patch(f"/api/v2/chats/{chat}/messages/{fact}", json={"standing": False})
    assert response.status_code == 200 and response.json()["message"]["standing"] is False
    assert _reasons(await _preview(service, chat)).get(fact, (False, "not loaded"))[0] is False


async def test_editing_a_message_decides_again_whether_it_is_standing(service: Service) -> None:
    ids = await service.setup_chat()
    message = (await _say(service, ids["chat"], "Tell me a joke."))["id"]
    path = f"/api/v2/chats/{ids['chat']}/messages/{message}"
    edited = await service.http.patch(path, json={"content": "Always answer briefly."})
    assert edited.status_code == 200 and edited.json()["message"]["standing"] is True
    edited = await service.http.patch(path, json={"content": "Tell me a joke."})
    assert edited.json()["message"]["standing"] is False


async def test_a_rejected_patch_changes_nothing(service: Service) -> None:
    ids = await service.setup_chat()
    fact = (await _say(service, ids["chat"], FACT))["id"]
    path = f"/api/v2/chats/{ids['chat']}/messages/{fact}"
    response = await service.http.patch(path, json={"standing": "no"})
    assert response.status_code == 422
    assert (await messages(service, ids["chat"]))[0]["standing"] is True


async def test_a_standing_instruction_survives_three_compactions_by_a_summarizer_that_drops_it(
    service: Service,
) -> None:
    ids = await service.setup_chat(context_window=4000)
    chat = ids["chat"]
    fact = (await _say(service, chat, FACT))["id"]
    for n in range(3):
        await fill(service, chat, 12)
        service.fake.script(Reply(f"{DROPS_IT} (pass {n})", output_tokens=20))
        assert (await compact(service, chat))["status"] == "completed"
        summarizer = next(r for r in reversed(service.fake.requests) if is_summarizer(r))
        system = str(summarizer.json["messages"][0]["content"])
        assert f"- {FACT}" in system  # listed to keep verbatim
        transcript = str(summarizer.json["messages"][1]["content"])
        assert FACT not in transcript  # never handed over to be folded
        stored = {m["id"]: m for m in await messages(service, chat)}
        assert stored[fact]["summarized_by"] is None and stored[fact]["standing"] is True
        assert sum(1 for m in stored.values() if m["summarized_by"]) >= 6 * (n + 1)
        assert _reasons(await _preview(service, chat))[fact] == (True, "standing")
    service.fake.script(Reply("Noted."))
    await service.post(f"/api/v2/chats/{chat}/generate", {"content": "Suggest a dessert.", "stream": False}, 200)
    sent = _sent(service)
    assert FACT in sent and any(DROPS_IT in c for c in sent)
