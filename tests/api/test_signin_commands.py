"""N2 from the shell: ``contextshift serve`` prints a login URL once, ``contextshift token create`` makes tokens.

The service runs as a real process with its own data directory (``CONTEXTSHIFT_DATA_DIR``).
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import time
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from contextshift.cli import token as token_command
from contextshift.cli.main import build_parser
from contextshift.cli.serve import base_url, startup_line

LOGIN = re.compile(r"sign in: (http://127\.0\.0\.1:\d+)/\?token=(cs_[A-Za-z0-9_-]{43})$", re.M)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTSHIFT_")}
    env["CONTEXTSHIFT_DATA_DIR"] = str(data)
    return env


@contextmanager
def serving(data: Path) -> Iterator[tuple[str, str]]:
    """``contextshift serve`` in a child process; (its first stdout lines, its base URL) once it answers."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "contextshift.cli.main", "serve", "--port", str(port)],
        env=_environment(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Uvicorn running" in line or "Application startup complete" in line:
                break
        output = "".join(lines)
        assert "Application startup complete" in output or "Uvicorn running" in output, output
        yield output, f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_serve_prints_a_login_url_on_the_first_start_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data) as (output, url):
        found = LOGIN.search(output)
        assert found is not None, output
        assert found.group(1) == url
        secret = found.group(2)
        me = httpx.get(f"{url}/api/v2/me", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        assert me.json()["user"]["name"] == "admin"
    assert (data / "contextshift.db").is_file()
    with serving(data) as (output, url):
        assert "token=" not in output and "contextshift token create" in output
        again = httpx.get(f"{url}/api/v2/me", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        assert again.status_code == 200


def test_token_create_prints_a_working_token_for_the_admin_or_a_named_user(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'cli.db'}"
    parser = build_parser()
    out, err = io.StringIO(), io.StringIO()
    assert token_command.run(parser.parse_args(["token", "create", "--database", database]), out, err) == 0
    admin_secret = re.findall(r"^(cs_\S+)$", out.getvalue(), re.M)[0]
    assert f"sign in: http://127.0.0.1:8700/?token={admin_secret}" in out.getvalue()
    missing = Namespace(database=database, user="nobody", name="x", host="127.0.0.1", port=8700)
    out, err = io.StringIO(), io.StringIO()
    assert token_command.run(missing, out, err) == 2
    assert "USER_NOT_FOUND" in err.getvalue() and out.getvalue() == ""

    from contextshift.api.app import create_app
    from tests.api.conftest import Server

    with Server(create_app(database, admin_token="")) as url:
        admin = httpx.Client(timeout=30, base_url=url, headers={"Authorization": f"Bearer {admin_secret}"})
        assert admin.post("/api/v2/users", json={"name": "dora"}).status_code == 201
        out = io.StringIO()
        named = parser.parse_args(["token", "create", "--user", "dora", "--database", database, "--port", "9000"])
        assert token_command.run(named, out, io.StringIO()) == 0
        dora_secret = re.findall(r"^(cs_\S+)$", out.getvalue(), re.M)[0]
        assert "http://127.0.0.1:9000/?token=" in out.getvalue()
        me = httpx.get(f"{url}/api/v2/me", headers={"Authorization": f"Bearer {dora_secret}"}, timeout=30)
        assert me.json()["user"]["name"] == "dora"
        admin.close()


def test_token_create_prints_the_address_serve_listens_on_and_says_where_it_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.delenv("CONTEXTSHIFT_DATABASE_URL", raising=False)
    monkeypatch.setenv("CONTEXTSHIFT_DATA_DIR", str(data))
    parser = build_parser()
    with serving(data) as (_output, url):
        assert not url.endswith(":8700")
        out = io.StringIO()
        assert token_command.run(parser.parse_args(["token", "create"]), out, io.StringIO()) == 0
        secret = re.findall(r"^(cs_\S+)$", out.getvalue(), re.M)[0]
        assert f"sign in: {url}/?token={secret}" in out.getvalue()
        assert "the address `contextshift serve` last listened on" in out.getvalue()
        me = httpx.get(f"{url}/api/v2/me", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        assert me.json()["user"]["name"] == "admin"
        out = io.StringIO()
        assert token_command.run(parser.parse_args(["token", "create", "--port", "9100"]), out, io.StringIO()) == 0
        assert "sign in: http://127.0.0.1:9100/?token=" in out.getvalue() and "from --host/--port" in out.getvalue()
        other = f"sqlite:///{tmp_path / 'other.db'}"
        out = io.StringIO()
        assert token_command.run(parser.parse_args(["token", "create", "--database", other]), out, io.StringIO()) == 0
        assert "sign in: http://127.0.0.1:8700/?token=" in out.getvalue() and "the default address" in out.getvalue()


def test_the_startup_line_names_the_address_a_browser_opens() -> None:
    assert base_url("0.0.0.0", 8700) == "http://127.0.0.1:8700"
    assert base_url("::1", 8700) == "http://[::1]:8700"
    assert startup_line("http://127.0.0.1:8700", "sqlite:///x.db", "cs_abc").endswith(
        "sign in: http://127.0.0.1:8700/?token=cs_abc"
    )
    assert "token=" not in startup_line("http://127.0.0.1:8700", "sqlite:///x.db", None)
