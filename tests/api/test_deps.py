"""Wiring without mutation (issue 24): what ``create_app`` builds reaches the routes only through the dependencies
of ``api/deps.py``, and the one HTTP connection pool is a collaborator each service was given, opened and closed
by the app's lifespan, never written into another object's options."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx

from contextshift.api.app import create_app
from contextshift.service.calls import SharedClient
from contextshift.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS

PACKAGE = Path(__file__).resolve().parents[2] / "contextshift"


def _state_reads(source: str) -> list[int]:
    """The lines of ``source`` that use ``<something>.app.state`` or ``app.state``."""
    tree = ast.parse(source)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.value, ast.Name | ast.Attribute)
        and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr) == "app"
    ]


def test_only_the_dependencies_and_the_app_factory_touch_app_state() -> None:
    users = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _state_reads(p.read_text("utf-8"))}
    assert users == {"api/app.py", "api/deps.py"}


def test_the_state_check_sees_both_spellings() -> None:
    assert _state_reads("a = request.app.state.db\nb = app.state.jobs\nc = state.app\n") == [1, 2]


async def test_the_services_share_one_pool_opened_and_closed_by_the_app(tmp_path: Path) -> None:
    app = create_app(
        f"sqlite:///{tmp_path / 'pool.db'}", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, settings=Settings()
    )
    generations, compactor, proxy = app.state.generations, app.state.compactor, app.state.proxy
    shared = generations.calls.shared
    assert isinstance(shared, SharedClient)
    assert compactor.calls.shared is shared and proxy.calls.shared is shared
    assert generations.server_counting.shared is shared and proxy.server_counting is generations.server_counting
    assert shared.client is None and "http_client" not in generations.client_options
    async with app.router.lifespan_context(app):
        pool = shared.client
        assert isinstance(pool, httpx.AsyncClient) and not pool.is_closed
        for service in (generations, compactor, proxy):
            assert service.client_options["http_client"] is pool
            assert "http_client" not in service.calls.options  # asked for at call time, never stored
        assert generations.counting is generations.server_counting  # reading it changes nothing
    assert pool.is_closed and shared.client is None
    assert "http_client" not in generations.client_options


async def test_a_pool_the_caller_gives_is_used_and_left_open(tmp_path: Path) -> None:
    async with httpx.AsyncClient() as own:
        app = create_app(
            f"sqlite:///{tmp_path / 'own.db'}",
            client_options={**CLIENT_OPTIONS, "http_client": own},
            admin_token=ADMIN_TOKEN,
            settings=Settings(),
        )
        async with app.router.lifespan_context(app):
            assert app.state.compactor.client_options["http_client"] is own
        assert not own.is_closed


async def test_the_compactor_queues_through_the_runner_it_was_built_with(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'queue.db'}", admin_token=ADMIN_TOKEN, run_jobs=False, settings=Settings())
    compactor, runner = app.state.compactor, app.state.jobs
    async with app.router.lifespan_context(app):
        assert compactor.queue is not None  # given by constructor, not set by the runner's start
        assert await compactor.queue("chat-1") is True
        assert await compactor.queue("chat-1") is False  # one pass of the chat waits already
        queued, more = await runner.listing(["queued"], limit=10)
    assert [(view.task, view.args) for view in queued] == [("compaction.pass", {"chat_id": "chat-1"})]
    assert more is False and compactor.queue is not None  # and not unset by the runner's stop
