"""Providers and models in the web UI (V1, V3, N2): add, edit, disable; the API key is write-only."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App, screenshot

pytestmark = pytest.mark.browser

KEY = "sk-e2e-WRITE-ONLY-0042"


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
