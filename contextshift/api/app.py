"""The FastAPI application: ``create_app()`` wires storage, the pipeline and providers under ``/api/v2``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Depends, FastAPI

from .. import __version__
from ..jobs import JobRunner, make_runner
from ..providers import make_client
from ..service.accounts import Bootstrap, bootstrap, configured_admin_token
from ..service.calls import SharedClient
from ..service.compaction import Compactor
from ..service.generation import ClientFactory, Generations
from ..service.proxy import ProxyService
from ..service.rules import Rules
from ..settings import Settings
from ..storage import Database
from ..storage.configured import configured_database
from ..storage.secret_key import current_key, derived_secret
from ..web import mount_web
from . import browser
from .auth import AuthMiddleware, caller, session_lifetime
from .browser import CsrfGuard, TokenLogin, csrf_options
from .compat_errors import CompatErrors
from .created import link_created
from .errors import install_error_handlers
from .guard import RequestGuard
from .health import install_health
from .limits import DEFAULT_MAX_BODY_BYTES, BodyChecks, RequestLimits
from .login_limits import DEFAULT_LIMIT, DEFAULT_STORAGE, LoginLimiter
from .refusals import add_refusals
from .routes import (
    anthropic_compat,
    bots,
    catalog,
    chats,
    compaction,
    examples,
    generation,
    jobs,
    openai_compat,
    proxy_audits,
    transfer,
    users,
)

API_PREFIX = "/api/v2"
#: The API's dependencies: every route under ``/api/v2`` has a signed-in caller (N2).
API_DEPENDENCIES = [Depends(caller)]
#: The routers under API_PREFIX.
API_MODULES = (catalog, bots, transfer, chats, generation, compaction, users, proxy_audits, examples, jobs)
#: Operations that never answer 503 DATABASE_BUSY: /healthz reads without the write lock and answers its own 503
#: (its Health body, ``database_status: unavailable``) when the database does not answer.
DATABASE_FREE = frozenset({"/healthz"})

log = logging.getLogger("contextshift.api")


def create_app(
    database_url: str | None = None,
    *,
    database: Database | None = None,
    client_factory: ClientFactory = make_client,
    client_options: dict[str, Any] | None = None,
    admin_token: str | None = None,
    on_started: Callable[[Bootstrap], None] | None = None,
    max_body_bytes: int | None = None,
    proxy_audit_ttl: timedelta | None = None,
    allowed_hosts: Sequence[str] | None = None,
    bound_host: str | None = None,
    secret_key: bytes | None = None,
    login_limit: str | None = None,
    run_jobs: bool = True,
    settings: Settings | None = None,
) -> FastAPI:
    """The service. ``database_url`` defaults to ``CONTEXTSHIFT_DATABASE_URL`` or the data directory's SQLite
    file; a ready ``database`` (not yet started) may be given instead. ``client_options`` go to ``client_factory``
    (an ``http_client`` there replaces the pool the app opens for every provider call).

    ``admin_token`` (default ``CONTEXTSHIFT_ADMIN_TOKEN``) is the first admin's token; without one a random
    token is made on the first start. ``on_started`` gets what start-up did (e.g. to print the login URL once).
    ``max_body_bytes``: the largest request body (default ``CONTEXTSHIFT_MAX_BODY_BYTES``, else 8 MiB).
    ``proxy_audit_ttl`` is how long the OpenAI-compatible endpoint's audits are kept (default
    ``CONTEXTSHIFT_PROXY_AUDIT_HOURS``, else 24 hours).
    The database made from ``database_url`` is instance ``CONTEXTSHIFT_INSTANCE_ID`` when set (N5).
    The ``Host`` header must be a loopback name, ``bound_host`` or one of ``allowed_hosts`` (default
    ``CONTEXTSHIFT_ALLOWED_HOSTS``). ``secret_key`` (default ``CONTEXTSHIFT_SECRET_KEY`` or the data directory's
    key file) signs the browser's CSRF cookie. ``CONTEXTSHIFT_EMBEDDINGS=minilm`` gives ``recall`` and
    ``vector-recall`` relevance by meaning (the ``embeddings`` extra; without it the app is not made:
    :class:`~contextshift.embeddings.EmbeddingsNotInstalled`). ``login_limit`` is how many failed sign-ins a
    client may make (a ``limits`` string, e.g. ``"20/minute"``) before its attempts are refused for a while.
    ``run_jobs``: run background jobs in this process (V8; ``serve --no-jobs`` passes False: this instance only
    queues them, for ``contextshift worker`` processes to run). ``settings``: the ``CONTEXTSHIFT_*`` settings
    (default: read from the environment once, here); an explicit argument above wins over its setting.
    """
    settings = settings if settings is not None else Settings.from_env()
    # CONTEXTSHIFT_EMBEDDINGS names a model the extra is missing for (EMBEDDINGS_NOT_INSTALLED) or no model
    # at all (UNKNOWN_EMBEDDINGS): refuse to start rather than recall without it unnoticed; else load it now.
    rules = Rules.from_settings(settings)
    token = configured_admin_token(admin_token if admin_token is not None else settings.admin_token)
    key = secret_key if secret_key is not None else current_key(settings.secret_key, settings.data_dir)
    db = database if database is not None else configured_database(settings, database_url)
    hours = settings.proxy_audit_hours
    ttl = proxy_audit_ttl if proxy_audit_ttl is not None else timedelta(hours=hours) if hours is not None else None
    options = client_options or {}
    services = _Services.build(
        db, settings, rules, factory=client_factory, options=options, audit_ttl=ttl, jobs=run_jobs
    )
    app = FastAPI(
        title="contextshift",
        version=__version__,
        description="Keeps long LLM conversations inside a model's context window without losing what matters.",
        lifespan=_lifespan(services, token, on_started, run_jobs=run_jobs),
    )
    limiter = LoginLimiter(
        login_limit or settings.login_limit or DEFAULT_LIMIT, settings.login_limit_storage or DEFAULT_STORAGE
    )
    _set_state(app, services, settings, rules, limiter)
    install_error_handlers(app)
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(settings.allowed_hosts)
    limit = max_body_bytes if max_body_bytes is not None else settings.max_body_bytes or DEFAULT_MAX_BODY_BYTES
    _add_middleware(
        app,
        csrf_secret=derived_secret(key, "csrf"),
        max_body_bytes=limit,
        release_memory=settings.release_memory,
        hosts=hosts,
        bound_host=bound_host,
    )
    browser.quiet_tokens_in_access_log()
    routers = _include_routers(app)
    install_health(app, db, services.runner)  # open to all, yet behind the Host check (400) and the body limit
    _document_refusals(app, routers)
    mount_web(app)
    return app


@dataclass(frozen=True, slots=True)
class _Services:
    """The services the routes reach (through api/deps.py), on one database, one provider client factory and
    one shared HTTP connection pool, each given its collaborators by constructor."""

    db: Database
    compactor: Compactor
    runner: JobRunner
    proxy: ProxyService
    generations: Generations
    #: The HTTP connection pool of every provider call: opened when the app starts, closed when it stops.
    shared: SharedClient

    @classmethod
    def build(
        cls,
        db: Database,
        settings: Settings,
        rules: Rules,
        *,
        factory: ClientFactory,
        options: Mapping[str, Any],
        audit_ttl: timedelta | None,
        jobs: bool,
    ) -> _Services:
        options = dict(options)
        shared = SharedClient(options.pop("http_client", None))  # a caller's own pool is used, not closed
        wait = settings.compaction_wait_seconds

        async def queue_pass(chat_id: str) -> bool:  # the runner made below: a pass needs the compactor it queues
            return await runner.queue_compaction(chat_id)

        compactor = Compactor(
            db,
            client_factory=factory,
            client_options=options,
            shared_client=shared,
            rules=rules,
            sync_wait=wait,
            queue=queue_pass,
        )
        runner = make_runner(db, compactor, run_jobs=jobs)
        generations = Generations(
            db, client_factory=factory, compactor=compactor, shared_client=shared, rules=rules, **options
        )
        # one cache of what local servers say of their context, for chat turns and /v1 calls alike
        proxy = ProxyService(
            db,
            client_factory=factory,
            client_options=options,
            audit_ttl=audit_ttl,
            server_counting=generations.server_counting,
            shared_client=shared,
            rules=rules,
        )
        return cls(db, compactor, runner, proxy, generations, shared)


def _set_state(app: FastAPI, services: _Services, settings: Settings, rules: Rules, limiter: LoginLimiter) -> None:
    """What the routes and middleware reach, set once here and read only through the dependencies of
    api/deps.py."""
    app.state.db = services.db
    app.state.settings = settings
    app.state.compactor = services.compactor
    app.state.jobs = services.runner
    app.state.generations = services.generations
    app.state.proxy = services.proxy
    app.state.rules = rules
    app.state.session_lifetime = session_lifetime(settings.session_days)
    app.state.login_limiter = limiter


def _lifespan(
    services: _Services, token: str | None, on_started: Callable[[Bootstrap], None] | None, *, run_jobs: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up (the database, the first admin, one shared HTTP client, the job runner) and the clean stop."""
    db = services.db

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db.heartbeat.role = "api+jobs" if run_jobs else "api"
        await db.start()
        started = await bootstrap(db, token)
        if started.admin_id is None:
            log.warning("no enabled admin is left: `contextshift token create --user NAME` signs someone in")
        if on_started is not None:
            on_started(started)
        services.shared.open()  # one HTTP connection pool for every provider call: no TLS set-up per turn
        await services.runner.start()  # with run_jobs, picks up the background work a restart left queued
        try:
            yield
        finally:
            await services.generations.settle()  # after-turn checks may still queue a pass
            await services.proxy.settle()  # the endpoint's calls whose end is still being written
            await services.runner.stop()
            await services.shared.aclose()
            await db.close()

    return lifespan


def _add_middleware(
    app: FastAPI,
    *,
    csrf_secret: str,
    max_body_bytes: int,
    release_memory: bool,
    hosts: list[str],
    bound_host: str | None,
) -> None:
    """Outermost last: /v1's error shapes, Host/Origin/body type and the security headers, the body limit, the
    token login (/?token=), the CSRF check of cookie-authenticated changes, who is calling, then the shape and
    text of a signed-in caller's JSON body."""
    app.add_middleware(BodyChecks)  # N6, on the bodies of signed-in callers only
    app.add_middleware(AuthMiddleware)
    app.add_middleware(CsrfGuard, **csrf_options(csrf_secret))
    app.add_middleware(TokenLogin)
    # nothing behind it runs for an oversized body
    app.add_middleware(RequestLimits, max_body_bytes=max_body_bytes, release_memory=release_memory)
    app.add_middleware(RequestGuard, extra_hosts=hosts, bound_host=bound_host)
    app.add_middleware(CompatErrors)  # /v1's refusals, wherever decided, in the shape its SDKs read


def _include_routers(app: FastAPI) -> list[tuple[str, APIRouter]]:
    """Include every router (those under ``/api/v2`` behind a signed-in caller); the routers with their prefix."""
    routers = [(API_PREFIX, module.router) for module in API_MODULES]
    routers += [("", openai_compat.router), ("", anthropic_compat.router), ("", browser.router)]
    api = APIRouter(dependencies=API_DEPENDENCIES)
    for module in API_MODULES:
        api.include_router(module.router)
    app.include_router(api, prefix=API_PREFIX)
    app.include_router(openai_compat.router, dependencies=API_DEPENDENCIES)
    app.include_router(anthropic_compat.router, dependencies=API_DEPENDENCIES)
    app.include_router(browser.router)
    return routers


def _document_refusals(app: FastAPI, routers: list[tuple[str, APIRouter]]) -> None:
    """What every operation can answer before its route runs is added to the OpenAPI document by
    ``add_refusals``, which reads the routes of ``routers`` (under their prefix) and the app's own (/healthz)."""
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            routes = [(prefix, route) for prefix, router in routers for route in router.routes]
            routes += [("", route) for route in app.router.routes]  # /healthz
            document = add_refusals(plain_openapi(), routes, database_free=DATABASE_FREE)
            app.openapi_schema = link_created(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
