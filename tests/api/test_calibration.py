"""Counts that never overflow (T5): calibration from usage, the safety margin and recovery inside the turn.

The fake provider counts tokens its own way (``count_as``): 2.6 characters a token where contextshift's
approximate profile assumes 4, a 2,000-token window, context-length rejections stating the real count and
real usage. Everything is bounded by counting requests, never by the clock.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextshift import get_tokenizer
from contextshift.api.app import create_app
from contextshift.pipeline import payload_tokens
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, Service, bearer
from tests.fakes import Counting

DENSE = 2.6  # characters a token of the fake model: about 1.5x denser than the 4-characters estimate
WINDOW = 2000


def ordinary(n: int) -> str:
    return f"Message {n}: we talked about the garden, the weather and what to cook for dinner on day {n}."


async def long_chat(
    service: Service, *, model: str = "mystery-model", messages: int = 120, **bot: Any
) -> dict[str, str]:
    # A 1,024-token reply reserve set explicitly: the budget is 976 of the 2,000-token window.
    bot.setdefault("response_reserve", 1024)
    ids = await service.setup_chat(model=model, context_window=WINDOW, compaction_enabled=False, **bot)
    for n in range(messages):
        role = "user" if n % 2 == 0 else "assistant"
        await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": role, "content": ordinary(n)})
    return ids


async def generate(service: Service, chat_id: str, content: str, *, expect: int = 200) -> dict[str, Any]:
    return await service.post(f"/api/v2/chats/{chat_id}/generate", {"content": content, "stream": False}, expect)


async def audit_of(service: Service, chat_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]  # type: ignore[no-any-return]


async def model_view(service: Service, model_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/models/{model_id}")).json()["model"]  # type: ignore[no-any-return]


def chat_requests(service: Service) -> list[Any]:
    return [r for r in service.fake.requests if r.protocol in ("openai", "anthropic")]


async def test_ten_turns_on_a_long_chat_all_succeed_with_at_most_the_first_request_over_the_limit(
    service: Service,
) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    for turn in range(10):
        await generate(service, ids["chat"], f"turn {turn}: what should I plant next?")
    sent = chat_requests(service)
    over = [n for n, r in enumerate(sent) if r.over_limit]
    assert over == [0]  # the first estimate overflows once, is recovered, and never again
    assert len(sent) == 11
    assert all(r.json["max_tokens"] + Counting(DENSE).prompt_tokens(r.json) <= WINDOW for r in sent[1:])


async def test_the_factor_converges_to_the_providers_ratio_and_the_audit_says_so(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    for turn in range(10):
        await generate(service, ids["chat"], f"turn {turn}: and the roses?")
    last = chat_requests(service)[-1].json
    true_ratio = Counting(DENSE).prompt_tokens(last) / payload_tokens(last, get_tokenizer("approximate"))
    calibration = (await model_view(service, ids["model"]))["calibration"]
    assert calibration["calls"] == 11  # ten successes and the stated count of the one rejection
    assert calibration["factor"] == pytest.approx(true_ratio, rel=0.03)
    assert calibration["applied"] is True and calibration["margin"] < 0.05
    audit = await audit_of(service, ids["chat"])
    assert audit["calibration"]["label"].startswith("approximate, calibrated ×1.")
    assert audit["calibration"]["label"].endswith("from 10 calls")  # the audit was prepared before the 11th
    # The calibrated count of the request sent is close above the provider's own count of it.
    reported = audit["usage"]["input_tokens"]
    assert reported <= audit["budget"]["prompt_tokens"] <= reported * 1.08


async def test_the_first_turn_is_recovered_in_place_and_the_audit_records_both_attempts(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    reply = await generate(service, ids["chat"], "hello again")
    assert reply["message"]["role"] == "assistant"
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "completed" and audit["error_code"] is None
    first, second = audit["attempts"]
    assert first["outcome"] == "context-length-retry" and first["error_code"] == "PROVIDER_CONTEXT_LENGTH"
    rejected, accepted = chat_requests(service)
    assert first["reported_tokens"] == Counting(DENSE).prompt_tokens(rejected.json)
    assert second == {**second, "outcome": "completed", "prompt_tokens": audit["budget"]["prompt_tokens"]}
    assert len(accepted.json["messages"]) < len(rejected.json["messages"])
    messages = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert [m["role"] for m in messages[-2:]] == ["user", "assistant"]  # one input, one reply


async def test_the_factor_survives_a_restart_and_the_new_instance_does_not_overflow(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    for turn in range(3):
        await generate(service, ids["chat"], f"turn {turn}")
    before = (await model_view(service, ids["model"]))["calibration"]
    second = create_app(database=service.backend.database(), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    with Server(second) as url:
        import httpx

        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            after = (await http.get(f"/api/v2/models/{ids['model']}")).json()["model"]["calibration"]
            assert after == before and after["calls"] == 4
            seen = len(service.fake.requests)
            response = await http.post(
                f"/api/v2/chats/{ids['chat']}/generate", json={"content": "after", "stream": False}
            )
            assert response.status_code == 200
    assert [r.over_limit for r in service.fake.requests[seen:]] == [False]


async def test_an_exact_profile_gets_no_margin_and_its_factor_stays_at_one(service: Service) -> None:
    exact = get_tokenizer("gpt-4o")
    ids = await long_chat(service, model="gpt-4o")
    service.fake.count_as(Counting(count_text=exact.count, window=WINDOW))
    for turn in range(5):
        await generate(service, ids["chat"], f"turn {turn}")
    assert not any(r.over_limit for r in chat_requests(service))
    calibration = (await model_view(service, ids["model"]))["calibration"]
    assert calibration["factor"] == pytest.approx(1.0, abs=0.01) and calibration["calls"] == 5
    assert calibration["margin"] == 0 and calibration["applied"] is False and calibration["drift"] is False
    audit = await audit_of(service, ids["chat"])
    assert audit["tokenizer"] == {"profile": "o200k_base", "approximate": False}
    assert audit["budget"]["prompt_tokens"] == audit["usage"]["input_tokens"]  # exact: no margin on top


async def test_an_exact_profile_that_disagrees_with_the_provider_is_reported_as_drift(service: Service) -> None:
    ids = await long_chat(service, model="gpt-4o", messages=10)
    service.fake.count_as(chars_per_token=DENSE)
    for turn in range(5):
        await generate(service, ids["chat"], f"turn {turn}")
    calibration = (await model_view(service, ids["model"]))["calibration"]
    assert calibration["drift"] is True and calibration["applied"] is False and calibration["factor"] > 1.1
    await generate(service, ids["chat"], "one more")
    diagnostics = (await audit_of(service, ids["chat"]))["diagnostics"]
    assert any("disagrees with the provider" in d for d in diagnostics)


async def test_recovery_also_happens_while_streaming_before_the_first_token(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "stream it"})
    events = [block.split("\n")[0] for block in response.text.strip().split("\n\n")]
    assert "event: error" not in events and events[-1] == "event: done" and "event: token" in events
    assert [r.over_limit for r in chat_requests(service)] == [True, False]
    assert [r.stream for r in chat_requests(service)] == [True, True]
    audit = await audit_of(service, ids["chat"])
    assert [a["outcome"] for a in audit["attempts"]] == ["context-length-retry", "completed"]


async def test_protected_context_over_the_real_limit_fails_with_both_counts(service: Service) -> None:
    ids = await long_chat(service, messages=4)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    # By the 4-characters estimate (+10%) this input fits the 976-token budget; really it needs ~1,200.
    content = "word " * 640
    response = await service.http.post(
        f"/api/v2/chats/{ids['chat']}/generate", json={"content": content, "stream": False}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "TOKEN_BUDGET_EXCEEDED"
    rejected = chat_requests(service)
    assert [r.over_limit for r in rejected] == [True]  # nothing more is sent
    assert error["params"]["reported_tokens"] == Counting(DENSE).prompt_tokens(rejected[0].json)
    assert error["params"]["sent_tokens"] < error["params"]["reported_tokens"]
    assert error["params"]["prompt_tokens"] > 976
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "failed" and audit["error_code"] == "TOKEN_BUDGET_EXCEEDED"
    assert [a["outcome"] for a in audit["attempts"]] == ["context-length-retry", "failed"]


async def test_preview_and_status_use_the_calibrated_count(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    cold = await service.post("/api/v2/context-preview", {"chat_id": ids["chat"], "user_message": "next?"}, 200)
    await generate(service, ids["chat"], "warm up")
    await generate(service, ids["chat"], "again")
    warm = await service.post("/api/v2/context-preview", {"chat_id": ids["chat"], "user_message": "next?"}, 200)
    assert cold["preview"]["calibration"]["calls"] == 0 and cold["preview"]["calibration"]["margin"] == 0.1
    assert warm["preview"]["calibration"]["calls"] == 3 and warm["preview"]["calibration"]["scale"] > 1.4
    # The preview of what would be sent is counted at the provider's rate.
    provider_messages = warm["preview"]["provider_messages"]
    real = Counting(DENSE).prompt_tokens({"messages": provider_messages})
    assert real <= warm["preview"]["budget"]["prompt_tokens"] <= real * 1.15
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()
    context = status.get("status", status)["context"]
    assert context["estimated"] is True and context["calibration"]["calls"] == 3


async def test_a_usage_less_reply_teaches_nothing(service: Service) -> None:
    from tests.fakes import Reply

    ids = await long_chat(service, messages=4)
    service.fake.script(Reply("fine", usage=False))
    await generate(service, ids["chat"], "hi")
    assert (await model_view(service, ids["model"]))["calibration"]["calls"] == 0


def test_the_fake_counts_its_own_way() -> None:
    counting = Counting(chars_per_token=2.0, window=100)
    body = {"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 10}
    assert counting.prompt_tokens(body) == 3 + 3 + 20
    assert counting.over_window(body) is None
    assert counting.over_window({**body, "max_tokens": 80}) == (26, 80)
    assert json.dumps(body)  # a plain JSON body


async def test_compaction_with_a_dense_summarizer_shrinks_the_pass_instead_of_failing(service: Service) -> None:
    from tests.fakes import Reply

    ids = await service.setup_chat(model="gpt-4o", context_window=8000)
    dense = await service.post(
        "/api/v2/models", {"provider_id": ids["provider"], "name": "dense-summarizer", "context_window": WINDOW}
    )
    await service.http.patch(f"/api/v2/bots/{ids['bot']}", json={"compaction_model_id": dense["model"]["id"]})
    for n in range(80):
        role = "user" if n % 2 == 0 else "assistant"
        await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": role, "content": ordinary(n) * 2})
    service.fake.count_as(chars_per_token=2.0, window=WINDOW, model="dense-summarizer")
    service.fake.script(*[Reply("The user and the assistant planned the garden and dinners.")] * 20)
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/compact")
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert outcome["status"] == "completed" and outcome["error_code"] is None and outcome["message_count"] > 0
    sent = [r for r in service.fake.requests if r.json.get("model") == "dense-summarizer"]
    assert sent[0].over_limit and not any(r.over_limit for r in sent[1:])
    calibration = (await model_view(service, dense["model"]["id"]))["calibration"]
    assert calibration["factor"] > 1.7 and calibration["calls"] >= 2


async def test_anthropic_count_tokens_near_the_budget_avoids_the_rejection(service: Service) -> None:
    ids = await long_chat(service, model="claude-mystery", kind="anthropic")
    patched = await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"count_tokens": True})
    assert patched.status_code == 200 and patched.json()["provider"]["count_tokens"] is True
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    for turn in range(3):
        await generate(service, ids["chat"], f"turn {turn}")
    counted = [r for r in service.fake.requests if r.protocol == "anthropic-count"]
    assert counted and counted[0].headers["x-api-key"] == "sk-test-KEY-789"
    assert not any(r.over_limit for r in chat_requests(service))  # no request was ever rejected
    first = service.fake.requests[:3]
    assert [r.protocol for r in first[:2]] == ["anthropic-count", "anthropic"]
    audit = await audit_of(service, ids["chat"])
    assert audit["status"] == "completed"
    provider = (await service.http.get(f"/api/v2/providers/{ids['provider']}")).json()["provider"]
    assert provider["count_tokens"] is True


async def test_without_count_tokens_the_anthropic_rejection_is_recovered(service: Service) -> None:
    ids = await long_chat(service, model="claude-mystery", kind="anthropic")
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    await generate(service, ids["chat"], "hello")
    assert [r.over_limit for r in chat_requests(service)] == [True, False]
    assert not any(r.protocol == "anthropic-count" for r in service.fake.requests)
    attempts = (await audit_of(service, ids["chat"]))["attempts"]
    assert attempts[0]["reported_tokens"] == Counting(DENSE).prompt_tokens(chat_requests(service)[0].json)


async def test_exact_counts_come_from_the_real_endpoint_once_per_content(fake: Any) -> None:
    from contextshift.providers import ChatRequest, make_client
    from contextshift.service.recovery import exact_count

    fake.count_as(chars_per_token=DENSE)
    client = make_client("anthropic", fake.base_url, "sk-test")
    request = ChatRequest(model="claude-x", messages=[{"role": "user", "content": "x" * 260}], system="be brief")
    try:
        scope = fake.base_url + "/unique-to-this-test"
        first = await exact_count(client.count_tokens, request, scope)  # type: ignore[attr-defined]
        again = await exact_count(client.count_tokens, request, scope)  # type: ignore[attr-defined]
    finally:
        await client.aclose()
    assert first == again == 3 + (3 + 4) + (3 + 100)
    assert [r.path for r in fake.requests] == ["/v1/messages/count_tokens"]


async def test_an_unreachable_count_tokens_leaves_the_estimate() -> None:
    from contextshift.providers import ChatRequest, make_client
    from contextshift.service.recovery import exact_count
    from tests.fakes import closed_port_url

    client = make_client("anthropic", closed_port_url(), "sk-test")
    try:
        request = ChatRequest(model="claude-x", messages=[{"role": "user", "content": "unreachable"}])
        assert await exact_count(client.count_tokens, request) is None  # type: ignore[attr-defined]
    finally:
        await client.aclose()


async def test_a_local_servers_empty_stream_is_recovered_without_a_stated_count(service: Service) -> None:
    from tests.fakes import Raw

    ids = await long_chat(service, messages=40)
    service.fake.script(Raw(200, b"", content_type="text/event-stream"))  # llama-cpp-python's overflow
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "go on"})
    assert response.text.strip().split("\n\n")[-1].startswith("event: done")
    first, second = chat_requests(service)
    audit = await audit_of(service, ids["chat"])
    retry = audit["attempts"][0]
    assert retry["outcome"] == "context-length-retry" and retry["reported_tokens"] is None
    assert retry["ratio"] == pytest.approx(1.25 * retry["prompt_tokens"] / retry["estimated_tokens"], rel=1e-3)
    assert len(second.json["messages"]) < len(first.json["messages"])  # shifted a quarter further
    assert (await model_view(service, ids["model"]))["calibration"]["calls"] == 1  # learned only from the success


async def test_the_openai_compatible_endpoint_calibrates_too(service: Service) -> None:
    import openai

    ids = await service.setup_chat(model="mystery-model", context_window=WINDOW)
    service.fake.count_as(chars_per_token=DENSE, window=WINDOW)
    client = openai.AsyncOpenAI(base_url=f"{service.url}/v1", api_key=service.token, max_retries=0)
    messages: list[Any] = [{"role": "user" if n % 2 == 0 else "assistant", "content": ordinary(n)} for n in range(120)]
    rejected = 0
    for turn in range(4):
        try:
            await client.chat.completions.create(
                model="mystery-model", messages=[*messages, {"role": "user", "content": f"turn {turn}"}]
            )
        except openai.BadRequestError as error:
            assert error.code == "context_length_exceeded"
            rejected += 1
    await client.close()
    assert rejected <= 1  # only an uncalibrated first call can overflow; its stated count teaches the factor
    assert [r.over_limit for r in chat_requests(service)][1:] == [False] * 3
    calibration = (await model_view(service, ids["model"]))["calibration"]
    assert calibration["calls"] == 4 and calibration["factor"] > 1.3


def test_the_margin_of_an_uncalibrated_estimate_is_configurable() -> None:
    from contextshift.core.calibration import Calibration
    from contextshift.service.calibration import counting_of
    from contextshift.service.rules import Rules
    from contextshift.settings import Settings

    def margin(value: str | None) -> float:
        settings = Settings.from_env({} if value is None else {"CONTEXTSHIFT_ESTIMATE_MARGIN": value})
        return Rules.from_settings(settings).estimate_margin

    assert margin(None) == 0.10
    assert margin("0.25") == 0.25
    counting = counting_of(get_tokenizer("approximate"), Calibration(), margin("0.25"))
    assert counting.profile.margin == 0.25  # type: ignore[attr-defined]
    assert counting.report()["margin"] == 0.25
    assert margin("0") == 0.0
    for wrong in ("lots", "3", "-0.1"):  # not a number, above 0.5, below 0: the start is refused
        with pytest.raises(ValueError, match="CONTEXTSHIFT_ESTIMATE_MARGIN"):
            margin(wrong)
