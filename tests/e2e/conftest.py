"""End-to-end tests of the web UI (V5, N3): Playwright for Python driving Debian's Chromium against the real
service (uvicorn on a loopback port, a fresh SQLite file per test) and the tests' fake LLM provider.

Where the wheel has been installed (``.ci/run`` sets ``CONTEXTSHIFT_TEST_INSTALLED_BIN``), the service is the
installed one, started by ``installed_server.py`` with that environment's interpreter outside the checkout (issue
11: the browser tests run against the server installed from the wheel). Otherwise it runs in-process from the
checkout. ``CONTEXTSHIFT_E2E_SERVER=checkout`` or ``=installed`` chooses explicitly.

Needs ``apt-get install -y chromium`` (``/usr/bin/chromium``); without it every test here is skipped.
Screenshots of the main screens are written to ``docs/screenshots/``.
"""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, bearer
from tests.fakes import FakeProvider

CHROMIUM = Path(os.environ.get("CONTEXTSHIFT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Where the screenshots of the main screens go; ``CONTEXTSHIFT_SCREENSHOTS`` may name another folder, or be
#: ``off`` to take none.
SCREENSHOTS_SETTING = os.environ.get("CONTEXTSHIFT_SCREENSHOTS", "")
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCREENSHOTS = ROOT / "docs" / "screenshots"
SCREENSHOTS = Path(SCREENSHOTS_SETTING) if SCREENSHOTS_SETTING not in ("", "off") else DEFAULT_SCREENSHOTS
INSTALLED_BIN = os.environ.get("CONTEXTSHIFT_TEST_INSTALLED_BIN", "")
E2E_SERVER = os.environ.get("CONTEXTSHIFT_E2E_SERVER", "installed" if INSTALLED_BIN else "checkout")
#: How long the installed service may take to start (import, migrations) before the fixture gives up.
INSTALLED_START_SECONDS = 120
LAPTOP = {"width": 1366, "height": 860}
PHONE = {"width": 390, "height": 844}


@dataclass
class App:
    """The service under test: its URL, an HTTP client on it signed in as the admin, and the fake provider."""

    url: str
    http: httpx.Client
    fake: FakeProvider
    token: str = ADMIN_TOKEN

    def api(self, method: str, path: str, body: Any = None, expect: int | None = None) -> Any:
        response = self.http.request(method, f"/api/v2{path}", json=body)
        if expect is not None:
            assert response.status_code == expect, response.text
        return response.json()

    def has_route(self, method: str, path: str) -> bool:
        """False when the route is missing on this build (the NOT_FOUND envelope of an unknown path)."""
        response = self.http.request(method, f"/api/v2{path}", json={} if method != "GET" else None)
        return not (response.status_code == 404 and response.json().get("error", {}).get("code") == "NOT_FOUND")

    def setup_chat(self, *, context_window: int = 2000, **bot: Any) -> dict[str, str]:
        """A provider on the fake, a chat model ``gpt-4o``, a bot and a chat, made through the API."""
        provider = self.api(
            "POST",
            "/providers",
            {"name": "fake", "kind": "openai", "base_url": self.fake.base_url, "api_key": "sk-e2e-KEY"},
            201,
        )["provider"]
        model = self.api(
            "POST",
            "/models",
            {"provider_id": provider["id"], "name": "gpt-4o", "type": "chat", "context_window": context_window},
            201,
        )["model"]
        created = self.api("POST", "/bots", {"name": "Helper", "chat_model_id": model["id"], **bot}, 201)["bot"]
        chat = self.api("POST", "/chats", {"bot_id": created["id"], "title": "Long chat"}, 201)["chat"]
        return {"provider": provider["id"], "model": model["id"], "bot": created["id"], "chat": chat["id"]}


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (the web UI tests drive Debian's Chromium)")
    return CHROMIUM


@pytest.fixture(scope="package")  # not session: Playwright's sync API keeps an event loop running while it
def browser(chromium_path: Path) -> Iterator[Any]:  # lives, which would break the async tests that run after
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeProvider]:
    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def app(tmp_path: Path, fake_llm: FakeProvider) -> Iterator[App]:
    """The real service on a fresh SQLite file, with the fake provider reset."""
    fake_llm.reset()
    database_url = f"sqlite:///{tmp_path}/ui.db"
    if E2E_SERVER == "installed":
        with _InstalledServer(database_url, tmp_path) as url, _client(url) as http:
            yield App(url, http, fake_llm)
    else:
        service = create_app(database_url, client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
        with Server(service) as url, _client(url) as http:
            yield App(url, http, fake_llm)
    fake_llm.reset()


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30, headers=bearer(ADMIN_TOKEN))


class _InstalledServer:
    """``installed_server.py`` under the installed wheel's interpreter, from a folder outside the checkout."""

    def __init__(self, database_url: str, tmp_path: Path) -> None:
        if not INSTALLED_BIN:
            pytest.fail("CONTEXTSHIFT_E2E_SERVER=installed needs CONTEXTSHIFT_TEST_INSTALLED_BIN (see .ci/run)")
        self.outside = tmp_path / "installed-cwd"
        self.outside.mkdir(exist_ok=True)
        self.log_path = tmp_path / "installed-server.log"
        python = Path(INSTALLED_BIN).parent / "python"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [str(python), str(Path(__file__).with_name("installed_server.py")), database_url, ADMIN_TOKEN, str(ROOT)],
            cwd=self.outside,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def __enter__(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], INSTALLED_START_SECONDS)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("listening "):
            self.__exit__()
            pytest.fail(f"the installed service did not start: {line!r} {self.log_path.read_text()[-2000:]}")
        return f"http://127.0.0.1:{int(line.split()[1])}"

    def __exit__(self, *_exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def page(browser: Any, app: App) -> Iterator[Any]:
    """A laptop-sized page on the app, signed in as the admin the way a user is (the login URL: a session
    cookie, and the CSRF header on every change); uncaught page errors fail the test."""
    context = browser.new_context(viewport=LAPTOP, base_url=app.url, reduced_motion="reduce")
    context.set_default_timeout(30_000)  # generous: CI shares 2 CPUs
    tab = context.new_page()
    tab.goto(f"/?token={app.token}")
    # Leave the app, so that each test's first goto loads it afresh: a hash-only goto would keep the catalog the
    # sign-in load fetched, racing the test's own setup through the API.
    tab.goto("about:blank")
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


def screenshot(page: Any, name: str, *, full_page: bool = False) -> Path | None:
    if SCREENSHOTS_SETTING == "off":
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("document.getElementById('toasts')?.replaceChildren(); document.activeElement?.blur()")
    page.screenshot(path=str(path), full_page=full_page)
    return path
