"""The one way routes (and the app's own middleware) reach what ``create_app`` wired: FastAPI dependencies.

``create_app`` puts each collaborator on ``app.state`` once, at construction; nothing else reads ``app.state``
(``tests/api/test_deps.py`` checks it), so a route names what it needs in its signature (``service:
GenerationService``) and a test can override any of them (``app.dependency_overrides``). A request also gets one
database session (one transaction) through :data:`Repos`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request

from ..jobs import JobRunner
from ..service.compaction import Compactor
from ..service.generation import Generations
from ..service.proxy import ProxyService
from ..service.rules import Rules
from ..settings import Settings
from ..storage import Database, Repositories
from .login_limits import LoginLimiter


def database(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def generations(request: Request) -> Generations:
    service: Generations = request.app.state.generations
    return service


def compactor(request: Request) -> Compactor:
    service: Compactor = request.app.state.compactor
    return service


def proxy(request: Request) -> ProxyService:
    service: ProxyService = request.app.state.proxy
    return service


def jobs(request: Request) -> JobRunner:
    runner: JobRunner = request.app.state.jobs
    return runner


def settings(request: Request) -> Settings:
    found: Settings = request.app.state.settings
    return found


def rules(request: Request) -> Rules:
    """What the settings decide for every turn, call and pass (provider hosts, estimate margin, embedder)."""
    found: Rules = request.app.state.rules
    return found


def login_limiter(request: Request) -> LoginLimiter | None:
    """The failed sign-in counter (None in an app built without one)."""
    limiter: LoginLimiter | None = getattr(request.app.state, "login_limiter", None)
    return limiter


def session_length(request: Request) -> timedelta:
    """How long a browser session lasts (``CONTEXTSHIFT_SESSION_DAYS``, through the app's settings)."""
    lifetime: timedelta = request.app.state.session_lifetime
    return lifetime


async def repositories(request: Request, db: Annotated[Database, Depends(database)]) -> AsyncIterator[Repositories]:
    # A GET only reads: on SQLite it does not queue for the write lock (N5).
    async with db.session(write=request.method not in ("GET", "HEAD")) as session:
        yield Repositories(session)


#: Commits (or rolls back) when the route function returns, before the response is sent.
Repos = Annotated[Repositories, Depends(repositories, scope="function")]
Db = Annotated[Database, Depends(database)]
GenerationService = Annotated[Generations, Depends(generations)]
CompactionService = Annotated[Compactor, Depends(compactor)]
ProxyEndpoint = Annotated[ProxyService, Depends(proxy)]
Jobs = Annotated[JobRunner, Depends(jobs)]
SessionLength = Annotated[timedelta, Depends(session_length)]
ServiceRules = Annotated[Rules, Depends(rules)]
