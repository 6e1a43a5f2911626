"""Every method a path of the OpenAPI document does not declare answers 405 ``METHOD_NOT_ALLOWED`` with the
``Allow`` header RFC 9110 requires, listing exactly what the path accepts (V1). Table-driven from the document,
so a new route is covered the day it lands."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, Server, bearer

METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    database = Path(tmp_path_factory.mktemp("allow")) / "api.db"
    with (
        Server(create_app(f"sqlite:///{database}", admin_token=ADMIN_TOKEN)) as url,
        httpx.Client(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as client,
    ):
        yield client


def accepted(item: dict[str, Any]) -> set[str]:
    """The methods a path item declares (its other keys are parameters, summary, ...)."""
    return {method.upper() for method in item if method.upper() in METHODS}


def test_every_undeclared_method_on_every_documented_path_is_405_with_allow(http: httpx.Client) -> None:
    paths: dict[str, dict[str, Any]] = http.get("/openapi.json").json()["paths"]
    assert len(paths) >= 20
    checked = 0
    wrong: list[str] = []
    for template, item in paths.items():
        path = re.sub(r"\{[^}]+\}", "no-such-id", template)
        allow = accepted(item)
        for method in METHODS:
            if method in allow:
                continue
            response = http.request(method, path)
            checked += 1
            got = sorted(m.strip() for m in response.headers.get("allow", "").split(",") if m.strip())
            # a HEAD response has no body; every other 405 carries the envelope, with the same list (on /v1,
            # OpenAI's or Anthropic's error shape, which has no list: the Allow header says it)
            error = {} if method == "HEAD" else response.json().get("error", {})
            compat = template.startswith("/v1/")
            if (
                response.status_code != 405
                or got != sorted(allow)
                or (method != "HEAD" and not compat and error.get("code") != "METHOD_NOT_ALLOWED")
                or (method != "HEAD" and not compat and error.get("params", {}).get("allowed") != sorted(allow))
                or (method != "HEAD" and compat and error.get("message") != "This route does not accept that method.")
            ):
                wrong.append(f"{method} {template}: {response.status_code} Allow={got} {response.text[:200]}")
    assert checked >= 100
    assert not wrong, "\n".join(wrong)


def test_a_static_page_asked_with_post_is_405_allowing_get_and_head(http: httpx.Client) -> None:
    response = http.post("/")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    assert response.json()["error"]["params"] == {"allowed": ["GET", "HEAD"]}
    assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_an_unknown_api_path_is_404_for_every_method(http: httpx.Client) -> None:
    for method in METHODS:
        response = http.request(method, "/api/v2/no-such-thing")
        assert response.status_code == 404, method
        assert "allow" not in response.headers
        if method != "HEAD":  # a HEAD response has no body
            assert response.json()["error"]["code"] == "NOT_FOUND"
