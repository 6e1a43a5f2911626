"""Fixtures of the ``realllm`` tests: a real llama-cpp-python server for the session, and the service on
SQLite pointed at it the way a user would set it up (see ``tests/realllm/server.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.providers import RetryPolicy, Timeouts
from contextshift.storage import Database
from tests.api.conftest import ADMIN_TOKEN, Server, bearer

from .server import N_CTX, LlamaServer, Unavailable
from .server import llama_server as start_llama_server

__all__ = ["N_CTX", "LlamaServer", "LocalService", "llama_server", "local_service"]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    try:
        with start_llama_server(tmp_path_factory.mktemp("llama")) as server:
            yield server
    except Unavailable as why:
        pytest.skip(str(why))


@dataclass
class LocalService:
    http: httpx.AsyncClient
    llama: LlamaServer

    async def post(self, path: str, body: object, expect: int = 201) -> dict[str, Any]:
        response = await self.http.post(path, json=body)
        assert response.status_code == expect, response.text
        return response.json()  # type: ignore[no-any-return]

    async def setup_chat(self, **bot: Any) -> dict[str, str]:
        """The server as an OpenAI-compatible provider, SmolLM2 with its 2,048-token window, a bot and a chat."""
        provider = (
            await self.post("/api/v2/providers", {"name": "llama", "kind": "openai", "base_url": self.llama.base_url})
        )["provider"]
        model = (
            await self.post(
                "/api/v2/models",
                {"provider_id": provider["id"], "name": "smollm2-135m", "type": "chat", "context_window": N_CTX},
            )
        )["model"]
        created = await self.post("/api/v2/bots", {"name": "local", "chat_model_id": model["id"], **bot})
        chat = (await self.post("/api/v2/chats", {"bot_id": created["bot"]["id"]}))["chat"]
        return {"provider": provider["id"], "model": model["id"], "bot": created["bot"]["id"], "chat": chat["id"]}


@pytest.fixture
async def local_service(llama_server: LlamaServer, tmp_path: Path) -> AsyncIterator[LocalService]:
    """The service on SQLite with no client override: a user's setup, pointed at the real server."""
    options = {"timeouts": Timeouts(connect=5.0, read=600.0), "retry": RetryPolicy(retries=1, backoff_base=0.1)}
    database = Database(f"sqlite:///{tmp_path / 'service.db'}")
    app = create_app(database=database, client_options=options, admin_token=ADMIN_TOKEN)
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=900, headers=bearer(ADMIN_TOKEN)) as http:
            yield LocalService(http, llama_server)
