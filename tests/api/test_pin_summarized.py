"""Pin on a summarized message (V5): it goes back into the prompt raw, marked pinned, and the summary still
stands for the rest; the preview counts what its entries cannot list (summarized, not loaded)."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Service
from tests.api.test_compaction import SUMMARY, compact, fill, is_summarizer, messages
from tests.fakes import Reply


async def _preview(service: Service, chat_id: str, text: str = "next") -> dict[str, Any]:
    response = await service.http.post("/api/v2/context-preview", json={"chat_id": chat_id, "user_message": text})
    assert response.status_code == 200, response.text
    return response.json()["preview"]  # type: ignore[no-any-return]


async def _summarized_chat(service: Service) -> tuple[dict[str, str], list[str]]:
    ids = await service.setup_chat(context_window=4000)
    await fill(service, ids["chat"], 12)
    service.fake.script(Reply(SUMMARY, output_tokens=20))
    assert (await compact(service, ids["chat"]))["status"] == "completed"
    covered = [m["id"] for m in await messages(service, ids["chat"]) if m["summarized_by"]]
    assert len(covered) >= 3
    return ids, covered


async def test_pinning_a_summarized_message_sends_it_raw_and_the_summary_stands_for_the_rest(
    service: Service,
) -> None:
    ids, covered = await _summarized_chat(service)
    before = await _preview(service, ids["chat"])
    assert before["history"] == {"not_loaded": 0, "summarized": len(covered)}
    pinned = covered[1]
    response = await service.http.patch(f"/api/v2/chats/{ids['chat']}/messages/{pinned}", json={"pinned": True})
    assert response.status_code == 200 and response.json()["message"]["summarized_by"]  # storage keeps the link

    after = await _preview(service, ids["chat"])
    by_id = {e["identifier"]: e for e in after["entries"]}
    assert by_id[pinned]["included"] and by_id[pinned]["reason"] == "protected"
    assert [e["identifier"] for e in after["entries"]].count(pinned) == 1  # listed once, sent
    summary = next(e for e in after["entries"] if e["source"] == "summary")
    assert summary["included"] and summary["stands_for"] == [c for c in covered if c != pinned]
    assert all(by_id[c]["reason"] == "summarized" for c in covered if c != pinned)
    assert after["history"] == {"not_loaded": 0, "summarized": len(covered) - 1}
    assert after["budget"]["prompt_tokens"] > before["budget"]["prompt_tokens"]
    # The summary stands before the pinned message, as in the chat: its anchor is the first covered message.
    order = [e["identifier"] for e in after["entries"] if e["included"]]
    assert order.index(summary["identifier"]) < order.index(pinned)

    service.fake.script(Reply("ok"))
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "go on", "stream": False}, 200)
    sent = service.fake.last
    assert not is_summarizer(sent)
    contents = [str(m.get("content")) for m in sent.json["messages"]]
    pinned_text = next(m["content"] for m in await messages(service, ids["chat"]) if m["id"] == pinned)
    assert pinned_text in contents and any(SUMMARY in c for c in contents)
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    assert {e["identifier"]: e["reason"] for e in audit["entries"]}[pinned] == "protected"
    assert audit["history"]["summarized"] == len(covered) - 1


async def test_unpinning_it_folds_it_back_into_the_summary(service: Service) -> None:
    ids, covered = await _summarized_chat(service)
    path = f"/api/v2/chats/{ids['chat']}/messages/{covered[0]}"
    await service.http.patch(path, json={"pinned": True})
    await service.http.patch(path, json={"pinned": False})
    entries = (await _preview(service, ids["chat"]))["entries"]
    summary = next(e for e in entries if e["source"] == "summary")
    assert summary["stands_for"] == covered
    assert {e["identifier"]: e["reason"] for e in entries}[covered[0]] == "summarized"


async def test_the_preview_counts_history_older_than_the_loaded_window(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=200)
    raw = await fill(service, ids["chat"], 40)
    preview = await _preview(service, ids["chat"])
    listed = {e["identifier"] for e in preview["entries"]} & set(raw)
    not_loaded = preview["history"]["not_loaded"]
    assert not_loaded > 0 and preview["history"]["summarized"] == 0
    assert len(listed) + not_loaded == len(raw)  # every message is listed or counted, never both
    await service.http.patch(f"/api/v2/chats/{ids['chat']}/messages/{raw[0]}", json={"pinned": True})
    pinned = await _preview(service, ids["chat"])
    assert {e["identifier"]: e["reason"] for e in pinned["entries"]}[raw[0]] == "protected"
    assert pinned["history"]["not_loaded"] == not_loaded - 1


async def test_a_bot_preview_without_a_chat_has_no_history_counts(service: Service) -> None:
    ids = await service.setup_chat()
    response = await service.http.post("/api/v2/context-preview", json={"bot_id": ids["bot"], "user_message": "hi"})
    assert response.status_code == 200 and response.json()["preview"]["history"] is None


async def test_messages_the_summarize_strategy_folds_are_counted_with_the_stored_ones(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=200, context_strategy="summarize")
    await fill(service, ids["chat"], 16, words=20)
    preview = await _preview(service, ids["chat"])
    folded = [e["identifier"] for e in preview["entries"] if e["reason"] == "summarized"]
    assert folded and preview["history"]["summarized"] == len(folded)
