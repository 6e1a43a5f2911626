"""Providers and models in the web UI (V1, V3, N2): add, edit, disable; the API key is write-only; "Test
connection" and its distinct words for each cause; the provider's model list prefilling the model form; a failed
turn's cause shown in its own words, after a reload too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes import SECRET, Error, Reply, closed_port_url, tls_to_plain_url, unresolvable_url

from .conftest import App, screenshot

pytestmark = pytest.mark.browser

KEY = "sk-e2e-WRITE-ONLY-0042"
#: Milliseconds a turn may take to show its outcome on the shared machine.
TURN = 15_000


def test_providers_and_models_add_edit_disable_key_write_only(page: Any, app: App) -> None:
    page.goto("/#/providers")
    form = page.get_by_role("form", name="Add a provider")
    form.get_by_label("Name", exact=True).fill("Local vLLM")
    form.get_by_label("Kind").select_option("anthropic")
    expect(form.get_by_label("Base URL")).to_have_value("https://api.anthropic.com")
    form.get_by_label("Kind").select_option("openai")
    form.get_by_label("Base URL").fill(app.fake.base_url)
    form.get_by_label("API key").fill(KEY)
    form.get_by_role("button", name="Add provider").click()

    # Straight on to its first model.
    model_form = page.get_by_role("form", name="Add a model to Local vLLM")
    model_form.get_by_label("Model name").fill("llama-3.1-8b")
    model_form.get_by_label("Context window (tokens)").fill("8192")
    model_form.get_by_label("Max output tokens").fill("1024")
    model_form.get_by_role("button", name="Add model").click()
    card = page.locator(".provider-card", has_text="Local vLLM")
    expect(card.locator(".model-row")).to_contain_text("llama-3.1-8b")
    expect(card.locator(".model-row")).to_contain_text("window 8,192")
    expect(card).to_contain_text("key set")

    provider = app.api("GET", "/providers")["providers"][0]
    assert provider["has_api_key"] is True
    assert KEY not in app.http.get(f"/api/v2/providers/{provider['id']}").text
    assert KEY not in page.content()

    # Edit: the key field is empty (never filled back) and says a key is set; leaving it empty keeps it.
    card.get_by_role("button", name="Edit provider Local vLLM").click()
    edit = page.get_by_role("form", name="Edit provider Local vLLM")
    key_field = edit.get_by_label("API key")
    expect(key_field).to_have_value("")
    expect(key_field).to_have_attribute("type", "password")
    expect(key_field).to_have_attribute("placeholder", "key set — type a new one to replace it")
    edit.get_by_label("Name", exact=True).fill("Local vLLM box")
    edit.get_by_role("button", name="Save provider").click()
    card = page.locator(".provider-card", has_text="Local vLLM box")
    expect(card).to_contain_text("key set")
    assert app.api("GET", f"/providers/{provider['id']}")["provider"]["has_api_key"] is True

    # Remove the key.
    card.get_by_role("button", name="Edit provider Local vLLM box").click()
    page.get_by_label("Remove the stored key").check()
    page.get_by_role("button", name="Save provider").click()
    expect(card).to_contain_text("no key")
    assert app.api("GET", f"/providers/{provider['id']}")["provider"]["has_api_key"] is False

    # Edit a model, then disable the model and the provider.
    card.get_by_role("button", name="Edit model llama-3.1-8b").click()
    page.get_by_role("form", name="Edit model llama-3.1-8b").get_by_label("Context window (tokens)").fill("16384")
    page.get_by_role("button", name="Save model").click()
    expect(card.locator(".model-row")).to_contain_text("window 16,384")
    card.get_by_role("button", name="Disable model llama-3.1-8b").click()
    expect(card.locator(".model-row")).to_contain_text("disabled")
    card.get_by_role("button", name="Disable provider Local vLLM box").click()
    expect(card.locator(".provider-main")).to_contain_text("disabled")
    model = app.api("GET", "/models")["models"][0]
    assert model["context_window"] == 16384 and model["enabled"] is False
    assert app.api("GET", f"/providers/{provider['id']}")["provider"]["enabled"] is False
    card.get_by_role("button", name="Enable provider Local vLLM box").click()
    expect(card.locator(".provider-main")).to_contain_text("enabled")

    # A second provider (Codex: no output limit) shows that its models cannot compact.
    page.get_by_role("button", name="+ Add provider").click()
    form = page.get_by_role("form", name="Add a provider")
    form.get_by_label("Name", exact=True).fill("Codex")
    form.get_by_label("Kind").select_option("openai-codex")
    form.get_by_role("button", name="Add provider").click()
    expect(page.locator(".provider-card", has_text="Codex")).to_contain_text("no output limit")
    page.get_by_role("button", name="Cancel").click()
    screenshot(page, "providers")


#: Each cause of a failed connection: how the form's base URL gets it, its code, and words only it shows.
CAUSES = {
    "refused": (lambda app: closed_port_url(), "PROVIDER_CONNECTION_REFUSED", "Connection refused"),
    "dns": (lambda app: unresolvable_url(), "PROVIDER_DNS_FAILED", "host name could not be found (DNS)"),
    "tls": (lambda app: tls_to_plain_url(app.fake), "PROVIDER_TLS_FAILED", "secure connection (TLS)"),
    "server-error": (
        lambda app: app.fake.script_models(Error(503)).base_url,
        "PROVIDER_SERVER_ERROR",
        "server error (HTTP 5xx)",
    ),
    "timeout": (None, "PROVIDER_TIMEOUT", "took too long to answer"),
}


@pytest.fixture
def hang() -> Iterator[threading.Event]:
    """Holds the fake's model list unanswered (a hang the service's 3 s read timeout ends), released after."""
    hold = threading.Event()
    yield hold
    hold.set()


def test_test_connection_says_connected_for_a_saved_provider_and_the_values_being_edited(page: Any, app: App) -> None:
    app.fake.expected_api_key = KEY
    app.fake.model_list = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    provider = app.api(
        "POST", "/providers", {"name": "Fake", "kind": "openai", "base_url": app.fake.base_url, "api_key": KEY}, 201
    )["provider"]
    page.goto("/#/providers")
    card = page.locator(".provider-card", has_text="Fake")
    card.get_by_role("button", name="Test connection of Fake").click()
    expect(card.locator(".provider-test")).to_contain_text("connected")
    expect(card.locator(".provider-test")).to_contain_text("lists 3 models")

    # Editing: the stored key is used while the address is unchanged; a new address gets no key.
    card.get_by_role("button", name="Edit provider Fake").click()
    edit = page.get_by_role("form", name="Edit provider Fake")
    edit.get_by_role("button", name="Test connection").click()
    expect(edit.locator(".provider-test")).to_contain_text("connected")
    edit.get_by_label("Base URL").fill(app.fake.base_url.replace("127.0.0.1", "localhost"))
    edit.get_by_role("button", name="Test connection").click()
    expect(edit.locator(".provider-test")).to_contain_text("PROVIDER_AUTH")
    edit.get_by_label("API key").fill(KEY)
    edit.get_by_role("button", name="Test connection").click()
    expect(edit.locator(".provider-test")).to_contain_text("connected")
    assert KEY not in page.content()  # a typed value is no attribute: never in the page
    assert app.api("GET", f"/providers/{provider['id']}")["provider"]["base_url"] == app.fake.base_url  # not saved
    assert len(app.fake.model_requests) == 4


@pytest.mark.parametrize("cause", list(CAUSES))
def test_test_connection_names_each_failure_in_its_own_words(
    page: Any, app: App, hang: threading.Event, cause: str
) -> None:
    url_of, code, words = CAUSES[cause]
    if url_of is None:
        app.fake.script_models(Reply(hold=hang))
        url = app.fake.base_url
    else:
        url = url_of(app)
    page.goto("/#/providers")
    form = page.get_by_role("form", name="Add a provider")
    form.get_by_label("Base URL").fill(url)
    form.get_by_role("button", name="Test connection").click()
    result = form.locator(".provider-test")
    expect(result).to_contain_text(code)
    expect(result).to_contain_text(words)
    if cause == "tls":
        screenshot(page, "providers-test-connection")
    for _other, (_url, other_code, other_words) in CAUSES.items():
        if other_code != code:
            expect(result).not_to_contain_text(other_words)
    assert app.api("GET", "/providers")["providers"] == []  # testing saves nothing
    assert SECRET not in page.content()


def test_the_model_form_lists_the_providers_models_and_prefills_the_window(page: Any, app: App) -> None:
    app.fake.model_list = [{"id": "gpt-4o-mini"}, {"id": "local-llama", "max_model_len": 8192}, {"id": "mystery"}]
    app.api("POST", "/providers", {"name": "Fake", "kind": "openai", "base_url": app.fake.base_url}, 201)
    page.goto("/#/providers")
    card = page.locator(".provider-card", has_text="Fake")
    card.get_by_role("button", name="+ Add model").click()
    form = page.get_by_role("form", name="Add a model to Fake")
    form.get_by_role("button", name="Fetch models").click()
    expect(form.locator(".model-list-status")).to_contain_text("3 models listed")
    choices = form.get_by_label("The provider's models")
    choices.select_option("gpt-4o-mini")
    expect(form.get_by_label("Model name")).to_have_value("gpt-4o-mini")
    expect(form.get_by_label("Context window (tokens)")).to_have_value("128000")
    expect(form.get_by_label("Max output tokens")).to_have_value("16384")
    choices.select_option("local-llama")
    expect(form.get_by_label("Context window (tokens)")).to_have_value("8192")
    expect(form.get_by_label("Max output tokens")).to_have_value("")
    choices.select_option("mystery")
    expect(form.get_by_label("Context window (tokens)")).to_have_value("")
    expect(form.locator(".model-list-status")).to_contain_text("enter it yourself")
    choices.select_option("gpt-4o-mini")
    screenshot(page, "providers-model-list")
    form.get_by_role("button", name="Add model").click()
    expect(card.locator(".model-row")).to_contain_text("window 128,000")
    [model] = app.api("GET", "/models")["models"]
    assert (model["name"], model["context_window"], model["max_output_tokens"]) == ("gpt-4o-mini", 128000, 16384)


def test_a_model_list_that_fails_says_why_in_the_model_form(page: Any, app: App) -> None:
    app.fake.script_models(Error(502))
    app.api("POST", "/providers", {"name": "Fake", "kind": "openai", "base_url": app.fake.base_url}, 201)
    page.goto("/#/providers")
    page.locator(".provider-card", has_text="Fake").get_by_role("button", name="+ Add model").click()
    form = page.get_by_role("form", name="Add a model to Fake")
    form.get_by_role("button", name="Fetch models").click()
    expect(form.locator(".model-list-status")).to_contain_text("PROVIDER_SERVER_ERROR")
    expect(form.locator(".model-list-status")).to_contain_text("server error (HTTP 5xx)")


@pytest.mark.parametrize("cause", ["refused", "dns", "tls", "server-error"])
def test_a_failed_turn_shows_its_causes_words_and_still_does_after_a_reload(page: Any, app: App, cause: str) -> None:
    url_of, code, words = CAUSES[cause]
    assert url_of is not None
    ids = app.setup_chat()
    base_url = url_of(app)
    if cause == "server-error":  # the turn's call and its one retry answer 503
        app.fake.script(Error(503), Error(503))
        base_url = app.fake.base_url
    app.api("PATCH", f"/providers/{ids['provider']}", {"base_url": base_url, "api_key": "sk-e2e-KEY"}, 200)
    page.goto(f"/#/chat/{ids['chat']}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("Are you there?")
    composer.press("Enter")
    error = page.locator(".msg.role-user").last.locator(".msg-error")
    expect(error).to_contain_text(code, timeout=TURN)
    expect(error).to_contain_text(words)
    page.reload()
    error = page.locator(".msg.role-user").last.locator(".msg-error")
    expect(error).to_contain_text("This message was not answered.", timeout=TURN)
    expect(error).to_contain_text(code)
    expect(error).to_contain_text(words)


def test_the_first_run_setup_tests_the_provider_and_fills_its_first_model_from_the_list(page: Any, app: App) -> None:
    app.fake.model_list = [{"id": "claude-sonnet-4-5"}]
    page.goto("/")
    form = page.get_by_role("form", name="Add a provider")
    form.get_by_label("Name", exact=True).fill("Fake")
    form.get_by_label("Base URL").fill(app.fake.base_url)
    form.get_by_role("button", name="Test connection").click()
    expect(form.locator(".provider-test")).to_contain_text("lists 1 model")
    form.get_by_role("button", name="Add provider").click()

    expect(page.get_by_role("heading", name="2. Which model?")).to_be_visible()
    form = page.get_by_role("form", name="Add a model")
    form.get_by_role("button", name="Fetch models").click()
    form.get_by_label("The provider's models").select_option("claude-sonnet-4-5")
    expect(form.get_by_label("Context window (tokens)")).to_have_value("200000")
    expect(form.get_by_label("Max output tokens")).to_have_value("64000")
    form.get_by_role("button", name="Add model").click()
    expect(page.get_by_role("heading", name="3. Create a bot")).to_be_visible()
    [model] = app.api("GET", "/models")["models"]
    assert (model["name"], model["context_window"], model["max_output_tokens"]) == ("claude-sonnet-4-5", 200000, 64000)
