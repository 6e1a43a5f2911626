"""Concurrent turns (N5): 32 at once on one chat and on 32 chats, in one process and in two real
``contextshift serve`` processes on one database, SQLite and PostgreSQL. Every request is answered
(no 5xx), every input gets exactly one reply, each chat's transcript alternates and each reply names
(``reply_to``) and echoes the question it answers."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import ADMIN_TOKEN, Service, bearer
from tests.databases import PG_ENV, Backend, _pg_execute, _plain_dsn
from tests.fakes import FakeProvider
from tests.serving import ServeProcess

TURNS = 32


async def make_chats(http: httpx.AsyncClient, base: str, fake: FakeProvider, count: int) -> list[str]:
    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await http.post(f"{base}/api/v2{path}", json=body)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    provider = (await post("/providers", {"name": "fake", "kind": "openai", "base_url": fake.base_url}))["provider"]
    model = (await post("/models", {"provider_id": provider["id"], "name": "gpt-4o", "context_window": 64000}))["model"]
    bot = (await post("/bots", {"name": "helper", "chat_model_id": model["id"]}))["bot"]
    return [(await post("/chats", {"bot_id": bot["id"]}))["chat"]["id"] for _ in range(count)]


async def turn(http: httpx.AsyncClient, base: str, chat_id: str, n: int) -> tuple[int, str]:
    """One turn, streamed for even ``n``; (status, the final SSE event kind or "json")."""
    url = f"{base}/api/v2/chats/{chat_id}/generate"
    body = {"content": f"question {n}", "stream": n % 2 == 0}
    response = await http.post(url, json=body)
    if not body["stream"] or response.status_code != 200:
        return response.status_code, "json"
    kinds = [line[len("event: ") :] for line in response.text.splitlines() if line.startswith("event: ")]
    return response.status_code, kinds[-1] if kinds else "none"


async def run_turns(bases: list[str], chat_ids: list[str]) -> list[tuple[int, str]]:
    async with httpx.AsyncClient(timeout=120, headers=bearer(ADMIN_TOKEN)) as http:
        jobs = [turn(http, bases[n % len(bases)], chat_ids[n % len(chat_ids)], n) for n in range(TURNS)]
        return await asyncio.gather(*jobs)


async def transcript(http: httpx.AsyncClient, base: str, chat_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"{base}/api/v2/chats/{chat_id}/messages", params={"limit": 500})
    assert response.status_code == 200
    return response.json()["messages"]  # type: ignore[no-any-return]


async def check_transcripts(base: str, chat_ids: list[str]) -> int:
    """Every chat alternates user/assistant, each reply answers the message before it; returns the replies."""
    replies = 0
    async with httpx.AsyncClient(timeout=60, headers=bearer(ADMIN_TOKEN)) as http:
        for chat_id in chat_ids:
            messages = await transcript(http, base, chat_id)
            assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2)
            for question, answer in zip(messages[::2], messages[1::2], strict=True):
                assert answer["reply_to"] == question["id"]
                assert answer["content"] == f"Echo: {question['content']}"
                assert not answer["meta"].get("partial") and not question["meta"].get("failed")
            replies += len(messages) // 2
    return replies


def assert_all_answered(results: list[tuple[int, str]]) -> None:
    assert [status for status, _ in results] == [200] * TURNS
    assert {kind for _, kind in results} <= {"json", "done"}


@pytest.mark.parametrize("chats", [1, TURNS], ids=["one-chat", "32-chats"])
async def test_concurrent_turns_in_one_process_all_get_answered_in_order(service: Service, chats: int) -> None:
    chat_ids = await make_chats(service.http, service.url, service.fake, chats)
    assert_all_answered(await run_turns([service.url], chat_ids))
    assert await check_transcripts(service.url, chat_ids) == TURNS
    assert len(service.fake.requests) == TURNS
    assert all(r.rejected is None for r in service.fake.requests)  # every prompt alternated


@pytest.fixture
async def shared_database_url(backend: Backend) -> AsyncIterator[str]:
    """A database URL two processes can open: the backend's SQLite file, or a new PostgreSQL database."""
    if backend.name == "sqlite":
        yield backend.url
        return
    server = os.environ[PG_ENV]
    name = f"cs_conc_{uuid.uuid4().hex[:12]}"
    await _pg_execute(_plain_dsn(server), f'CREATE DATABASE "{name}"')
    try:
        yield _plain_dsn(server, name)
    finally:
        await _pg_execute(_plain_dsn(server), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("chats", [1, TURNS], ids=["one-chat", "32-chats"])
async def test_concurrent_turns_in_two_processes_on_one_database_all_get_answered_in_order(
    shared_database_url: str, fake: FakeProvider, tmp_path: Path, chats: int
) -> None:
    # One data folder (the key that encrypts provider keys) and one admin token for both instances.
    env = {"CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN, "CONTEXTSHIFT_DATA_DIR": str(tmp_path / "data")}
    first = ServeProcess(shared_database_url, tmp_path / "serve-1.log", env)
    second = ServeProcess(shared_database_url, tmp_path / "serve-2.log", env)
    with first, second:
        async with httpx.AsyncClient(timeout=60, headers=bearer(ADMIN_TOKEN)) as http:
            chat_ids = await make_chats(http, first.url, fake, chats)
        results = await run_turns([first.url, second.url], chat_ids)
        assert_all_answered(results)
        assert await check_transcripts(second.url, chat_ids) == TURNS
    assert len(fake.requests) == TURNS
    assert all(r.rejected is None for r in fake.requests)
    for log in (first.log_path, second.log_path):
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
