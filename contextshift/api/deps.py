"""Shared request dependencies: one database session (one transaction) per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request

from ..service.generation import Generations
from ..storage import Database, Repositories


def database(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def generations(request: Request) -> Generations:
    service: Generations = request.app.state.generations
    return service


async def repositories(request: Request, db: Annotated[Database, Depends(database)]) -> AsyncIterator[Repositories]:
    # A GET only reads: on SQLite it does not queue for the write lock (N5).
    async with db.session(write=request.method not in ("GET", "HEAD")) as session:
        yield Repositories(session)


#: Commits (or rolls back) when the route function returns, before the response is sent.
Repos = Annotated[Repositories, Depends(repositories, scope="function")]
GenerationService = Annotated[Generations, Depends(generations)]
