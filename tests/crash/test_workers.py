"""V8 with real processes on PostgreSQL: two ``serve --no-jobs`` API instances and ``contextshift worker`` processes.

Turns on either instance queue background compaction and only the worker runs it; a worker killed with SIGKILL in
the middle of a pass has the pass run to its end exactly once by the next worker (one summary, one ``ok`` log,
nothing left ``running``); SIGTERM lets a worker finish its pass, then it stops. The summarizer is the fake
provider over a real socket, holding its answer open (``Reply.hold``) for as long as a test needs; waits are
bounded by counting polls of 0.1 s, never by the clock.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import ADMIN_TOKEN
from tests.crash.conftest import POLLS_PER_MINUTE, Served, Working
from tests.crash.test_kill import SUMMARIZER, SUMMARY, _messages, _post, _true, _until
from tests.fakes import FakeProvider, RecordedRequest, Reply

pytestmark = pytest.mark.postgres

#: Every process of one deployment shares the secret key (provider keys are encrypted with it) and the admin.
#: Heartbeats every second, dead after 10 s: recovery within the tests' minute, yet a process whose event loop a
#: pass keeps busy for a few seconds on a loaded machine is not taken for dead.
SHARED = {
    "CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN,
    "CONTEXTSHIFT_SECRET_KEY": base64.urlsafe_b64encode(b"k" * 32).decode(),
    "CONTEXTSHIFT_HEARTBEAT_SECONDS": "1",
    "CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS": "10",
}


def _summarizer_calls(fake: FakeProvider, chat_marker: str) -> list[RecordedRequest]:
    """The summarizer's requests that fold messages of the chat whose turns carry ``chat_marker``."""
    return [
        r
        for r in fake.requests
        if str((r.json or {}).get("messages", [{}])[0].get("content", "")).startswith(SUMMARIZER)
        and chat_marker in str(r.json)
    ]


async def _chat(http: httpx.AsyncClient, model_id: str, marker: str) -> str:
    """A chat at ~55% of its 4,000-token window: the next turn queues a background pass (50%), and none runs
    before it is sent (75%)."""
    bot = await _post(http, "/api/v2/bots", {"name": marker, "chat_model_id": model_id, "response_reserve": 200})
    chat_id = str((await _post(http, "/api/v2/chats", {"bot_id": bot["bot"]["id"]}))["chat"]["id"])
    for n in range(20):
        role = "user" if n % 2 == 0 else "assistant"
        words = " ".join(f"word{n}x{i}" for i in range(30))
        await _post(http, f"/api/v2/chats/{chat_id}/messages", {"role": role, "content": f"{marker} {n}: {words}"})
    return chat_id


async def _model(http: httpx.AsyncClient, fake: FakeProvider) -> str:
    provider = await _post(
        http, "/api/v2/providers", {"name": "fake", "kind": "openai", "base_url": fake.base_url, "api_key": "sk-x"}
    )
    model = await _post(
        http,
        "/api/v2/models",
        {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "context_window": 4000},
    )
    return str(model["model"]["id"])


async def _turn(http: httpx.AsyncClient, chat_id: str) -> None:
    answered = await _post(http, f"/api/v2/chats/{chat_id}/generate", {"content": "go on", "stream": False}, 200)
    assert answered["message"]["content"] == "Sure."


async def _logs(http: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v2/chats/{chat_id}/compaction/logs")
    assert response.status_code == 200, response.text
    return response.json()["logs"]  # type: ignore[no-any-return]


async def _ended(http: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]] | None:
    """The chat's compaction logs once one is ``ok`` and none runs."""
    logs = await _logs(http, chat_id)
    done = logs and all(e["status"] != "running" for e in logs) and any(e["status"] == "completed" for e in logs)
    return logs if done else None


async def _jobs(http: httpx.AsyncClient, *statuses: str) -> list[dict[str, Any]]:
    response = await http.get("/api/v2/jobs", params=[("status", s) for s in statuses])
    assert response.status_code == 200, response.text
    assert response.json()["runner"] == "procrastinate"
    return response.json()["jobs"]  # type: ignore[no-any-return]


def _of_chat(jobs: list[dict[str, Any]], chat_id: str) -> list[dict[str, Any]]:
    return [j for j in jobs if j["task"] == "compaction.pass" and j["args"] == {"chat_id": chat_id}]


def _api(postgres_url: str, tmp_path: Path, name: str) -> Served:
    return Served(postgres_url, tmp_path / f"{name}.log", dict(SHARED), args=["--no-jobs"])


def _worker(postgres_url: str, tmp_path: Path, name: str) -> Working:
    return Working(postgres_url, tmp_path / f"{name}.log", dict(SHARED))


async def test_turns_on_two_api_instances_queue_compaction_that_workers_run_once_even_through_a_kill(
    postgres_url: str, tmp_path: Path, fake_provider: FakeProvider
) -> None:
    first, second = _api(postgres_url, tmp_path, "api-1"), _api(postgres_url, tmp_path, "api-2")
    worker, successor = _worker(postgres_url, tmp_path, "worker-1"), _worker(postgres_url, tmp_path, "worker-2")
    try:
        first.start()
        second.start()
        async with first.client() as a, second.client() as b:
            model_id = await _model(a, fake_provider)
            chat_a, chat_b = await _chat(a, model_id, "alpha"), await _chat(b, model_id, "bravo")

            # No worker yet: a turn on each instance queues a pass, and nothing runs it.
            fake_provider.script(Reply("Sure."), Reply("Sure."))
            await _turn(a, chat_a)
            await _turn(b, chat_b)

            async def both_queued() -> bool:  # each turn's after-turn check runs once its reply is out
                queued = await _jobs(b, "queued")
                return len(_of_chat(queued, chat_a)) == 1 and len(_of_chat(queued, chat_b)) == 1

            await _until(both_queued)
            assert await _logs(a, chat_a) == [] and await _logs(b, chat_b) == []
            assert len(fake_provider.requests) == 2  # the two replies; no summarizer call

            health = (await a.get("/healthz")).json()
            assert (health["status"], health["database_status"], health["role"], health["jobs"]) == (
                "ok",
                "ok",
                "api",
                "procrastinate",
            )
            assert health["workers"] == []

            fake_provider.script(Reply(SUMMARY), Reply(SUMMARY))
            worker.start()
            logs_a = await _until(lambda: _ended(b, chat_a))  # read on the other instance
            logs_b = await _until(lambda: _ended(a, chat_b))
            assert [(e["trigger"], e["status"]) for e in logs_a] == [("background", "completed")]
            assert [(e["trigger"], e["status"]) for e in logs_b] == [("background", "completed")]

            async def workers() -> list[dict[str, Any]]:
                return (await b.get("/healthz")).json()["workers"]  # type: ignore[no-any-return]

            assert [w["role"] for w in await _until(workers)] == ["worker"]

            # Any instance gives the same answer about a chat.
            for path in (f"/api/v2/chats/{chat_a}/status", f"/api/v2/chats/{chat_a}/messages?limit=500"):
                assert (await a.get(path)).json() == (await b.get(path)).json()

            # The worker is killed in the middle of a pass; the next worker runs it to its end, once.
            chat_c = await _chat(a, model_id, "charlie")
            never = threading.Event()  # the summarizer holds its answer until the worker is gone
            fake_provider.script(Reply("Sure."), Reply(SUMMARY, hold=never))
            await _turn(a, chat_c)
            await _until(lambda: _true(len(_summarizer_calls(fake_provider, "charlie")) == 1))
            worker.kill()
            fake_provider.script(Reply(SUMMARY))
            successor.start()
            logs_c = await _until(lambda: _ended(b, chat_c))
            assert sorted((e["status"], e["error_code"]) for e in logs_c) == [
                ("completed", None),
                ("failed", "COMPACTION_INTERRUPTED"),
            ]
            assert len(_summarizer_calls(fake_provider, "charlie")) == 2  # the killed pass and the one that ended
            folded = [m for m in await _messages(a, chat_c) if m["summarized_by"] is not None]
            assert len({m["summarized_by"] for m in folded}) == 1 and len(folded) == logs_c[0]["message_count"]

            left = _of_chat(await _jobs(a, "queued", "running", "failed"), chat_c)
            assert left == [], f"{left}\n{successor.text()}"
            (job,) = _of_chat(await _jobs(a, "completed"), chat_c)
            interrupted, *busy = job["errors"]
            assert (interrupted["attempt"], interrupted["status"], interrupted["error_code"]) == (
                1,
                "interrupted",
                "JOB_INTERRUPTED",
            )
            # The rescued attempt may find the dead worker's chat lease not yet freed: it then waits its backoff.
            assert all(e["error_code"] == "JOB_CHAT_BUSY" for e in busy), f"{job}\n{successor.text()}"
            assert job["attempts"] == 2 + len(busy)
            ok_lines = [
                line
                for line in successor.events("job_ok")
                if line["task"] == "compaction.pass" and line["job_id"] == job["id"]
            ]
            assert len(ok_lines) == 1
            assert worker.events("job_started")[-1]["job_id"] == job["id"]  # the killed worker had started it
    finally:
        for process in (successor, worker, second, first):
            process.stop()


async def test_sigterm_lets_a_worker_finish_its_pass_and_then_it_stops(
    postgres_url: str, tmp_path: Path, fake_provider: FakeProvider
) -> None:
    api, worker = _api(postgres_url, tmp_path, "api"), _worker(postgres_url, tmp_path, "worker")
    try:
        api.start()
        worker.start()
        async with api.client() as http:
            chat_id = await _chat(http, await _model(http, fake_provider), "delta")
            release = threading.Event()
            fake_provider.script(Reply("Sure."), Reply(SUMMARY, hold=release))
            await _turn(http, chat_id)
            await _until(lambda: _true(len(_summarizer_calls(fake_provider, "delta")) == 1))
            assert worker.process is not None
            os.kill(worker.process.pid, signal.SIGTERM)
            await _until(lambda: _true(bool(worker.events("worker_stopping"))))
            assert worker.process.poll() is None  # still running: its pass holds it
            release.set()
            for _ in range(POLLS_PER_MINUTE):
                if worker.process.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            assert worker.process.returncode == 0
            worker.process = None
            events = [line["event"] for line in worker.lines() if line.get("event")]
            assert events[events.index("worker_stopping") :] == ["worker_stopping", "job_ok", "worker_stopped"]
            logs = await _logs(http, chat_id)
            assert [(e["trigger"], e["status"]) for e in logs] == [("background", "completed")]
            assert _of_chat(await _jobs(http, "queued", "running", "failed"), chat_id) == []
            assert [j["attempts"] for j in _of_chat(await _jobs(http, "completed"), chat_id)] == [1]
    finally:
        worker.stop()
        api.stop()
