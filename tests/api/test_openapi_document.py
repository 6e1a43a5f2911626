"""The OpenAPI document says what the service does (V1): read from a running service, then checked against it.

This is what the schemathesis CLI run (``.ci/schemathesis.sh``) does not check, and why this file stays:

- completeness of the document itself: every API operation documents its error responses with the envelope,
  admin-only ones their 403, each create its links to the get, update and delete of what it made (the CLI only
  follows what is there);
- meaning the CLI cannot know: each ``Location`` reads back exactly what was created; ``null`` on a patch field
  that cannot be empty leaves it unchanged;
- answers the CLI never reaches: a whole turn through a provider, streamed (``text/event-stream``) and plain, and
  the OpenAI-compatible endpoint, each with the media type and required headers (``Location``,
  ``x-contextshift-audit``, ``WWW-Authenticate``) its operation documents; the body limit's 413 on a GET that
  declares a huge body, over a raw socket.

The error codes and the refusals before every route have their own tests (test_error_codes.py, test_refusals.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, Server, bearer
from tests.fakes.server import FakeProvider

ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
OPERATIONS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    database = Path(tmp_path_factory.mktemp("document")) / "api.db"
    with (
        Server(create_app(f"sqlite:///{database}", admin_token=ADMIN_TOKEN)) as url,
        httpx.Client(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def document(http: httpx.Client) -> dict[str, Any]:
    return http.get("/openapi.json").json()  # type: ignore[no-any-return]


def operations(document: dict[str, Any], prefix: str = "/api/v2/") -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        if path.startswith(prefix):
            for method in OPERATIONS:
                if method in item:
                    yield method, path, item[method]


def test_every_api_operation_documents_its_errors_with_the_envelope(document: dict[str, Any]) -> None:
    missing: list[str] = []
    for method, path, operation in operations(document):
        responses = operation["responses"]
        expected = {"401", "413", "422"} | ({"404"} if "{" in path else set())
        for status in sorted(expected):
            schema = responses.get(status, {}).get("content", {}).get("application/json", {}).get("schema")
            if schema != ENVELOPE:
                missing.append(f"{method.upper()} {path}: {status}")
    assert not missing, "\n".join(missing)


def test_admin_only_operations_document_403(document: dict[str, Any]) -> None:
    admin_only = [("post", "/api/v2/providers"), ("patch", "/api/v2/models/{model_id}"), ("get", "/api/v2/users")]
    for method, path in admin_only:
        assert document["paths"][path][method]["responses"]["403"]["content"]["application/json"]["schema"] == ENVELOPE


def test_generate_documents_the_event_stream_and_the_provider_failures(document: dict[str, Any]) -> None:
    responses = document["paths"]["/api/v2/chats/{chat_id}/generate"]["post"]["responses"]
    assert set(responses["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {"502", "504"} <= set(responses)


READERS = {
    "/api/v2/providers": "provider",
    "/api/v2/models": "model",
    "/api/v2/bots": "bot",
    "/api/v2/lorebooks": "lorebook",
    "/api/v2/chats": "chat",
    "/api/v2/users": "user",
}


def test_every_create_whose_resource_has_a_reader_declares_location(document: dict[str, Any]) -> None:
    for method, path, operation in operations(document):
        created = operation["responses"].get("201")
        if method != "post" or created is None:
            continue
        readable = any(p.startswith(path + "/{") and "get" in item for p, item in document["paths"].items())
        assert ("Location" in created.get("headers", {})) == readable, path
        assert (path in READERS) == readable, path


def test_each_location_reads_back_what_was_created(http: httpx.Client) -> None:
    provider = http.post("/api/v2/providers", json={"name": "p", "kind": "openai", "base_url": "http://127.0.0.1:9"})
    model = http.post("/api/v2/models", json={"provider_id": provider.json()["provider"]["id"], "name": "m"})
    bot = http.post("/api/v2/bots", json={"name": "b"})
    chat = http.post("/api/v2/chats", json={"bot_id": bot.json()["bot"]["id"]})
    lorebook = http.post("/api/v2/lorebooks", json={"name": "l", "entries": []})
    user = http.post("/api/v2/users", json={"name": "located", "role": "user"})
    created_ones = [(provider, "provider"), (model, "model"), (bot, "bot"), (chat, "chat"), (lorebook, "lorebook")]
    for response, kind in [*created_ones, (user, "user")]:
        assert response.status_code == 201, response.text
        created = response.json()[kind]
        assert response.headers["location"] == f"/api/v2/{kind}s/{created['id']}"
        read = http.get(response.headers["location"])
        assert read.status_code == 200 and read.json()[kind] == created


def test_null_on_a_patch_field_that_cannot_be_empty_leaves_it_unchanged(http: httpx.Client) -> None:
    provider = http.post("/api/v2/providers", json={"name": "keep", "kind": "openai", "base_url": "http://127.0.0.1:9"})
    provider_id = provider.json()["provider"]["id"]
    patched = http.patch(f"/api/v2/providers/{provider_id}", json={"name": None, "enabled": None, "base_url": None})
    assert patched.status_code == 200, patched.text
    assert patched.json()["provider"] == provider.json()["provider"]
    model = http.post("/api/v2/models", json={"provider_id": provider_id, "name": "keep", "context_window": 8000})
    model_id = model.json()["model"]["id"]
    patched = http.patch(f"/api/v2/models/{model_id}", json={"name": None, "type": None, "enabled": None})
    assert patched.status_code == 200, patched.text
    assert patched.json()["model"]["name"] == "keep" and patched.json()["model"]["type"] == "chat"
    cleared = http.patch(f"/api/v2/models/{model_id}", json={"context_window": None})
    assert cleared.status_code == 200 and cleared.json()["model"]["context_window"] is None


def test_healthz_and_the_openai_model_list_document_the_refusals_that_precede_them(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    healthz = document["paths"]["/healthz"]["get"]["responses"]
    models = document["paths"]["/v1/models"]["get"]["responses"]
    assert {"400", "413", "500"} <= set(healthz) and {"400", "413", "500"} <= set(models)
    assert healthz["413"]["content"]["application/json"]["schema"] == ENVELOPE
    # on /v1 in OpenAI's error shape (compat_errors), as its SDKs read it
    assert models["413"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/OpenAIError"}
    address = httpx.URL(str(http.base_url))
    for path, code in (("/healthz", "PAYLOAD_TOO_LARGE"), ("/v1/models", "payload_too_large")):
        # the body limit answers even a GET that declares a huge body
        with socket.create_connection((address.host, address.port), timeout=10) as raw:
            raw.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9437184\r\n\r\n".encode())
            answer = b""
            while chunk := raw.recv(65536):  # the service closes the connection after its 413
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), head
        assert json.loads(body)["error"]["code"] == code


def test_each_create_links_to_every_operation_on_what_it_made(document: dict[str, Any]) -> None:
    links = document["paths"]["/api/v2/bots"]["post"]["responses"]["201"]["links"]
    assert {name: link["parameters"] for name, link in links.items()} == {
        name: {"bot_id": "$response.body#/bot/id"}
        for name in (
            "get_bot",
            "patch_bot",
            "delete_bot",
            "get_bot_memories",
            "post_bot_memories",
            "get_bot_compaction_models",
            "get_bot_compaction_logs",
        )
    }
    chat_links = document["paths"]["/api/v2/chats"]["post"]["responses"]["201"]["links"]
    assert {"post_chat_generate", "post_chat_compact", "post_chat_messages", "get_chat_status"} <= set(chat_links)
    ids = {op["operationId"] for item in document["paths"].values() for op in item.values() if "operationId" in op}
    for path, item in document["paths"].items():
        for link in item.get("post", {}).get("responses", {}).get("201", {}).get("links", {}).values():
            assert link["operationId"] in ids, path
    messages = document["paths"]["/api/v2/chats/{chat_id}/messages"]["post"]["responses"]["201"]["links"]
    assert messages["delete_message"]["parameters"]["chat_id"] == "$request.path.chat_id"


def undocumented(document: dict[str, Any], method: str, template: str, response: httpx.Response) -> list[str]:
    """How a real answer differs from its operation's document: its media type, a required header."""
    where = f"{method.upper()} {template} {response.status_code}"
    documented = document["paths"][template][method]["responses"].get(str(response.status_code))
    if documented is None:
        return [f"{where}: status not documented"]
    problems: list[str] = []
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if documented.get("content") and media not in documented["content"]:
        problems.append(f"{where}: {media} is not among {sorted(documented['content'])}")
    for name, header in documented.get("headers", {}).items():
        if header.get("required") and name.lower() not in response.headers:
            problems.append(f"{where}: no {name} header")
    return problems


def test_real_answers_have_the_media_types_and_headers_their_operations_document(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    """What schemathesis cannot reach without a provider: a streamed and a plain turn, the OpenAI endpoint."""
    app = create_app(f"sqlite:///{tmp_path / 'api.db'}", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN)
    answers: list[tuple[str, str, httpx.Response]] = []
    with Server(app) as url, httpx.Client(base_url=url, timeout=20, headers=bearer(ADMIN_TOKEN)) as http:
        document = http.get("/openapi.json").json()

        def call(method: str, template: str, path: str, **options: Any) -> httpx.Response:
            response = http.request(method.upper(), path, **options)
            answers.append((method, template, response))
            return response

        body = {"name": "fake", "kind": "openai", "base_url": fake_provider.base_url, "api_key": "sk-x"}
        provider = call("post", "/api/v2/providers", "/api/v2/providers", json=body).json()["provider"]
        model_body = {"provider_id": provider["id"], "name": "gpt-4o", "context_window": 8000}
        model = call("post", "/api/v2/models", "/api/v2/models", json=model_body).json()["model"]
        bot = call("post", "/api/v2/bots", "/api/v2/bots", json={"name": "b", "chat_model_id": model["id"]}).json()
        chat = call("post", "/api/v2/chats", "/api/v2/chats", json={"bot_id": bot["bot"]["id"]}).json()["chat"]
        generate = "/api/v2/chats/{chat_id}/generate"
        streamed = call("post", generate, f"/api/v2/chats/{chat['id']}/generate", json={"content": "Hi"})
        assert "event: done" in streamed.text
        plain = call("post", generate, f"/api/v2/chats/{chat['id']}/generate", json={"content": "Hi", "stream": False})
        assert plain.json()["message"]["role"] == "assistant"
        call("get", "/api/v2/chats/{chat_id}", f"/api/v2/chats/{'0' * 32}")
        http.headers.pop("Authorization")
        call("get", "/api/v2/bots", "/api/v2/bots")
        http.headers.update(bearer(ADMIN_TOKEN))
        completion = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
        call("post", "/v1/chat/completions", "/v1/chat/completions", json=completion)
        call("post", "/v1/chat/completions", "/v1/chat/completions", json={**completion, "stream": True})
    statuses = [(m, t, r.status_code) for m, t, r in answers]
    assert statuses[4:] == [
        ("post", generate, 200),
        ("post", generate, 200),
        ("get", "/api/v2/chats/{chat_id}", 404),
        ("get", "/api/v2/bots", 401),
        ("post", "/v1/chat/completions", 200),
        ("post", "/v1/chat/completions", 200),
    ]
    problems = [p for method, template, response in answers for p in undocumented(document, method, template, response)]
    assert not problems, "\n".join(problems)
