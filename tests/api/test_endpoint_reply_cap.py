"""Issue 25, point 10 on ``/v1`` (both shapes), over a real socket on SQLite and PostgreSQL: a provider's reply
has a cap there too. A 20 MB stream is stopped at the cap derived from the forwarded ``max_tokens`` and what came
is passed on, the stream ending as its shape ends; a JSON reply over the cap is cut to it. The chat route's own
tests are in test_provider_faults.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextshift.providers.http import reply_cap
from tests.api.conftest import Service
from tests.fakes import Reply

BIG = 20 * 1024 * 1024
PIECE = "x" * (1024 * 1024 - 1) + " "


def _openai_text(body: str) -> tuple[str, bool]:
    """The streamed text of an OpenAI-shaped SSE body, and whether it ended with ``[DONE]``."""
    text, done = [], False
    for line in body.splitlines():
        if not line.startswith("data: "):
            continue
        data = line[len("data: ") :]
        if data == "[DONE]":
            done = True
            continue
        for choice in json.loads(data).get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text), done


def _anthropic_text(body: str) -> tuple[str, bool]:
    """The streamed text of an Anthropic-shaped SSE body, and whether it ended with ``message_stop``."""
    text, done = [], False
    for line in body.splitlines():
        if not line.startswith("data: "):
            continue
        event: dict[str, Any] = json.loads(line[len("data: ") :])
        if event.get("type") == "content_block_delta":
            text.append(event["delta"].get("text", ""))
        done = done or event.get("type") == "message_stop"
    return "".join(text), done


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_a_20_mb_stream_through_v1_is_stopped_at_its_cap(service: Service, shape: str) -> None:
    await service.setup_chat(kind=shape, model="gpt-4o", context_window=8000)
    service.fake.script(Reply(PIECE * 20, chunks=[PIECE] * 20))
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 1000}
    path = "/v1/chat/completions" if shape == "openai" else "/v1/messages"
    response = await service.http.post(path, json=body)
    assert response.status_code == 200, response.text[:300]
    text, ended = (_openai_text if shape == "openai" else _anthropic_text)(response.text)
    assert ended and len(text) == reply_cap(1000) < BIG
    assert len(service.fake.requests) == 1


async def test_a_json_reply_through_v1_over_its_cap_is_cut(service: Service) -> None:
    await service.setup_chat(model="gpt-4o", context_window=8000)
    service.fake.script(Reply("y" * 100_000))
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}
    response = await service.http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text[:300]
    choice = response.json()["choices"][0]
    assert choice["message"]["content"] == "y" * reply_cap(100)
    assert choice["finish_reason"] == "length"
