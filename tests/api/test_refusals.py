"""What is refused before any route runs answers in the error envelope and is documented on every operation (V1):
a real ``contextshift serve`` over real sockets.

- uvicorn's own refusals of malformed HTTP (a bad ``Content-Length``, a request line or target that is not HTTP,
  a transfer coding it does not implement, a request line and headers over the limit) come in the envelope with
  a code of the document, not uvicorn's plain-text 400; the server goes on serving.
- Each refusal of the checks in front of the routes (a foreign ``Host``, no token, another site's ``Origin``, a
  body that is not JSON, a body over the limit, a control character in the query) is sent to every operation of
  the document, and must come back as a status that operation documents, in the envelope, with a documented code.
  A new route is probed the day it lands.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import ADMIN_TOKEN
from tests.serving import ServeProcess

OPERATIONS = ("get", "put", "post", "patch", "delete")
SAFE = ("get",)
ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    where = tmp_path_factory.mktemp("refusals")
    env = {
        "CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN,
        "CONTEXTSHIFT_DATA_DIR": str(where / "data"),
        "CONTEXTSHIFT_LOGIN_LIMIT": "100000/minute",
    }
    process = ServeProcess(f"sqlite:///{where / 'api.db'}", where / "serve.log", env).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def document(serve: ServeProcess) -> dict[str, Any]:
    return httpx.get(f"{serve.url}/openapi.json", timeout=20).json()  # type: ignore[no-any-return]


def exchange(serve: ServeProcess, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes on a new connection; the status, headers and body of the answer (the server closes it)."""
    with socket.create_connection(("127.0.0.1", serve.port), timeout=20) as raw:
        raw.sendall(request)
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split(" ")[1]), headers, body


def envelope_code(headers: dict[str, str], body: bytes, document: dict[str, Any]) -> str:
    assert headers["content-type"] == "application/json", headers
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message", "params"}
    assert error["code"] in document["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"]
    return str(error["code"])


MALFORMED = {
    "a Content-Length that is not a number": (
        b"POST /api/v2/bots HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ten\r\n\r\n",
        400,
        "MALFORMED_REQUEST",
    ),
    "two different Content-Lengths": (
        b"POST /api/v2/bots HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
        "MALFORMED_REQUEST",
    ),
    "a request line that is not HTTP": (b"HELLO THERE\r\n\r\n", 400, "MALFORMED_REQUEST"),
    "a request target that is not ASCII": (
        "GET /api/v2/bots/caf\u00e9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(),
        400,
        "MALFORMED_REQUEST",
    ),
    "a header name with a space": (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n", 400, None),
    "no Host on HTTP/1.1": (b"GET /healthz HTTP/1.1\r\n\r\n", 400, "MALFORMED_REQUEST"),
    "a transfer coding other than chunked": (
        b"POST /api/v2/bots HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        501,
        "TRANSFER_ENCODING_NOT_IMPLEMENTED",
    ),
    "a head over the limit that never ends": (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 40_000,
        431,
        "REQUEST_HEADERS_TOO_LARGE",
    ),
    "a whole head over the limit": (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 40_000 + b"\r\n\r\n",
        431,
        "REQUEST_HEADERS_TOO_LARGE",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_uvicorns_own_refusal_of_malformed_http_comes_in_the_envelope(
    serve: ServeProcess, document: dict[str, Any], case: str
) -> None:
    request, expected_status, expected_code = MALFORMED[case]
    status, headers, body = exchange(serve, request)
    assert status == expected_status, body
    assert envelope_code(headers, body, document) == (expected_code or "MALFORMED_REQUEST")
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    # the connection it refused is closed; the server itself goes on serving
    assert httpx.get(f"{serve.url}/healthz", timeout=20).status_code == 200


def test_a_malformed_header_holding_a_token_is_refused_without_repeating_it(
    serve: ServeProcess, document: dict[str, Any]
) -> None:
    secret = "cs_never-echo-this-token"
    request = f"GET /api/v2/bots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\x00\r\n\r\n"
    status, headers, body = exchange(serve, request.encode())
    assert status == 400 and envelope_code(headers, body, document) == "MALFORMED_REQUEST"
    assert secret.encode() not in body
    assert secret not in (Path(serve.log_path).read_text(errors="replace"))


# -- every operation documents the refusals that come before its route ------------------------------------------


def refusals(method: str, path: str) -> dict[str, tuple[dict[str, str], bytes]]:
    """The requests each check in front of the routes refuses, for one operation: (headers, body)."""
    signed_in = {"Host": "127.0.0.1", "Authorization": f"Bearer {ADMIN_TOKEN}"}
    cases: dict[str, tuple[dict[str, str], bytes]] = {
        "a foreign Host": ({**signed_in, "Host": "evil.example"}, b""),
        "a body over the limit": ({**signed_in, "Content-Length": str(64 * 1024 * 1024)}, b""),
        "a control character in the query": (signed_in, b""),
    }
    if path.startswith(("/api/", "/v1/")):
        cases["no token"] = ({"Host": "127.0.0.1"}, b"")
        cases["a wrong token"] = ({"Host": "127.0.0.1", "Authorization": "Bearer cs_wrong"}, b"")
    if method not in SAFE:
        cases["another site's Origin"] = ({**signed_in, "Origin": "http://evil.example"}, b"{}")
        cases["a body that is not JSON"] = ({**signed_in, "Content-Type": "text/plain"}, b"x")
    return cases


def raw_request(method: str, template: str, case: str, headers: dict[str, str], body: bytes) -> bytes:
    target = re.sub(r"\{[^}]+\}", "no-such-id", template) + ("?q=%01" if "control character" in case else "")
    lines = [f"{method.upper()} {target} HTTP/1.1", "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_every_operation_documents_each_refusal_that_comes_before_its_route(
    serve: ServeProcess, document: dict[str, Any]
) -> None:
    codes = document["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"]
    wrong: list[str] = []
    probed = 0
    for template, item in document["paths"].items():
        for method, operation in ((m, item[m]) for m in OPERATIONS if m in item):
            for case, (headers, body) in refusals(method, template).items():
                status, answer_headers, answer = exchange(serve, raw_request(method, template, case, headers, body))
                probed += 1
                where = f"{method.upper()} {template}, {case}: {status}"
                documented = operation["responses"].get(str(status))
                schema = (documented or {}).get("content", {}).get("application/json", {}).get("schema", {})
                if documented is None:
                    wrong.append(
                        f"{where} is not among its documented responses: api/refusals.py adds these to every route "
                        "of the routers api/app.py lists (add a new router there), or declare it on the route with "
                        "error_responses(...)"
                    )
                elif template.startswith("/v1/"):
                    continue  # every refusal there comes in the endpoint's own shape (test_openai_endpoint.py)
                elif schema != ENVELOPE and ENVELOPE not in schema.get("anyOf", ()):
                    wrong.append(f"{where} is not documented as the error envelope")
                elif json.loads(answer)["error"]["code"] not in codes:
                    wrong.append(f"{where} carries {json.loads(answer)['error']['code']}, not a documented code")
                elif {h.lower() for h in documented.get("headers", {})} - set(answer_headers):
                    wrong.append(f"{where} lacks a header it documents")
    assert probed > 200
    assert not wrong, "\n".join(wrong)
