"""What users install works (V5): the built wheel ships every file of the package, and the service installed
from it, started outside the checkout, serves the whole web UI.

`.ci/run` builds the wheel, installs it into a fresh virtual environment outside the checkout and names both
here: ``CONTEXTSHIFT_TEST_WHEEL`` (the ``.whl`` file) and ``CONTEXTSHIFT_TEST_INSTALLED_BIN`` (the installed
``contextshift`` command). Without them these tests skip and say so.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEEL = os.environ.get("CONTEXTSHIFT_TEST_WHEEL", "")
INSTALLED_BIN = os.environ.get("CONTEXTSHIFT_TEST_INSTALLED_BIN", "")
SKIP_WHY = "set CONTEXTSHIFT_TEST_WHEEL and CONTEXTSHIFT_TEST_INSTALLED_BIN (.ci/run builds and installs the wheel)"
ADMIN_TOKEN = "cs-wheel-smoke-admin-token"
#: How many times to poll /healthz while the installed service starts (0.1 s apart): a count, not a clock.
STARTUP_POLLS = 300


def _package_files() -> set[str]:
    """Every file git tracks under contextshift/, as a path inside the wheel."""
    listed = subprocess.run(
        ["git", "ls-files", "contextshift"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return {path for path in listed if (ROOT / path).is_file() and not (ROOT / path).is_symlink()}


@pytest.mark.skipif(not WHEEL, reason=SKIP_WHY)
def test_the_wheel_ships_every_file_of_the_package() -> None:
    with zipfile.ZipFile(WHEEL) as wheel:
        shipped = set(wheel.namelist())
    missing = sorted(_package_files() - shipped)
    assert not missing, f"the wheel leaves out {missing}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def installed_service(tmp_path: Path) -> Iterator[str]:
    """``contextshift serve`` from the installed wheel, run from a folder outside the checkout."""
    if not INSTALLED_BIN:
        pytest.skip(SKIP_WHY)
    port = _free_port()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")} | {
        "CONTEXTSHIFT_DATA_DIR": str(tmp_path / "data"),
        "CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN,
    }
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [INSTALLED_BIN, "serve", "--port", str(port), "--database", f"sqlite:///{tmp_path / 'data' / 'cs.db'}"],
        cwd=outside,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(STARTUP_POLLS):
            if process.poll() is not None:
                break
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the installed service did not answer /healthz")
        assert process.poll() is None, (tmp_path / "serve.log").read_text()
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


#: Scripts the UI loads only when a page needs them (the highlighter: when a reply has a code block).
LOADED_ON_DEMAND = {"highlight.min.js"}


@pytest.mark.browser
def test_the_installed_service_serves_the_whole_ui(installed_service: str, browser: Any) -> None:
    context = browser.new_context(base_url=installed_service)
    page = context.new_page()
    failed: list[str] = []
    errors: list[str] = []
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(f"/?token={ADMIN_TOKEN}")
        page.wait_for_load_state("networkidle")
        # The app replaced the static "Loading…" placeholder with a real screen.
        page.wait_for_function("!document.querySelector('#main .loading')", timeout=15_000)
        assert page.locator("#main").inner_text().strip()
        loaded = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    finally:
        context.close()
    assert not failed, f"these requests failed: {failed}"
    assert not errors, f"JavaScript errors in the page: {errors}"
    scripts = {name.rsplit("/", 1)[-1] for name in loaded if name.endswith(".js")}
    static = ROOT / "contextshift" / "web" / "static"
    shipped = {path.name for path in static.rglob("*.js")}
    assert shipped - LOADED_ON_DEMAND <= scripts | {"app.js"}, f"scripts never loaded: {sorted(shipped - scripts)}"
    for name in sorted(LOADED_ON_DEMAND):  # not on the first screen, but the installed wheel must serve them
        path = next(static.rglob(name)).relative_to(static).as_posix()
        assert httpx.get(f"{installed_service}/{path}", timeout=10).status_code == 200, path
