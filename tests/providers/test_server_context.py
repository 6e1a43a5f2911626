"""T5 (issue 25): the context size a local server runs a model with, read over a real socket from the fake
provider in the shapes of llama.cpp (``/props``, ``/slots``) and Ollama (``/api/ps``, ``/api/show``), and the
window prompts are fitted to: the smaller of the configured window and the server's, said in words."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from contextshift.core import ApproximateProfile
from contextshift.providers.server_context import (
    LLAMA_CPP_PROPS,
    LLAMA_CPP_SLOTS,
    OLLAMA_PS,
    OLLAMA_SHOW,
    ServerContext,
    ServerContexts,
    fitting_window,
    read_server_context,
)
from contextshift.service.counting import ServerCounting
from contextshift.storage.tables import ModelRow, ProviderRow
from tests.fakes.server import FakeProvider, closed_port_url

SERVERS = {
    "llama.cpp": LLAMA_CPP_PROPS,
    "llama.cpp-slots": LLAMA_CPP_SLOTS,
    "ollama": OLLAMA_PS,
    "ollama-show": OLLAMA_SHOW,
}


@pytest.mark.parametrize("server", SERVERS, ids=list(SERVERS))
async def test_each_servers_context_size_is_read_from_its_own_endpoint(
    server: str, fake_provider: FakeProvider
) -> None:
    fake_provider.server_context = (server, 2048)
    fake_provider.model_list = [{"id": "llama3", "object": "model"}]
    async with httpx.AsyncClient() as client:
        found = await read_server_context(client, fake_provider.base_url + "/v1", "llama3", "sk-local")
    assert found == ServerContext(2048, SERVERS[server])
    asked = [(r.method, r.path) for r in fake_provider.context_requests]
    order = [("GET", "/props"), ("GET", "/slots"), ("GET", "/api/ps"), ("POST", "/api/show")]
    assert asked == order[: order.index(next(p for p in order if p[1] in found.source)) + 1]
    assert all(r.headers.get("authorization") == "Bearer sk-local" for r in fake_provider.context_requests)
    if server == "ollama-show":
        assert fake_provider.context_requests[-1].body == {"model": "llama3"}
    assert fake_provider.requests == []  # no chat call was made to find it


async def test_ollama_tells_only_about_a_loaded_model_of_that_name(fake_provider: FakeProvider) -> None:
    fake_provider.server_context = ("ollama", 4096)
    fake_provider.model_list = [{"id": "qwen2:7b", "object": "model"}]  # loaded: another model
    async with httpx.AsyncClient() as client:
        found = await read_server_context(client, fake_provider.base_url, "llama3", None)
    # not loaded: /api/ps does not list it, and /api/show gives the Modelfile's num_ctx
    assert found == ServerContext(4096, OLLAMA_SHOW)
    assert "authorization" not in fake_provider.context_requests[0].headers


async def test_a_server_that_does_not_say_leaves_the_configured_window(fake_provider: FakeProvider) -> None:
    async with httpx.AsyncClient() as client:
        assert await read_server_context(client, fake_provider.base_url, "gpt-4o") is None
        assert await read_server_context(client, closed_port_url(), "gpt-4o") is None
        assert len(fake_provider.context_requests) == 4
        silent = ServerContexts(reask_after=0)  # a server that does not say is left alone longer
        assert await silent.get(client, fake_provider.base_url, "gpt-4o") is None
        assert await silent.get(client, fake_provider.base_url, "gpt-4o") is None
    assert len(fake_provider.context_requests) == 8


async def test_an_answer_is_kept_and_asked_again_after_its_time(fake_provider: FakeProvider) -> None:
    fake_provider.server_context = ("llama.cpp", 4096)
    kept, fresh = ServerContexts(reask_after=3600), ServerContexts(reask_after=0, reask_silent_after=0)
    async with httpx.AsyncClient() as client:
        for _ in range(3):
            assert await kept.get(client, fake_provider.base_url, "m") == ServerContext(4096, LLAMA_CPP_PROPS)
        assert len(fake_provider.context_requests) == 1
        fake_provider.server_context = ("llama.cpp", 8192)  # restarted with another -c
        assert await fresh.get(client, fake_provider.base_url, "m") == ServerContext(8192, LLAMA_CPP_PROPS)
        assert await kept.get(client, fake_provider.base_url, "m") == ServerContext(4096, LLAMA_CPP_PROPS)


@pytest.mark.parametrize(
    ("configured", "server", "window", "said"),
    [
        (8192, None, 8192, None),
        (8192, 16384, 8192, None),
        (8192, 8192, 8192, None),
        (8192, 2048, 2048, "2,048 tokens of context (llama.cpp /props), less than its configured window of 8,192"),
        (None, 2048, 2048, "2,048 tokens of context (llama.cpp /props): prompts are fitted to it"),
        (None, None, None, None),
    ],
)
def test_prompts_are_fitted_to_the_smaller_window_and_the_server_is_named(
    configured: int | None, server: int | None, window: int | None, said: str | None
) -> None:
    found = ServerContext(server, LLAMA_CPP_PROPS) if server is not None else None
    got, sentence = fitting_window(configured, found)
    assert got == window
    assert (sentence is None) == (said is None)
    if said is not None:
        assert sentence is not None and said in sentence


def _rows(fake: FakeProvider, kind: str = "openai") -> tuple[ModelRow, ProviderRow]:
    provider = ProviderRow(name="local", kind=kind, base_url=fake.base_url + "/v1", api_key=None, timeout_seconds=5)
    return ModelRow(name="llama3", type="chat", context_window=8192), provider


async def test_the_service_asks_openai_compatible_servers_only(fake_provider: FakeProvider) -> None:
    fake_provider.server_context = ("llama.cpp", 2048)
    counting = ServerCounting()
    model, provider = _rows(fake_provider)
    found = await counting.server_context(model, provider)
    assert found == ServerContext(2048, LLAMA_CPP_PROPS)
    assert fitting_window(model.context_window, found)[0] == 2048
    anthropic_model, anthropic = _rows(fake_provider, "anthropic")
    assert await counting.server_context(anthropic_model, anthropic) is None
    assert len(fake_provider.context_requests) == 1  # and once: kept for the next request
    assert await counting.server_context(model, provider) == found
    assert len(fake_provider.context_requests) == 1


@pytest.fixture
def hang(fake_provider: FakeProvider) -> Iterator[threading.Event]:
    """The fake's side calls (tokenizer, context size) taken and never answered until the test ends."""
    hold = threading.Event()
    fake_provider.side_hold = hold
    yield hold
    hold.set()


async def test_a_context_probe_that_hangs_ends_with_the_providers_timeout(
    fake_provider: FakeProvider, hang: threading.Event
) -> None:
    """N5 (issue 25, point 3): the probe never outlasts the provider's ``timeout_seconds`` (1 s here), though each
    of its calls may take 5 s: the first call is cut there, so the other three are never made."""
    fake_provider.server_context = ("llama.cpp", 2048)
    model, provider = _rows(fake_provider)
    provider.timeout_seconds = 1
    assert await ServerCounting().server_context(model, provider) is None
    assert [r.path for r in fake_provider.context_requests] == ["/props"]


async def test_a_tokenizer_probe_that_hangs_ends_with_the_providers_timeout(
    fake_provider: FakeProvider, hang: threading.Event
) -> None:
    """N5 (issue 25, point 3): the tokenizer probe (several dialects, 30 s a call) ends with the provider's
    ``timeout_seconds`` too, at its first call, and the turn counts by estimate."""
    fake_provider.tokenizer = "llama.cpp"
    model, provider = _rows(fake_provider)
    model.tokenizer = "server"
    provider.timeout_seconds = 1
    assert await ServerCounting().tokenizer_for(model, provider, ApproximateProfile()) is None
    assert len(fake_provider.tokenize_requests) == 1
