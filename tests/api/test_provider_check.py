"""Testing a provider's connection and reading its model list (V3, N2), against real sockets: the fake provider,
a closed port (refused), a ``.invalid`` host (DNS), ``https://`` to the fake's plain-HTTP port (TLS), a hang
bounded by the tests' 3 s read timeout, and a 5xx. Each cause answers with its own code and words, in the test's
result and on a failed turn (stored with the input, so a reload shows it); nothing the provider said, and never
the key, comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.api.conftest import Account, Service
from tests.fakes import SECRET, Error, FakeProvider, Reply, closed_port_url, tls_to_plain_url, unresolvable_url

KEY = "sk-test-KEY-789"  # the key Service.setup_chat saves


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """A hold the fake never answers through until the test ends (a hang), released afterwards."""
    hold = threading.Event()
    yield hold
    hold.set()


#: Each cause, as a base URL (or a scripted answer of the fake) and the code it must answer with.
CAUSES: dict[str, tuple[Callable[[FakeProvider], str], str]] = {
    "refused": (lambda fake: closed_port_url(), "PROVIDER_CONNECTION_REFUSED"),
    "dns": (lambda fake: unresolvable_url(), "PROVIDER_DNS_FAILED"),
    "tls": (tls_to_plain_url, "PROVIDER_TLS_FAILED"),
    "server-error": (lambda fake: fake.script_models(Error(503)).base_url, "PROVIDER_SERVER_ERROR"),
    "wrong-key": (lambda fake: fake.base_url, "PROVIDER_AUTH"),
}


async def provider(service: Service, base_url: str, kind: str = "openai") -> str:
    created = await service.post("/api/v2/providers", {"name": "p", "kind": kind, "base_url": base_url, "api_key": KEY})
    return str(created["provider"]["id"])


async def test_a_saved_provider_that_answers_passes_the_test_with_its_key_and_model_count(service: Service) -> None:
    service.fake.expected_api_key = KEY
    service.fake.model_list = [{"id": "a"}, {"id": "b"}]
    provider_id = await provider(service, service.fake.base_url)
    response = await service.http.post(f"/api/v2/providers/{provider_id}/test", json={})
    assert response.status_code == 200
    assert response.json()["test"] == {
        "ok": True,
        "code": None,
        "message": "Connected: the provider answered.",
        "status": None,
        "models": 2,
    }
    [asked] = service.fake.model_requests
    assert asked.path == "/models" and asked.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in response.text


async def test_an_anthropic_provider_is_tested_on_its_v1_models_with_its_own_headers(service: Service) -> None:
    service.fake.expected_api_key = KEY
    provider_id = await provider(service, service.fake.base_url, kind="anthropic")
    response = await service.http.post(f"/api/v2/providers/{provider_id}/test", json={})
    assert response.json()["test"]["ok"] is True
    [asked] = service.fake.model_requests
    assert asked.path == "/v1/models" and asked.headers["x-api-key"] == KEY and "anthropic-version" in asked.headers


@pytest.mark.parametrize("cause", list(CAUSES))
async def test_each_failure_cause_has_its_own_code_and_words_and_no_upstream_text(service: Service, cause: str) -> None:
    url_of, code = CAUSES[cause]
    if cause == "wrong-key":
        service.fake.expected_api_key = "sk-another-key"
    provider_id = await provider(service, url_of(service.fake))
    response = await service.http.post(f"/api/v2/providers/{provider_id}/test", json={})
    assert response.status_code == 200
    test = response.json()["test"]
    assert test["ok"] is False and test["code"] == code and test["models"] is None
    assert SECRET not in response.text and KEY not in response.text
    assert len(service.fake.model_requests) == (1 if cause in ("server-error", "wrong-key") else 0)  # never retried


async def test_the_failure_messages_of_the_causes_are_all_different(service: Service) -> None:
    messages = set()
    for cause, (url_of, _code) in CAUSES.items():
        provider_id = await provider(service, url_of(service.fake))
        service.fake.expected_api_key = "sk-another-key" if cause == "wrong-key" else None
        test = (await service.http.post(f"/api/v2/providers/{provider_id}/test", json={})).json()["test"]
        messages.add(test["message"])
    assert len(messages) == len(CAUSES)


async def test_a_provider_that_hangs_is_a_timeout_asked_once(service: Service, release: threading.Event) -> None:
    service.fake.script_models(Reply(hold=release))
    provider_id = await provider(service, service.fake.base_url)
    test = (await service.http.post(f"/api/v2/providers/{provider_id}/test", json={})).json()["test"]
    assert test["ok"] is False and test["code"] == "PROVIDER_TIMEOUT"
    assert len(service.fake.model_requests) == 1
    assert service.fake.wait_for(lambda: service.fake.model_requests[0].disconnected.is_set())


async def test_unsaved_values_are_tested_and_the_saved_key_is_used_only_at_its_own_address(service: Service) -> None:
    service.fake.expected_api_key = KEY
    provider_id = await provider(service, service.fake.base_url)
    same = {"kind": "openai", "base_url": service.fake.base_url, "provider_id": provider_id}
    assert (await service.http.post("/api/v2/provider-tests", json=same)).json()["test"]["ok"] is True
    assert service.fake.model_requests[-1].headers["authorization"] == f"Bearer {KEY}"

    moved = {**same, "base_url": service.fake.base_url.replace("127.0.0.1", "localhost")}
    test = (await service.http.post("/api/v2/provider-tests", json=moved)).json()["test"]
    assert test["code"] == "PROVIDER_AUTH"
    assert "authorization" not in service.fake.model_requests[-1].headers  # the key did not follow

    typed = {**moved, "api_key": KEY}
    assert (await service.http.post("/api/v2/provider-tests", json=typed)).json()["test"]["ok"] is True
    fresh = {"kind": "openai", "base_url": closed_port_url()}
    test = (await service.http.post("/api/v2/provider-tests", json=fresh)).json()["test"]
    assert test["code"] == "PROVIDER_CONNECTION_REFUSED"


async def test_the_model_list_prefills_stated_and_known_windows(service: Service) -> None:
    service.fake.model_list = [
        {"id": "gpt-4o-2024-08-06"},
        {"id": "local-llama", "max_model_len": 8192},
        {"id": "openrouter/thing", "context_length": 32000, "top_provider": {"max_completion_tokens": 4000}},
        {"id": "mystery-7b"},
        {"id": "bad\nname"},
        {"id": 42},
    ]
    provider_id = await provider(service, service.fake.base_url)
    response = await service.http.get(f"/api/v2/providers/{provider_id}/models")
    assert response.status_code == 200
    assert response.json()["models"] == [
        {"id": "gpt-4o-2024-08-06", "context_window": 128000, "max_output_tokens": 16384},
        {"id": "local-llama", "context_window": 8192, "max_output_tokens": None},
        {"id": "mystery-7b", "context_window": None, "max_output_tokens": None},
        {"id": "openrouter/thing", "context_window": 32000, "max_output_tokens": 4000},
    ]


@pytest.mark.parametrize(
    ("answer", "status", "code"),
    [(Error(500), 502, "PROVIDER_SERVER_ERROR"), (Error(401), 502, "PROVIDER_AUTH")],
    ids=["5xx", "401"],
)
async def test_a_model_list_that_fails_answers_the_cause_in_the_envelope(
    service: Service, answer: Error, status: int, code: str
) -> None:
    service.fake.script_models(answer)
    provider_id = await provider(service, service.fake.base_url)
    response = await service.http.get(f"/api/v2/providers/{provider_id}/models")
    assert response.status_code == status and response.json()["error"]["code"] == code
    assert SECRET not in response.text and KEY not in response.text


async def test_only_admins_test_providers_and_unknown_ones_are_not_found(service: Service, other_user: Account) -> None:
    provider_id = await provider(service, service.fake.base_url)
    for method, path, body in (
        ("POST", f"/api/v2/providers/{provider_id}/test", {}),
        ("GET", f"/api/v2/providers/{provider_id}/models", None),
        ("POST", "/api/v2/provider-tests", {"kind": "openai", "base_url": service.fake.base_url}),
    ):
        response = await other_user.http.request(method, path, json=body)
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert service.fake.model_requests == []
    missing = await service.http.post("/api/v2/providers/nope/test", json={})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "PROVIDER_NOT_FOUND"
    unknown = {"kind": "openai", "base_url": service.fake.base_url, "provider_id": "nope"}
    missing = await service.http.post("/api/v2/provider-tests", json=unknown)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "PROVIDER_NOT_FOUND"


@pytest.mark.parametrize("cause", ["refused", "dns", "tls", "server-error"])
async def test_a_failed_turn_keeps_the_causes_own_code_with_the_input(service: Service, cause: str) -> None:
    url_of, code = CAUSES[cause]
    ids = await service.setup_chat()
    base_url = url_of(service.fake)
    if cause == "server-error":  # the turn's own call (and its one retry) answer 503
        service.fake.script(Error(503), Error(503))
        base_url = service.fake.base_url
    await service.http.patch(f"/api/v2/providers/{ids['provider']}", json={"base_url": base_url, "api_key": KEY})
    response = await service.http.post(f"/api/v2/chats/{ids['chat']}/generate", json={"content": "hi", "stream": False})
    assert response.status_code == 502 and response.json()["error"]["code"] == code
    assert SECRET not in response.text
    [kept] = (await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")).json()["messages"]
    assert kept["meta"]["failed"] == {"code": code}
    audit: dict[str, Any] = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    assert audit["error_code"] == code


async def test_the_test_of_unsaved_values_has_a_path_of_its_own(service: Service) -> None:
    """Not /providers/test: a provider's own path would take "test" for an id and advertise its methods."""
    response = await service.http.get("/api/v2/provider-tests")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


async def test_a_key_that_cannot_be_sent_is_reported_not_a_server_error(service: Service) -> None:
    typed = {"kind": "openai", "base_url": service.fake.base_url, "api_key": "ключ"}  # not ASCII: no header holds it
    response = await service.http.post("/api/v2/provider-tests", json=typed)
    assert response.status_code == 200, response.text
    test = response.json()["test"]
    assert (test["ok"], test["code"]) == (False, "PROVIDER_BAD_REQUEST") and "ключ" not in response.text
    assert service.fake.model_requests == []  # nothing was sent
