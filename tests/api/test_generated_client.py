"""A client generated from the OpenAPI document works (V1): ``openapi-python-client`` generates a package from a
running service's ``/openapi.json`` (offline, no post-hooks), and that package drives the same service through a
whole turn: provider on the fake, model, bot, chat, a generated reply, the audit. A change to the document that
breaks its clients (a renamed operation, field or schema, a schema the generator cannot follow) fails here."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, CLIENT_OPTIONS, TEST_LOGIN_LIMIT, Server
from tests.fakes.script import Reply
from tests.fakes.server import FakeProvider

PACKAGE = "contextshift_generated_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, fake_provider_server: FakeProvider) -> Iterator[str]:
    database = tmp_path_factory.mktemp("generated-client") / "api.db"
    app = create_app(
        f"sqlite:///{database}", client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, login_limit=TEST_LOGIN_LIMIT
    )
    with Server(app) as url:
        yield url


def generate(url: str, into: Path) -> tuple[ModuleType, str]:
    """The package generated from the service's document, imported; and what the generator printed."""
    document = into / "openapi.json"
    document.write_bytes(httpx.get(f"{url}/openapi.json", timeout=20).content)
    config = into / "config.yaml"
    config.write_text("post_hooks: []\n")  # no ruff/black run over the generated code: nothing else is needed
    command = [str(GENERATOR), "generate", "--path", str(document), "--config", str(config), "--meta", "none"]
    done = subprocess.run(
        [*command, "--output-path", str(into / PACKAGE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(into))
    try:
        return importlib.import_module(PACKAGE), done.stdout + done.stderr
    finally:
        sys.path.remove(str(into))


def op(package: ModuleType, tag: str, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.api.{tag}.{name}")


def test_a_client_generated_from_the_document_runs_a_whole_turn(
    served: str, tmp_path: Path, fake_provider: FakeProvider
) -> None:
    client_package, printed = generate(served, tmp_path)
    # the generator follows every schema and operation of the document but one: the recursive JsonValue of a
    # message's free-form meta (it follows recursion only through objects), so the generated client sends meta
    # as an empty object; a schema-exact form both it and schemathesis accept is not done yet
    skipped = [line for line in printed.splitlines() if line.startswith("Unable to parse schema")]
    assert skipped == ["Unable to parse schema /components/schemas/JsonValue"], printed
    assert "Endpoint will not be generated" not in printed, printed
    models = importlib.import_module(f"{PACKAGE}.models")
    client = client_package.AuthenticatedClient(base_url=served, token=ADMIN_TOKEN, raise_on_unexpected_status=True)
    fake_provider.script(Reply("Hello from the fake.", input_tokens=20, output_tokens=4))
    with client:
        catalog = "providers_and_models"
        provider = op(client_package, catalog, "create_provider_api_v2_providers_post").sync(
            client=client,
            body=models.ProviderCreate(
                name="fake", kind=models.ProviderCreateKind.OPENAI, base_url=fake_provider.base_url, api_key="sk-x"
            ),
        )
        assert isinstance(provider, models.ProviderEnvelope), provider
        assert provider.provider.has_api_key is True
        model = op(client_package, catalog, "create_model_api_v2_models_post").sync(
            client=client,
            body=models.ModelCreate(provider_id=provider.provider.id, name="gpt-4o", context_window=8000),
        )
        assert isinstance(model, models.ModelEnvelope), model
        bot = op(client_package, "bots", "create_bot_api_v2_bots_post").sync(
            client=client, body=models.BotCreate(name="helper", chat_model_id=model.model.id)
        )
        assert isinstance(bot, models.BotEnvelope), bot
        chat = op(client_package, "chats", "create_chat_api_v2_chats_post").sync(
            client=client, body=models.ChatCreate(bot_id=bot.bot.id)
        )
        assert isinstance(chat, models.ChatEnvelope), chat
        request = models.GenerateRequestType0(content="Say hello.")
        request.additional_properties["stream"] = False  # the JSON answer, not the event stream
        reply = op(client_package, "generation", "generate_api_v2_chats_chat_id_generate_post").sync(
            chat_id=chat.chat.id, client=client, body=request
        )
        assert isinstance(reply, models.GenerateOut), reply
        assert reply.message.content == "Hello from the fake."
        assert reply.usage is not None and reply.usage.input_tokens == 20
        audit = op(client_package, "generation", "context_audit_api_v2_chats_chat_id_context_audit_get").sync(
            chat_id=chat.chat.id, client=client
        )
        assert isinstance(audit, models.AuditEnvelope) and audit.audit is not None, audit
        assert audit.audit.status == models.AuditOutStatus.COMPLETED
        assert audit.audit.reply_message_id == reply.message.id
        assert [e.reason for e in audit.audit.entries][-1:] == ["protected"]
        missing = op(client_package, "chats", "get_chat_api_v2_chats_chat_id_get").sync(chat_id="0" * 32, client=client)
        assert isinstance(missing, models.ErrorEnvelope)
        assert missing.error.code is models.ErrorBodyCode.CHAT_NOT_FOUND  # the document's enum, as a typed enum
    assert len(fake_provider.requests) == 1
