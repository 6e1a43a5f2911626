"""Alembic environment. The service passes an open connection in ``config.attributes["connection"]``
(see ``contextshift.storage.migrate``); the ``alembic`` command line gets one from the configured URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from contextshift.storage.migrate import connect_for_migrations
from contextshift.storage.repositories.search import is_search_object
from contextshift.storage.tables import Base
from contextshift.storage.urls import default_database_url

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=lambda name, _type, _parent: not is_search_object(name),  # migration 0007's index
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_from_url(url: str) -> None:
    async with connect_for_migrations(url) as connection:
        await connection.run_sync(run_on)


def main() -> None:
    if context.is_offline_mode():
        raise RuntimeError("offline (--sql) migrations are not supported")
    connection = config.attributes.get("connection")
    if connection is None:
        asyncio.run(run_from_url(config.get_main_option("sqlalchemy.url") or default_database_url()))
    else:
        run_on(connection)


main()
