"""V3/C14: a streamed turn whose server reports no usage gets the turn's own counts, marked estimated."""

from __future__ import annotations

import json
from typing import Any

from tests.api.conftest import Service
from tests.fakes import Reply


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines["event"], json.loads(lines["data"])))
    return events


async def test_a_stream_without_usage_reports_the_prompt_count_as_an_estimate(service: Service) -> None:
    ids = await service.setup_chat(system_prompt="You are terse.")
    service.fake.script(Reply("one two three", usage=False))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "count to three"})
    done = sse_events(response.text)[-1][1]
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    prompt_tokens = audit["budget"]["prompt_tokens"]
    assert prompt_tokens > 0
    assert done["usage"] == {
        "input_tokens": prompt_tokens,
        "output_tokens": 3,  # "one two three" in o200k_base
        "cached_input_tokens": 0,
        "estimated": True,
    }
    assert audit["usage"]["estimated"] is True and audit["usage"]["input_tokens"] == prompt_tokens
    status = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]
    assert status["prompt_cache"]["input_tokens"] == prompt_tokens


async def test_a_reported_usage_is_not_marked_estimated(service: Service) -> None:
    ids = await service.setup_chat()
    service.fake.script(Reply("fine", input_tokens=77, output_tokens=1))
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi"})
    done = sse_events(response.text)[-1][1]
    assert done["usage"]["input_tokens"] == 77 and done["usage"]["estimated"] is False
