"""A pool the caller hands ``Generations`` (the ``http_client`` option) serves every call of the service, the
server probes included: without it each turn's context probe built a new client and its SSL context."""

from __future__ import annotations

from pathlib import Path

import httpx

from contextshift.service.generation import Generations
from contextshift.storage import Database


async def test_a_given_http_client_serves_the_server_probes_and_is_not_closed_by_the_service(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}")
    async with httpx.AsyncClient() as pool:
        generations = Generations(db, http_client=pool)
        async with generations.server_counting.http() as client:
            assert client is pool
        assert generations.calls.current_options()["http_client"] is pool
        assert not pool.is_closed


async def test_without_a_given_pool_a_probe_gets_a_client_of_its_own_each_time(tmp_path: Path) -> None:
    generations = Generations(Database(f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}"))
    async with generations.server_counting.http() as first, generations.server_counting.http() as second:
        assert first is not second
