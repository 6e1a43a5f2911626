"""Settings in one place (issue 24): every ``CONTEXTSHIFT_*`` variable is a field of ``Settings``, read once and
checked there, documented in the one table of docs/operations.md, and ``create_app`` takes them from the object it
is given rather than from the environment."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from contextshift.api.app import create_app
from contextshift.embeddings import UnknownEmbeddings
from contextshift.service.rules import NO_RULES, Rules
from contextshift.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, Server, bearer

ROOT = Path(__file__).resolve().parents[1]


def test_settings_are_read_from_the_environment_given() -> None:
    settings = Settings.from_env(
        {
            "CONTEXTSHIFT_DATABASE_URL": " sqlite:///x.db ",
            "CONTEXTSHIFT_ALLOWED_HOSTS": "chat.internal, ,box.lan:8700",
            "CONTEXTSHIFT_MAX_BODY_BYTES": "4096",
            "CONTEXTSHIFT_SESSION_DAYS": "1.5",
            "CONTEXTSHIFT_LOGIN_LIMIT": "3/minute",
            "CONTEXTSHIFT_EMBEDDINGS": "",
            "OTHER": "ignored",
        }
    )
    assert settings.database_url == "sqlite:///x.db"
    assert settings.allowed_hosts == ("chat.internal", "box.lan:8700")
    assert (settings.max_body_bytes, settings.session_days, settings.login_limit) == (4096, 1.5, "3/minute")
    assert settings.embeddings is None and settings.admin_token is None
    assert Settings.from_env({}) == Settings()
    hours = Settings.from_env({"CONTEXTSHIFT_PROXY_AUDIT_HOURS": "-3", "CONTEXTSHIFT_COMPACTION_WAIT_SECONDS": "2.5"})
    assert (hours.proxy_audit_hours, hours.compaction_wait_seconds) == (0.0, 2.5)
    assert Settings.from_env({"CONTEXTSHIFT_PROXY_AUDIT_HOURS": "a day"}).proxy_audit_hours is None  # warned


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CONTEXTSHIFT_MAX_BODY_BYTES", "0"),
        ("CONTEXTSHIFT_MAX_BODY_BYTES", "lots"),
        ("CONTEXTSHIFT_SESSION_DAYS", "0"),
        ("CONTEXTSHIFT_SESSION_DAYS", "4000"),
        ("CONTEXTSHIFT_SESSION_DAYS", "many"),
        ("CONTEXTSHIFT_COMPACTION_WAIT_SECONDS", "-1"),
        ("CONTEXTSHIFT_COMPACTION_WAIT_SECONDS", "soon"),
        ("CONTEXTSHIFT_READ_CACHE_SECONDS", "-3"),
        ("CONTEXTSHIFT_READ_CACHE_SECONDS", "soon"),
        ("CONTEXTSHIFT_ESTIMATE_MARGIN", "0.6"),
        ("CONTEXTSHIFT_ESTIMATE_MARGIN", "-0.1"),
        ("CONTEXTSHIFT_ESTIMATE_MARGIN", "lots"),
        ("CONTEXTSHIFT_INSTANCE_ID", "api 1"),
        ("CONTEXTSHIFT_INSTANCE_ID", "x" * 33),
        ("CONTEXTSHIFT_HEARTBEAT_SECONDS", "0"),
        ("CONTEXTSHIFT_HEARTBEAT_SECONDS", "often"),
        ("CONTEXTSHIFT_HEARTBEAT_SECONDS", "30"),  # not shorter than the expiry's default, 30
        ("CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS", "-5"),
        ("CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS", "10"),  # not longer than the period's default, 10
        ("CONTEXTSHIFT_RELEASE_MEMORY", "maybe"),
    ],
)
def test_a_value_that_cannot_be_right_is_refused_with_its_name(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: value})


def test_the_newly_typed_settings_are_numbers_and_switches() -> None:
    settings = Settings.from_env(
        {
            "CONTEXTSHIFT_READ_CACHE_SECONDS": "0",
            "CONTEXTSHIFT_ESTIMATE_MARGIN": "0.5",
            "CONTEXTSHIFT_INSTANCE_ID": "api-1_b",
            "CONTEXTSHIFT_HEARTBEAT_SECONDS": "0.2",
            "CONTEXTSHIFT_HEARTBEAT_EXPIRY_SECONDS": "1",
            "CONTEXTSHIFT_RELEASE_MEMORY": "Off",
        }
    )
    assert (settings.read_cache_seconds, settings.estimate_margin, settings.instance_id) == (0.0, 0.5, "api-1_b")
    assert (settings.heartbeat_seconds, settings.heartbeat_expiry_seconds, settings.release_memory) == (0.2, 1.0, False)
    assert Settings.from_env({"CONTEXTSHIFT_RELEASE_MEMORY": "yes"}).release_memory is True
    assert Settings().release_memory is True


def _environment_reads(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that read the process environment: ``os.environ`` or ``environ`` (any use) and
    ``getenv`` calls."""
    lines = []
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")
        if attribute or (isinstance(node, ast.Name) and node.id in ("environ", "getenv")):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for alias in node.names if alias.name in ("environ", "getenv", "environb")]
    return lines


def test_no_module_but_settings_reads_the_environment() -> None:
    readers = {}
    for module in sorted((ROOT / "contextshift").rglob("*.py")):
        lines = _environment_reads(ast.parse(module.read_text(encoding="utf-8")))
        if lines:
            readers[str(module.relative_to(ROOT))] = lines
    assert list(readers) == ["contextshift/settings.py"], readers


def test_the_environment_check_sees_each_way_of_reading_it() -> None:
    source = "import os\nfrom os import environ\na = os.environ['X']\nb = os.getenv('Y')\nc = environ.get('Z')\n"
    assert _environment_reads(ast.parse(source)) == [2, 3, 4, 5]


def test_every_variable_the_package_names_is_a_setting_and_in_the_one_table() -> None:
    named: set[str] = set()
    for module in (ROOT / "contextshift").rglob("*.py"):
        named |= set(re.findall(r"CONTEXTSHIFT_[A-Z_]*[A-Z]", module.read_text(encoding="utf-8")))
    named -= {"CONTEXTSHIFT_KEYS"}  # a marker inside /v1 request bodies (proxy_fit.py), not a variable
    assert named == set(Settings.variables())
    table = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split("## Settings", 1)[1]
    documented = set(re.findall(r"^\| `(CONTEXTSHIFT_[A-Z_]+)` \|", table, re.M))
    assert documented == set(Settings.variables())


async def test_create_app_takes_its_settings_from_the_object_not_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTSHIFT_MAX_BODY_BYTES", "1000000")
    settings = Settings(max_body_bytes=2000, login_limit="100000/minute")
    app = create_app(f"sqlite:///{tmp_path / 'settings.db'}", admin_token=ADMIN_TOKEN, settings=settings)
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=bearer(ADMIN_TOKEN)) as http:
            small = await http.post("/api/v2/lorebooks", json={"name": "small"})
            large = await http.post("/api/v2/lorebooks", json={"name": "x" * 3000})
    assert small.status_code == 201, small.text
    assert large.status_code == 413 and large.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_create_app_passes_the_settings_to_the_services_it_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTSHIFT_COMPACTION_WAIT_SECONDS", "99")
    monkeypatch.setenv("CONTEXTSHIFT_PROXY_AUDIT_HOURS", "99")
    settings = Settings(compaction_wait_seconds=1.5, proxy_audit_hours=2.0)
    app = create_app("sqlite:///:memory:", admin_token=ADMIN_TOKEN, settings=settings)
    assert app.state.compactor.sync_wait == 1.5
    assert app.state.proxy.audit_ttl == timedelta(hours=2)
    assert app.state.settings is settings
    rules = app.state.rules
    assert app.state.generations.rules is rules and app.state.proxy.rules is rules
    assert app.state.compactor.rules is rules and rules == Rules()


def test_the_rules_carry_the_hosts_margin_and_embedder_settings() -> None:
    hosts = {"CONTEXTSHIFT_PROVIDER_HOSTS": " API.OpenAI.com. , *.internal ,", "CONTEXTSHIFT_ESTIMATE_MARGIN": "0.2"}
    rules = Rules.from_settings(Settings.from_env(hosts))
    assert (rules.provider_hosts, rules.estimate_margin, rules.embedder) == (
        ("api.openai.com", "*.internal"),
        0.2,
        None,
    )
    unknown = Settings.from_env({"CONTEXTSHIFT_EMBEDDINGS": "word2vec"})
    assert Rules.from_settings(unknown, embeddings=False).embedder is None  # a job worker loads none
    with pytest.raises(UnknownEmbeddings):
        Rules.from_settings(unknown)
    assert (NO_RULES.provider_hosts, NO_RULES.estimate_margin, NO_RULES.embedder) == ((), 0.10, None)
