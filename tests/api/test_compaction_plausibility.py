"""C8/C12 in the service: unfaithful summaries are rejected with their reason, partial runs report what they
committed, and the log keeps the usage of every pass (rejected ones included)."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Service
from tests.api.test_compaction import compact, fill, logs, messages
from tests.fakes import Reply

CHINESE = [
    "你好！我想在北京开一家咖啡店，预算是50万元，地点在朝阳区三里屯附近。",
    "三里屯租金较高，每平方米每月大约300元。50万元的预算中，装修约15万元，设备约8万元。",
    "我的合伙人王磊有十年咖啡师经验。我们计划每天营业12小时。",
    "有王磊的经验很好。建议第一年目标每天卖出200杯，平均售价30元，月营业额约18万元。",
]


async def post_all(service: Service, chat_id: str, texts: list[str], rounds: int) -> list[str]:
    ids = []
    for n in range(rounds):
        for i, text in enumerate(texts):
            body = {"role": "user" if i % 2 == 0 else "assistant", "content": f"{text}（第{n}轮）"}
            ids.append((await service.post(f"/api/v2/chats/{chat_id}/messages", body))["message"]["id"])
    return ids


async def test_an_english_story_for_a_chinese_chat_is_rejected_and_history_stays(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    raw = await post_all(service, ids["chat"], CHINESE, 3)
    made_up = "In the context of the video, the user's message was about something they saw with a friend."
    service.fake.script(Reply(made_up, input_tokens=900, output_tokens=19))
    outcome = await compact(service, ids["chat"])
    assert outcome["status"] == "failed" and outcome["error_code"] == "COMPACTION_SUMMARY_UNFAITHFUL"
    assert outcome["reason"] == "other-script"
    assert (outcome["passes_committed"], outcome["passes_failed"]) == (0, 1)
    stored = await messages(service, ids["chat"])
    assert [m["id"] for m in stored] == raw and not any(m["summarized_by"] for m in stored)
    entry = (await logs(service, ids["chat"]))[0]
    assert entry["error_code"] == "COMPACTION_SUMMARY_UNFAITHFUL"
    assert (entry["input_tokens"], entry["output_tokens"]) == (900, 19)  # a rejected pass's usage is kept


async def test_a_compact_that_committed_a_pass_before_one_failed_is_ok_and_says_so(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=100)
    await fill(service, ids["chat"], 60)  # several passes' worth
    service.fake.script(
        Reply("Summary part 1: the user counted words.", input_tokens=700, output_tokens=10),
        Reply("I'm sorry for any confusion, but I cannot help with that.", input_tokens=650, output_tokens=13),
    )
    outcome: dict[str, Any] = await compact(service, ids["chat"])
    assert outcome["status"] == "completed" and outcome["message_count"] > 0
    assert (outcome["passes_committed"], outcome["passes_failed"]) == (1, 1)
    assert outcome["error_code"] == "COMPACTION_SUMMARY_UNFAITHFUL" and outcome["reason"] == "refusal"
    summaries = (await service.http.get(f"/api/v2/chats/{ids['chat']}/summaries")).json()["summaries"]
    assert len(summaries) == 1 and "counted words" in summaries[0]["content"]
    entry = (await logs(service, ids["chat"]))[0]
    assert entry["status"] == "completed" and entry["passes"] == 2
    assert (entry["input_tokens"], entry["output_tokens"]) == (1350, 23)


async def test_the_compact_command_reports_a_partial_run(service: Service) -> None:
    ids = await service.setup_chat(context_window=1200, response_reserve=100)
    await fill(service, ids["chat"], 60)
    service.fake.script(Reply("Summary part 1: the user counted words."), Reply("Sorry, I can't."))
    answer = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/compact", "stream": False}, 200)
    text = answer["message"]["content"]
    assert text.startswith("Compacted ") and "COMPACTION_SUMMARY_UNFAITHFUL" in text
