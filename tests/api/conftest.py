"""The service over a real socket: uvicorn serving ``create_app`` on a loopback port, on SQLite and PostgreSQL,
with the fake provider standing in for the remote LLM.

Authentication is always on (N2): ``service.http`` is signed in as the bootstrapped admin (``ADMIN_TOKEN``);
``other_user`` is a second, ordinary user with a client of their own; ``service.client(token)`` opens another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from contextshift.api.app import create_app
from contextshift.providers import RetryPolicy, Timeouts
from contextshift.settings import Settings
from tests.databases import Backend, backend, pg_database
from tests.fakes.fixtures import fake_provider, fake_provider_server
from tests.fakes.server import FakeProvider

__all__ = ["backend", "fake_provider", "fake_provider_server", "other_user", "pg_database"]

#: The admin token every test service starts with (``create_app(admin_token=...)``).
ADMIN_TOKEN = "cs_test-admin-token-0123456789abcdef"


#: The tests send many wrong tokens on purpose: the login rate limit has its own tests (test_login_limits.py).
TEST_LOGIN_LIMIT = "100000/minute"


def bearer(token: str) -> dict[str, str]:
    """The headers that sign a request in with ``token``."""
    return {"Authorization": f"Bearer {token}"}


CLIENT_OPTIONS: dict[str, Any] = {
    "timeouts": Timeouts(connect=2.0, read=3.0),
    "retry": RetryPolicy(retries=1, backoff_base=0.01, backoff_max=0.02, retry_after_cap=0.1),
}


class Server:
    """uvicorn in a daemon thread; ``url`` once it listens."""

    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the service did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@dataclass
class Account:
    """A signed-in user of the service under test: their id, name, token and an HTTP client using it."""

    id: str
    name: str
    token: str
    http: httpx.AsyncClient


@dataclass
class Service:
    url: str
    http: httpx.AsyncClient
    fake: FakeProvider
    backend: Backend
    token: str = ADMIN_TOKEN

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        """A new client on the service, signed in with ``token`` (none: not signed in); the caller closes it."""
        headers = bearer(token) if token is not None else {}
        return httpx.AsyncClient(base_url=self.url, timeout=20, headers=headers)

    async def create_user(self, name: str = "bob", role: str = "user") -> tuple[str, str]:
        """A new user made by the admin: (user id, their token)."""
        created = await self.post("/api/v2/users", {"name": name, "role": role})
        return created["user"]["id"], created["token"]

    async def post(self, path: str, body: Any, expect: int = 201) -> dict[str, Any]:
        response = await self.http.post(path, json=body)
        assert response.status_code == expect, response.text
        return response.json()  # type: ignore[no-any-return]

    async def setup_chat(
        self, *, kind: str = "openai", context_window: int | None = 8000, model: str = "gpt-4o", **bot: Any
    ) -> dict[str, str]:
        """A provider on the fake, a chat model, a bot and a chat; their ids."""
        provider = (
            await self.post(
                "/api/v2/providers",
                {
                    "name": "fake",
                    "kind": kind,
                    "base_url": self.fake.base_url,
                    "api_key": "sk-test-KEY-789",
                },
            )
        )["provider"]
        model_row = (
            await self.post(
                "/api/v2/models",
                {
                    "provider_id": provider["id"],
                    "name": model,
                    "type": "chat",
                    "context_window": context_window,
                },
            )
        )["model"]
        bot_row = (await self.post("/api/v2/bots", {"name": "helper", "chat_model_id": model_row["id"], **bot}))["bot"]
        chat = (await self.post("/api/v2/chats", {"bot_id": bot_row["id"]}))["chat"]
        return {"provider": provider["id"], "model": model_row["id"], "bot": bot_row["id"], "chat": chat["id"]}


@pytest.fixture
def fake(fake_provider: FakeProvider) -> Iterator[FakeProvider]:
    yield fake_provider


@asynccontextmanager
async def serving(backend: Backend, fake: FakeProvider, settings: Settings | None = None) -> AsyncIterator[Service]:
    """A service on ``backend``'s database with ``settings`` (default: none set), as the ``service`` fixture;
    another instance on the same database when one runs already (e.g. to see a setting changed at a restart)."""
    app = create_app(
        database=backend.database(),
        client_options=CLIENT_OPTIONS,
        admin_token=ADMIN_TOKEN,
        login_limit=TEST_LOGIN_LIMIT,
        settings=settings if settings is not None else Settings(),
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, fake, backend)


@pytest.fixture
async def service(backend: Backend, fake_provider: FakeProvider) -> AsyncIterator[Service]:
    async with serving(backend, fake_provider) as running:
        yield running


@pytest.fixture
async def other_user(service: Service) -> AsyncIterator[Account]:
    """A second, ordinary user (role ``user``) of the same service, signed in on their own client."""
    user_id, token = await service.create_user("bob", "user")
    async with service.client(token) as http:
        yield Account(user_id, "bob", token, http)
