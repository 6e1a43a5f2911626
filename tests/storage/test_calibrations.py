"""T5: a model's token calibration is stored, shared by instances and survives a restart (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio

import pytest

from contextshift.core.calibration import Calibration, observe
from contextshift.storage import Database, Repositories
from tests.databases import Backend
from tests.storage.seed import seed_chat


async def test_observations_fold_into_one_stored_factor_per_model_and_profile(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.calibrations.get(seeded.model_id, "approximate") == Calibration()
        await repos.calibrations.observe(seeded.model_id, "approximate", 1000, 1540)
        second = await repos.calibrations.observe(seeded.model_id, "approximate", 2000, 3000)
        await repos.calibrations.observe(seeded.model_id, "o200k_base", 1000, 1000)
    assert second == observe(observe(Calibration(), 1000, 1540), 2000, 3000)
    async with db.session() as session:
        repos = Repositories(session)
        assert await repos.calibrations.get(seeded.model_id, "approximate") == second
        every = await repos.calibrations.get_many([seeded.model_id])
        assert set(every) == {(seeded.model_id, "approximate"), (seeded.model_id, "o200k_base")}


async def test_a_second_instance_sees_the_factor_after_a_restart(backend: Backend) -> None:
    first = backend.database()
    await first.start()
    seeded = await seed_chat(first)
    async with first.session() as session:
        await Repositories(session).calibrations.observe(seeded.model_id, "approximate", 1000, 1540)
    await first.close()
    second = backend.database()
    await second.start()
    try:
        async with second.session() as session:
            assert await Repositories(session).calibrations.get(seeded.model_id, "approximate") == Calibration(
                1.54, 1, 0.0
            )
    finally:
        await second.close()


async def test_concurrent_observations_from_two_instances_all_count(backend: Backend) -> None:
    if backend.name == "sqlite":
        pytest.skip("SQLite serializes writers; PostgreSQL row locks are what this checks")
    one, two = backend.database(), backend.database()
    await one.start()
    await two.start()
    try:
        seeded = await seed_chat(one)

        async def record(db: Database) -> None:
            for _ in range(5):
                async with db.session() as session:
                    await Repositories(session).calibrations.observe(seeded.model_id, "approximate", 1000, 1500)

        await asyncio.gather(record(one), record(two))
        async with one.session() as session:
            assert (await Repositories(session).calibrations.get(seeded.model_id, "approximate")).calls == 10
    finally:
        await one.close()
        await two.close()


async def test_deleting_the_model_deletes_its_calibration(db: Database) -> None:
    seeded = await seed_chat(db)
    async with db.session() as session:
        await Repositories(session).calibrations.observe(seeded.model_id, "approximate", 1000, 1540)
    async with db.session() as session:
        assert await Repositories(session).models.delete(seeded.model_id)
    async with db.session() as session:
        assert await Repositories(session).calibrations.get_many([seeded.model_id]) == {}
