"""T4/T5 in the service: a provider that tokenizes gives exact prompt counts (the ``server`` profile).

The fake serves a tokenizer and counts the chat requests it receives with it, so "the audit's prompt count
equals what the server counted of the request it received" is an exact check.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Service
from tests.fakes import Reply
from tests.fakes import tokenizer as fake_tokenizer


async def audit_of(service: Service, chat_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/chats/{chat_id}/context-audit")).json()["audit"]  # type: ignore[no-any-return]


def content_calls(service: Service) -> list[str]:
    """Texts the fake was asked to tokenize (template renders left out)."""
    out = []
    for r in service.fake.tokenize_requests:
        body = r.json
        text = body.get("content", body.get("prompt", body.get("input")))
        if isinstance(text, str) and "<|im_start|>" not in text:
            out.append(text)
    return out


@pytest.mark.parametrize("dialect", ["llama.cpp", "vllm", "llama-cpp-python"])
async def test_a_tokenizing_server_gives_the_turn_its_exact_prompt_count(service: Service, dialect: str) -> None:
    service.fake.tokenizer = dialect
    ids = await service.setup_chat(model="smollm2-135m", context_window=2048, system_prompt="Be brief.")
    for content in ("Bonjour, ça va ?", "Расскажи сказку про кота.", "用中文写一首诗"):
        body = {"content": content, "stream": False}
        response = await service.post(f"/api/v2/chats/{ids['chat']}/generate", body, 200)
        audit = await audit_of(service, ids["chat"])
        assert audit["tokenizer"] == {"profile": "server", "approximate": False}
        sent = service.fake.last.json
        assert audit["budget"]["prompt_tokens"] == fake_tokenizer.prompt_tokens(dialect, sent)
        assert response["usage"]["input_tokens"] == audit["budget"]["prompt_tokens"]


async def test_each_message_is_tokenized_once_across_turns(service: Service) -> None:
    service.fake.tokenizer = "llama.cpp"
    ids = await service.setup_chat(model="smollm2-135m", context_window=2048)
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "first question", "stream": False}, 200)
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "second question", "stream": False}, 200)
    calls = [c for c in content_calls(service) if c not in ("", "Hello", "Hi there", "How are you?")]  # not the probe
    assert len(calls) == len(set(calls))  # nothing counted twice
    assert "first question" in calls and "Echo: first question" in calls and "second question" in calls


async def test_a_streamed_turn_without_usage_reports_the_servers_count(service: Service) -> None:
    service.fake.tokenizer = "llama.cpp"
    ids = await service.setup_chat(model="smollm2-135m", context_window=2048)
    service.fake.script(Reply("fine thanks", usage=False))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "how are you?"})
    done = json.loads(response.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    sent = service.fake.last.json
    assert done["usage"]["estimated"] is True
    assert done["usage"]["input_tokens"] == fake_tokenizer.prompt_tokens("llama.cpp", sent)


async def test_without_a_tokenizer_endpoint_the_estimate_is_used_and_said(service: Service) -> None:
    ids = await service.setup_chat(model="smollm2-135m", context_window=2048)
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": False}, 200)
    audit = await audit_of(service, ids["chat"])
    assert audit["tokenizer"] == {"profile": "approximate", "approximate": True}
    assert len(service.fake.requests) == 1  # the probe costs no chat request


async def test_a_model_with_an_offline_exact_profile_is_not_probed(service: Service) -> None:
    service.fake.tokenizer = "llama.cpp"
    ids = await service.setup_chat(model="gpt-4o")
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": False}, 200)
    assert (await audit_of(service, ids["chat"]))["tokenizer"]["profile"] == "o200k_base"
    assert service.fake.tokenize_requests == []


async def test_tokenizer_server_is_chosen_explicitly_and_the_preview_and_status_use_it(service: Service) -> None:
    service.fake.tokenizer = "vllm"
    ids = await service.setup_chat(model="gpt-4o", context_window=4096)
    response = await service.http.patch(f"/api/v2/models/{ids['model']}", json={"tokenizer": "server"})
    assert response.status_code == 200, response.text
    body = {"chat_id": ids["chat"], "user_message": "Hello there"}
    preview = await service.post("/api/v2/context-preview", body, 200)
    assert preview["preview"]["tokenizer"] == {"profile": "server", "approximate": False}
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "Hello there", "stream": False}, 200)
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["context"]["estimated"] is False
