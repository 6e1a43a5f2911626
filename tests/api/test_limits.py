"""N1/N5 request limits over a real socket, on SQLite and PostgreSQL: body size (413 before the body is read),
bounded ``meta``, ids with control characters (404 on every backend) and strict types (no coercion)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.api.limits import DEFAULT_MAX_BODY_BYTES, MAX_DISCARD_BYTES
from contextshift.api.schemas import META_MAX_BYTES, META_MAX_DEPTH, META_MAX_KEYS
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, Service, bearer
from tests.databases import Backend

SMALL_LIMIT = 4096
AUTH = f"Authorization: Bearer {ADMIN_TOKEN}\r\n"


@pytest.fixture
async def small(backend: Backend) -> AsyncIterator[Service]:
    """The service with a 4 KiB body limit (the fake provider is not needed)."""
    app = create_app(
        database=backend.database(), client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, max_body_bytes=SMALL_LIMIT
    )
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
            yield Service(url, http, None, backend)  # type: ignore[arg-type]


async def _raw_exchange(url: str, head: bytes, chunks: list[bytes]) -> tuple[int, dict[str, object]]:
    """Send ``head`` and ``chunks`` on one connection, never finishing the body; the status and JSON answer."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(head)
        for chunk in chunks:
            writer.write(chunk)
        await writer.drain()
        answer = await reader.read(65536)
        while b"\r\n\r\n" not in answer:
            more = await reader.read(65536)
            if not more:
                break
            answer += more
        headers, _, body = answer.partition(b"\r\n\r\n")
        status = int(headers.split(b" ", 2)[1])
        lines = headers.split(b"\r\n")
        length = next((int(h.split(b":", 1)[1]) for h in lines if h.lower().startswith(b"content-length")), None)
        while length is not None and len(body) < length:
            more = await reader.read(65536)
            if not more:
                break
            body += more
        return status, json.loads(body)
    finally:
        writer.close()


async def _message_count(service: Service, chat_id: str) -> int:
    listed = await service.http.get(f"/api/v2/chats/{chat_id}/messages")
    return len(listed.json()["messages"])


async def test_the_default_body_limit_is_8_mib(service: Service) -> None:
    assert DEFAULT_MAX_BODY_BYTES == 8 * 1024 * 1024
    ids = await service.setup_chat()
    head = (
        f"POST /api/v2/chats/{ids['chat']}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}"
        f"Content-Type: application/json\r\nContent-Length: {DEFAULT_MAX_BODY_BYTES + 1}\r\n\r\n"
    ).encode()
    status, body = await _raw_exchange(service.url, head, [b'{"role": "user", "content": "'])
    assert status == 413
    assert body["error"] == {  # type: ignore[comparison-overlap]
        "code": "PAYLOAD_TOO_LARGE",
        "message": f"The request body is larger than the limit of {DEFAULT_MAX_BODY_BYTES} bytes.",
        "params": {"limit": DEFAULT_MAX_BODY_BYTES},
    }
    assert await _message_count(service, ids["chat"]) == 0


async def test_a_declared_length_over_the_limit_is_refused_before_any_body_byte(small: Service) -> None:
    bot = await small.post("/api/v2/bots", {"name": "b"})
    chat = (await small.post("/api/v2/chats", {"bot_id": bot["bot"]["id"]}))["chat"]
    head = (
        f"POST /api/v2/chats/{chat['id']}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}"
        f"Content-Type: application/json\r\nContent-Length: {100 * 1024 * 1024}\r\n\r\n"
    ).encode()
    status, body = await _raw_exchange(small.url, head, [])  # not one byte of the 100 MiB is sent
    assert status == 413
    assert body["error"]["code"] == "PAYLOAD_TOO_LARGE"  # type: ignore[index]
    assert await _message_count(small, chat["id"]) == 0


async def test_a_chunked_body_is_refused_at_the_chunk_that_passes_the_limit(small: Service) -> None:
    bot = await small.post("/api/v2/bots", {"name": "b"})
    chat = (await small.post("/api/v2/chats", {"bot_id": bot["bot"]["id"]}))["chat"]
    head = (
        f"POST /api/v2/chats/{chat['id']}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    piece = b"x" * 3000
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * 2  # 6000 bytes > 4096; the body is never finished
    status, body = await _raw_exchange(small.url, head, chunks)
    assert status == 413
    assert body["error"]["params"] == {"limit": SMALL_LIMIT}  # type: ignore[index]
    assert await _message_count(small, chat["id"]) == 0


async def test_bodies_within_the_limit_are_served(small: Service) -> None:
    bot = await small.post("/api/v2/bots", {"name": "b", "system_prompt": "y" * (SMALL_LIMIT - 200)})
    assert len(bot["bot"]["system_prompt"]) == SMALL_LIMIT - 200


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    ("meta", "words"),
    [
        (_nested(META_MAX_DEPTH + 1), "levels deep"),
        ({f"k{i}": i for i in range(META_MAX_KEYS + 1)}, "keys"),
        ({"a": {f"k{i}": i for i in range(META_MAX_KEYS)}}, "keys"),
        ({"blob": "z" * META_MAX_BYTES}, "bytes"),
    ],
    ids=["too-deep", "too-many-keys", "too-many-nested-keys", "too-many-bytes"],
)
async def test_unbounded_meta_is_refused_and_nothing_is_stored(
    service: Service, meta: dict[str, object], words: str
) -> None:
    ids = await service.setup_chat()
    created = await service.http.post(
        f"/api/v2/chats/{ids['chat']}/messages", json={"role": "user", "content": "hi", "meta": meta}
    )
    assert created.status_code == 422, created.text
    assert created.json()["error"]["code"] == "VALIDATION" and words in created.json()["error"]["message"]
    kept = await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "hi"})
    patched = await service.http.patch(
        f"/api/v2/chats/{ids['chat']}/messages/{kept['message']['id']}", json={"meta": meta}
    )
    assert patched.status_code == 422
    listed = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert [m["meta"] for m in listed] == [{}]


async def test_meta_at_its_bounds_is_accepted(service: Service) -> None:
    ids = await service.setup_chat()
    for meta in (_nested(META_MAX_DEPTH), {f"k{i}": i for i in range(META_MAX_KEYS)}):
        created = await service.http.post(
            f"/api/v2/chats/{ids['chat']}/messages", json={"role": "user", "content": "hi", "meta": meta}
        )
        assert created.status_code == 201, created.text
        assert created.json()["message"]["meta"] == meta


@pytest.mark.parametrize(
    "path",
    [
        "/api/v2/chats/%00",
        "/api/v2/chats/abc%00def",
        "/api/v2/chats/a%0Ab/messages",
        "/api/v2/bots/%7F",
        "/api/v2/chats/%01/context-audit",
        "/api/v2/chats/%00/status",
    ],
)
async def test_ids_with_control_characters_are_not_found_on_every_backend(service: Service, path: str) -> None:
    for method in ("GET", "DELETE"):
        response = await service.http.request(method, path)
        assert response.status_code in (404, 405), (method, response.text)
        if response.status_code == 404:
            assert response.json()["error"]["code"] == "NOT_FOUND"
    assert (await service.http.get(path)).status_code == 404


async def test_message_ids_with_nul_are_not_found(service: Service) -> None:
    ids = await service.setup_chat()
    path = f"/api/v2/chats/{ids['chat']}/messages/x%00y"
    patched = await service.http.patch(path, json={"pinned": True})
    deleted = await service.http.delete(path)
    assert (patched.status_code, deleted.status_code) == (404, 404)


async def test_a_query_string_with_nul_finds_nothing(service: Service) -> None:
    for path, params in (("/api/v2/chats", {"bot_id": "a\x00b"}), ("/api/v2/models", {"provider_id": "\x08"})):
        response = await service.http.get(path, params=params)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"


async def test_no_value_is_coerced_to_another_type(service: Service) -> None:
    ids = await service.setup_chat()
    refused = [
        ("/api/v2/models", {"provider_id": ids["provider"], "name": "m", "context_window": "8000"}),
        ("/api/v2/models", {"provider_id": ids["provider"], "name": "m", "context_window": True}),
        ("/api/v2/models", {"provider_id": ids["provider"], "name": "m", "context_window": 8000.5}),
        ("/api/v2/models", {"provider_id": ids["provider"], "name": "m", "enabled": "yes"}),
        ("/api/v2/bots", {"name": "b", "compaction_enabled": 1}),
        ("/api/v2/bots", {"name": "b", "response_reserve": "100"}),
        (f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": "yes"}),
        (f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "stream": "false"}),
        (f"/api/v2/chats/{ids['chat']}/generate", {"content": "hi", "max_tokens": "10"}),
        (f"/api/v2/chats/{ids['chat']}/messages", {"role": "user", "content": "hi", "pinned": "true"}),
        ("/api/v2/context-preview", {"chat_id": ids["chat"], "max_tokens": "5"}),
        ("/api/v2/providers", {"name": "p", "kind": "openai", "base_url": "http://x.test", "enabled": 0}),
    ]
    for path, body in refused:
        response = await service.http.post(path, json=body)
        assert response.status_code == 422, (path, body, response.text)
        assert response.json()["error"]["code"] == "VALIDATION"
    assert service.fake.requests == []  # no generation started
    accepted = await service.post(
        "/api/v2/models", {"provider_id": ids["provider"], "name": "m", "context_window": 8000, "enabled": False}
    )
    assert accepted["model"]["context_window"] == 8000
    integral = await service.post(
        "/api/v2/models", {"provider_id": ids["provider"], "name": "n", "context_window": 8e3}
    )
    assert integral["model"]["context_window"] == 8000  # JSON (and JSON Schema) have one number type
    bot = await service.post("/api/v2/bots", {"name": "b", "compaction_ratio": 1 / 4, "compaction_enabled": False})
    assert bot["bot"]["compaction_ratio"] == 0.25


async def test_the_openapi_document_states_the_limits(service: Service) -> None:
    document = (await service.http.get("/openapi.json")).json()
    message = document["components"]["schemas"]["MessageCreate"]["properties"]["meta"]
    assert message["maxProperties"] == META_MAX_KEYS
    operation = document["paths"]["/api/v2/chats/{chat_id}/messages"]["post"]
    assert "413" in operation["responses"]


def _send_all_then_read(url: str, head: bytes, body: bytes) -> tuple[int, dict[str, object]]:
    """What a plain client does (urllib, requests): send the whole request, then read the answer. A server
    that closes while the body is still coming makes ``sendall`` fail with a reset (the issue's symptom)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(head)
        for start in range(0, len(body), 256 * 1024):
            sock.sendall(body[start : start + 256 * 1024])
        answer = b""
        while True:
            more = sock.recv(65536)
            if not more:
                break
            answer += more
    headers, _, payload = answer.partition(b"\r\n\r\n")
    return int(headers.split(b" ", 2)[1]), json.loads(payload)


async def test_a_client_still_sending_an_oversized_body_reads_the_413(service: Service) -> None:
    """Issue 25, point 11: after its 413 the server reads and drops the rest of the body (up to
    MAX_DISCARD_BYTES), so a client that sends the whole body first gets the answer, not a reset."""
    ids = await service.setup_chat()
    body = b'{"role": "user", "content": "' + b"x" * (20 * 1024 * 1024) + b'"}'
    assert MAX_DISCARD_BYTES == 64 * 1024 * 1024 > len(body)
    for path in (f"/api/v2/chats/{ids['chat']}/messages", "/v1/chat/completions"):
        declared = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        status, answer = await asyncio.to_thread(_send_all_then_read, service.url, declared, body)
        assert status == 413
        code = answer["error"]["code"]  # type: ignore[index]
        assert code == ("payload_too_large" if path.startswith("/v1") else "PAYLOAD_TOO_LARGE")
        chunked_head = declared.replace(b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked")
        piece = 1024 * 1024
        chunked = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + piece]), body[i : i + piece]) for i in range(0, len(body), piece)
        )
        status, answer = await asyncio.to_thread(_send_all_then_read, service.url, chunked_head, chunked + b"0\r\n\r\n")
        assert status == 413
    assert await _message_count(service, ids["chat"]) == 0


async def test_a_client_that_expects_100_continue_gets_the_413_without_sending_the_body(small: Service) -> None:
    head = (
        f"POST /api/v2/bots HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}Content-Type: application/json\r\n"
        f"Expect: 100-continue\r\nContent-Length: {SMALL_LIMIT + 1}\r\n\r\n"
    ).encode()
    status, body = await _raw_exchange(small.url, head, [])  # waits for "100 Continue", which never comes
    assert (status, body["error"]["code"]) == (413, "PAYLOAD_TOO_LARGE")  # type: ignore[index]
    assert (await small.http.get("/api/v2/bots")).json()["bots"] == []
