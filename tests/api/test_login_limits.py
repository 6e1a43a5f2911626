"""N2: failed sign-ins from one client slow down (429 AUTH_RATE_LIMITED), and the log says so without a token."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.api.login_limits import LoginLimiter
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, bearer

WRONG = "cs_a-wrong-token-guessed-0123456789"


async def test_a_client_whose_tokens_keep_failing_is_refused_for_a_while(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="contextshift.auth")
    app = create_app(
        f"sqlite:///{tmp_path / 'limits.db'}",
        client_options=CLIENT_OPTIONS,
        admin_token=ADMIN_TOKEN,
        login_limit="3/minute",
    )
    with Server(app) as url:
        async with httpx.AsyncClient(timeout=30, base_url=url) as http:
            assert (await http.get("/api/v2/me", headers=bearer(ADMIN_TOKEN))).status_code == 200  # not counted
            for _ in range(3):
                assert (await http.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401
            limited = await http.get("/api/v2/me", headers=bearer(WRONG))
            assert (limited.status_code, limited.json()["error"]["code"]) == (429, "AUTH_RATE_LIMITED")
            assert 1 <= int(limited.headers["retry-after"]) <= 60
            # Over the limit, wrong tokens wait on every way in, uncounted ...
            login = await http.get(f"/?token={WRONG}")
            assert (login.status_code, login.json()["error"]["code"]) == (429, "AUTH_RATE_LIMITED")
            assert (await http.post("/session", json={"token": WRONG})).status_code == 429
            proxy = await http.get("/v1/models", headers=bearer(WRONG))
            assert proxy.status_code == 429 and proxy.json()["error"]["code"] == "rate_limit_exceeded"
            # ... while a valid token from the same address is accepted (issue 25, point 5): a 256-bit token
            # cannot be guessed, and a noisy neighbour behind a shared address must not lock the admin out.
            assert (await http.get("/api/v2/me", headers=bearer(ADMIN_TOKEN))).status_code == 200
            assert (await http.get("/v1/models", headers=bearer(ADMIN_TOKEN))).status_code == 200
            # Without any token there is nothing to guess: still the plain 401.
            assert (await http.get("/api/v2/me")).status_code == 401
            signin = await http.post("/session", json={"token": ADMIN_TOKEN})
            assert (signin.status_code, signin.json()) == (200, {"signed_in": True, "name": "admin"})
    messages = [r.getMessage() for r in caplog.records if r.name == "contextshift.auth"]
    assert messages.count("failed sign-in from 127.0.0.1") == 3
    assert any("too many failed sign-ins from 127.0.0.1" in m for m in messages)
    assert not [m for m in caplog.messages if WRONG in m or ADMIN_TOKEN in m]


def test_the_login_url_never_reaches_the_access_log(tmp_path: Path) -> None:
    create_app(f"sqlite:///{tmp_path / 'log.db'}", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    access = logging.getLogger("uvicorn.access")
    # The record uvicorn's access logger makes for a request (its format and arguments).
    record = access.makeRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/?token={ADMIN_TOKEN}&x=1", "1.1", 303),
        None,
    )
    assert all(f.filter(record) for f in access.filters)
    line = record.getMessage()
    assert ADMIN_TOKEN not in line and line == '127.0.0.1:5000 - "GET /?token=[redacted]&x=1 HTTP/1.1" 303'


REDIS_ENV = "CONTEXTSHIFT_TEST_REDIS_URL"


@pytest.mark.skipif(not os.environ.get(REDIS_ENV), reason=f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
async def test_instances_sharing_a_redis_store_count_failed_sign_ins_together(tmp_path: Path) -> None:
    namespace = f"test-{uuid.uuid4().hex}"  # this test's own counts on a shared server
    apps = []
    for name in ("a", "b"):
        app = create_app(f"sqlite:///{tmp_path / f'{name}.db'}", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
        app.state.login_limiter = LoginLimiter("3/minute", os.environ[REDIS_ENV], namespace=namespace)
        apps.append(app)
    with Server(apps[0]) as first, Server(apps[1]) as second:
        async with (
            httpx.AsyncClient(timeout=30, base_url=first) as a,
            httpx.AsyncClient(timeout=30, base_url=second) as b,
        ):
            assert (await a.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401
            assert (await b.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401
            assert (await a.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401
            limited = await b.get("/api/v2/me", headers=bearer(WRONG))  # the 4th failure, 2 of them elsewhere
            assert (limited.status_code, limited.json()["error"]["code"]) == (429, "AUTH_RATE_LIMITED")
            assert (await a.get("/api/v2/me", headers=bearer(WRONG))).status_code == 429
            assert (await a.get("/api/v2/me", headers=bearer(ADMIN_TOKEN))).status_code == 200


async def test_per_process_counts_by_default_are_not_shared(tmp_path: Path) -> None:
    apps = [
        create_app(
            f"sqlite:///{tmp_path / f'{name}.db'}",
            client_options=CLIENT_OPTIONS,
            admin_token=ADMIN_TOKEN,
            login_limit="2/minute",
        )
        for name in ("a", "b")
    ]
    with Server(apps[0]) as first, Server(apps[1]) as second:
        async with (
            httpx.AsyncClient(timeout=30, base_url=first) as a,
            httpx.AsyncClient(timeout=30, base_url=second) as b,
        ):
            for _ in range(2):
                assert (await a.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401
            assert (await a.get("/api/v2/me", headers=bearer(WRONG))).status_code == 429
            assert (await b.get("/api/v2/me", headers=bearer(WRONG))).status_code == 401  # b counts on its own


def _bad_sign_ins(url: str, forwarded_for: list[str]) -> list[int]:
    """One wrong token per ``X-Forwarded-For`` value, in order: the statuses."""
    with httpx.Client(base_url=url, timeout=30) as http:
        return [
            http.get("/api/v2/me", headers={**bearer(WRONG), "X-Forwarded-For": value}).status_code
            for value in forwarded_for
        ]


def _serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "CONTEXTSHIFT_DATA_DIR": str(tmp_path),
        "CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN,
        "CONTEXTSHIFT_LOGIN_LIMIT": "3/minute",
        **extra,
    }


def test_forwarded_headers_from_a_direct_client_do_not_escape_the_sign_in_limit(tmp_path: Path) -> None:
    from tests.serving import ServeProcess

    rotating = [f"203.0.113.{n}" for n in range(1, 7)]
    database = f"sqlite:///{tmp_path / 'direct.db'}"
    with ServeProcess(database, tmp_path / "direct.log", env=_serve_env(tmp_path)) as server:
        # no --forwarded-allow-ips: the peer (127.0.0.1) is the client, whatever the header claims
        assert _bad_sign_ins(server.url, rotating) == [401, 401, 401, 429, 429, 429]
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.get("/api/v2/me", headers=bearer(ADMIN_TOKEN)).status_code == 200


def test_forwarded_headers_from_a_trusted_proxy_name_the_client(tmp_path: Path) -> None:
    from tests.serving import ServeProcess

    env = _serve_env(tmp_path, CONTEXTSHIFT_FORWARDED_ALLOW_IPS="127.0.0.1")
    database = f"sqlite:///{tmp_path / 'proxied.db'}"
    with ServeProcess(database, tmp_path / "proxied.log", env=env) as server:
        # behind a trusted proxy, each forwarded address counts on its own
        assert _bad_sign_ins(server.url, [f"203.0.113.{n}" for n in range(1, 7)]) == [401] * 6
        assert _bad_sign_ins(server.url, ["198.51.100.7"] * 4) == [401, 401, 401, 429]
    log = (tmp_path / "proxied.log").read_text()
    assert "too many failed sign-ins from 198.51.100.7" in log and WRONG not in log


def test_the_forwarded_allow_ips_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextshift.cli.serve import FORWARDED_ALLOW_IPS_ENV, proxy_options

    monkeypatch.delenv(FORWARDED_ALLOW_IPS_ENV, raising=False)
    assert proxy_options(None) == {"proxy_headers": False, "forwarded_allow_ips": ""}
    monkeypatch.setenv(FORWARDED_ALLOW_IPS_ENV, " 10.0.0.1 , 10.0.0.2 ")
    assert proxy_options(None) == {"proxy_headers": True, "forwarded_allow_ips": "10.0.0.1,10.0.0.2"}
    assert proxy_options("") == {"proxy_headers": False, "forwarded_allow_ips": ""}
    assert proxy_options("192.168.0.0/16") == {"proxy_headers": True, "forwarded_allow_ips": "192.168.0.0/16"}
