"""Issue 25, point 13, over a real socket on SQLite and PostgreSQL: a provider's ``kind`` can be patched (and
changing it clears the key), a body-less ``POST /compact`` is served (what docs/limits.md says: only a body
that is not JSON is 415), and ``serve`` narrows a data directory found with mode 0755 to 0700."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx

from tests.api.conftest import ADMIN_TOKEN, Service, bearer


async def test_a_providers_kind_can_be_patched_and_changing_it_clears_the_key(service: Service) -> None:
    ids = await service.setup_chat()
    path = f"/api/v2/providers/{ids['provider']}"
    assert (await service.http.get(path)).json()["provider"]["has_api_key"] is True
    same = await service.http.patch(path, json={"kind": "openai"})  # no change: the key stays
    assert (same.status_code, same.json()["provider"]["has_api_key"]) == (200, True)
    moved = await service.http.patch(path, json={"kind": "anthropic"})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["provider"]["kind"], moved.json()["provider"]["has_api_key"]) == ("anthropic", False)
    keyed = await service.http.patch(path, json={"kind": "openai", "api_key": "sk-new-key-123"})
    assert (keyed.json()["provider"]["kind"], keyed.json()["provider"]["has_api_key"]) == ("openai", True)
    wrong = await service.http.patch(path, json={"kind": "telepathy"})
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (422, "VALIDATION")
    assert (await service.http.get(path)).json()["provider"]["kind"] == "openai"


async def test_a_body_less_compact_is_served_and_a_form_body_is_415(service: Service) -> None:
    ids = await service.setup_chat()
    compact = f"/api/v2/chats/{ids['chat']}/compact"
    plain = await service.http.post(compact)
    assert plain.status_code == 200, plain.text
    form = await service.http.post(compact, data={"a": "b"})
    assert (form.status_code, form.json()["error"]["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")


def test_serve_narrows_a_data_directory_found_with_mode_0755(tmp_path: Path) -> None:
    from tests.serving import ServeProcess

    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    env = {"CONTEXTSHIFT_DATA_DIR": str(data), "CONTEXTSHIFT_ADMIN_TOKEN": ADMIN_TOKEN}
    env["CONTEXTSHIFT_DATABASE_URL"] = ""  # the default: the data directory's SQLite file
    with ServeProcess("", tmp_path / "serve.log", env=env) as server:
        assert httpx.get(f"{server.url}/api/v2/me", headers=bearer(ADMIN_TOKEN)).status_code == 200
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "contextshift.db").stat().st_mode) == 0o600
