"""One budget figure everywhere (issue 27): the preview (the context meter), the status panel and the ``/status``
command give the next prompt's tokens against the same budget, the window less the reply's reserve; and the
``/compact`` command says why a pass failed in plain words."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Service
from tests.api.test_compaction import fill
from tests.api.test_compaction_plausibility import CHINESE, post_all
from tests.fakes import Reply


async def preview_budget(service: Service, chat_id: str) -> dict[str, Any]:
    response = await service.http.post("/api/v2/context-preview", json={"chat_id": chat_id})
    assert response.status_code == 200, response.text
    return response.json()["preview"]["budget"]  # type: ignore[no-any-return]


async def test_the_status_and_the_preview_give_the_same_prompt_tokens_and_budget(service: Service) -> None:
    ids = await service.setup_chat(context_window=2048, response_reserve=256)
    await fill(service, ids["chat"], 6)
    budget = await preview_budget(service, ids["chat"])
    context = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]["context"]
    assert budget["budget"] == 1792 == budget["context_limit"] - budget["response_reserve"]
    assert (context["budget"], context["response_reserve"], context["window"]) == (1792, 256, 2048)
    assert context["tokens"] == budget["prompt_tokens"] > 0
    assert context["percent"] == round(100 * context["tokens"] / 1792, 1)


async def test_the_status_command_says_the_same_figures_as_the_status_panel(service: Service) -> None:
    ids = await service.setup_chat(context_window=2048, response_reserve=256)
    await fill(service, ids["chat"], 6)
    context = (await service.http.get(f"/api/v2/chats/{ids['chat']}/status")).json()["status"]["context"]
    answer = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/status", "stream": False}, 200)
    first = answer["message"]["content"].splitlines()[0]
    assert first == (
        f"Context: {context['tokens']:,} of 1,792 tokens ({context['percent']:.0f}%); "
        "a 2,048-token window, 256 reserved for the reply."
    )


async def test_the_compact_command_says_why_a_summary_was_refused(service: Service) -> None:
    ids = await service.setup_chat(context_window=4000)
    await post_all(service, ids["chat"], CHINESE, 3)
    service.fake.script(Reply("In the context of the video, the user's message was about something they saw."))
    answer = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/compact", "stream": False}, 200)
    assert answer["message"]["content"] == (
        "Compaction failed: the summary was refused: the summary is written in another alphabet than the "
        "conversation (COMPACTION_SUMMARY_UNFAITHFUL). Every message is still there."
    )


async def test_the_status_command_says_why_automatic_compaction_is_off(service: Service) -> None:
    ids = await service.setup_chat(context_window=2048, compaction_enabled=False)
    answer = await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "/status", "stream": False}, 200)
    assert answer["message"]["content"].splitlines()[-1] == (
        "Automatic compaction: off: compaction is turned off in the bot's settings (disabled)."
    )
