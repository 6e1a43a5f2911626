"""V8 through the API, on SQLite and PostgreSQL: ``GET /api/v2/jobs`` (admins only) and ``GET /healthz``.

The service here only queues (``run_jobs=False``, as ``serve --no-jobs``), so what a turn queued stays queued
for the test to read; running, retrying and failing jobs are ``tests/jobs``' and ``tests/crash/test_workers.py``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, TEST_LOGIN_LIMIT, Server, Service, bearer
from tests.databases import Backend
from tests.fakes import FakeProvider, Reply


@pytest.fixture
async def queueing(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Service]:
    """A service that only queues background jobs (``serve --no-jobs``)."""
    app = create_app(
        database=backend.database(),
        client_options=CLIENT_OPTIONS,
        admin_token=ADMIN_TOKEN,
        login_limit=TEST_LOGIN_LIMIT,
        run_jobs=False,
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake_provider, backend)


async def _half_full_turn(service: Service) -> str:
    """A chat past half its window after a turn: the turn queues a background pass."""
    ids = await service.setup_chat(context_window=4000, response_reserve=200)
    for n in range(20):
        body = {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": f"turn {n}: " + " ".join(f"word{n}x{i}" for i in range(30)),
        }
        await service.post(f"/api/v2/chats/{ids['chat']}/messages", body)
    service.fake.script(Reply("Sure."))
    await service.post(f"/api/v2/chats/{ids['chat']}/generate", {"content": "go on", "stream": False}, 200)
    return ids["chat"]


async def _listed(service: Service, **params: Any) -> dict[str, Any]:
    for _ in range(400):  # the after-turn check queues the pass once the reply is out
        response = await service.http.get("/api/v2/jobs", params=params)
        assert response.status_code == 200, response.text
        if response.json()["jobs"]:
            return response.json()  # type: ignore[no-any-return]
        await service.http.get("/healthz")  # a request's worth of waiting, not the clock
    raise AssertionError("no job was listed")


async def test_admins_see_the_queued_compaction_pass_a_turn_left(queueing: Service) -> None:
    chat_id = await _half_full_turn(queueing)
    listed = await _listed(queueing)
    runner = "procrastinate" if queueing.backend.name == "postgresql" else "local"
    assert (listed["runner"], listed["has_more"]) == (runner, False)
    (job,) = listed["jobs"]
    assert {k: job[k] for k in ("task", "status", "attempts", "lock", "args", "errors")} == {
        "task": "compaction.pass",
        "status": "queued",
        "attempts": 0,
        "lock": f"chat:{chat_id}",
        "args": {"chat_id": chat_id},
        "errors": [],
    }
    assert (await queueing.http.get("/api/v2/jobs", params={"status": "completed"})).json()["jobs"] == []
    logs = (await queueing.http.get(f"/api/v2/chats/{chat_id}/compaction/logs")).json()["logs"]
    assert logs == []  # nothing here runs it


async def test_only_admins_list_jobs_and_a_bad_filter_is_refused(queueing: Service) -> None:
    _user_id, token = await queueing.create_user("bob", "user")
    async with queueing.client(token) as bob:
        refused = await bob.get("/api/v2/jobs")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FORBIDDEN")
    for params in ({"status": "done"}, {"limit": 0}, {"limit": 201}, {"offset": -1}):
        response = await queueing.http.get("/api/v2/jobs", params=params)
        assert (response.status_code, response.json()["error"]["code"]) == (422, "VALIDATION"), params


async def test_health_reports_the_database_the_runner_and_the_instances_that_run_jobs(
    queueing: Service, service: Service
) -> None:
    runner = "procrastinate" if service.backend.name == "postgresql" else "local"
    only_queues = (await queueing.http.get("/healthz")).json()
    assert {k: only_queues[k] for k in ("status", "database_status", "role", "jobs")} == {
        "status": "ok",
        "database_status": "ok",
        "role": "api",
        "jobs": runner,
    }
    runs_jobs = (await service.http.get("/healthz")).json()
    assert (runs_jobs["role"], runs_jobs["jobs"]) == ("api+jobs", runner)
    assert [(w["instance_id"], w["role"]) for w in runs_jobs["workers"]] == [(runs_jobs["instance_id"], "api+jobs")]
