"""Issue 25, point 12 (the server never cuts silently), through the service over a real socket on SQLite and
PostgreSQL: a chat turn or a ``/v1`` call to a local server whose own context is smaller than the model's
configured window is fitted to the server's context, and the audit says so; a server that does not say changes
nothing."""

from __future__ import annotations

import pytest

from tests.api.conftest import Service
from tests.api.test_calibration import ordinary

CONFIGURED = 8000
MESSAGES = 120  # about 3,000 tokens: inside the configured window, far over a 2,000-token server


@pytest.mark.parametrize("server", [None, ("llama.cpp", 2000), ("ollama", 2000)], ids=["silent", "llama.cpp", "ollama"])
async def test_a_turn_is_fitted_to_a_smaller_server_context_and_the_audit_says_so(
    service: Service, server: tuple[str, int] | None
) -> None:
    service.fake.server_context = server
    service.fake.model_list = [{"id": "mystery-model", "object": "model"}]
    ids = await service.setup_chat(
        model="mystery-model", context_window=CONFIGURED, compaction_enabled=False, response_reserve=512
    )
    for n in range(MESSAGES):
        role = "user" if n % 2 == 0 else "assistant"
        await service.post(f"/api/v2/chats/{ids['chat']}/messages", {"role": role, "content": ordinary(n)})
    answered = await service.post(
        f"/api/v2/chats/{ids['chat']}/generate", {"content": "and now?", "stream": False}, 200
    )
    assert answered["message"]["content"]
    sent = service.fake.last.body["messages"]
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    said = [d for d in audit["diagnostics"] if "tokens of context" in d]
    if server is None:
        assert len(sent) == MESSAGES + 1 and said == []
        return
    source = "llama.cpp /props" if server[0] == "llama.cpp" else "Ollama /api/ps"
    assert said == [
        f"the server runs this model with 2,000 tokens of context ({source}), less than its configured window "
        "of 8,000: prompts are fitted to 2,000"
    ]
    assert len(sent) < MESSAGES // 2  # the 1,488-token budget, not the 7,488 one
    assert sent[-1] == {"role": "user", "content": "and now?"}
    assert audit["budget"]["prompt_tokens"] <= 2000 - 512


@pytest.mark.parametrize("server", [None, ("llama.cpp", 2000), ("ollama", 2000)], ids=["silent", "llama.cpp", "ollama"])
async def test_an_endpoint_call_is_fitted_to_a_smaller_server_context_and_its_audit_says_so(
    service: Service, server: tuple[str, int] | None
) -> None:
    service.fake.server_context = server
    service.fake.model_list = [{"id": "mystery-model", "object": "model"}]
    await service.setup_chat(model="mystery-model", context_window=CONFIGURED, compaction_enabled=False)
    history = [{"role": "user" if n % 2 == 0 else "assistant", "content": ordinary(n)} for n in range(MESSAGES)]
    call = {"model": "mystery-model", "max_tokens": 512, "messages": [*history, {"role": "user", "content": "now?"}]}
    answered = await service.http.post("/v1/chat/completions", json=call)
    assert answered.status_code == 200, answered.text
    sent = service.fake.last.body["messages"]
    audit_id = answered.headers["x-contextshift-audit"]
    audit = (await service.http.get(f"/api/v2/proxy-audits/{audit_id}")).json()["audit"]
    said = [d for d in audit["diagnostics"] if "tokens of context" in d]
    if server is None:
        assert len(sent) == MESSAGES + 1 and said == []
        return
    source = "llama.cpp /props" if server[0] == "llama.cpp" else "Ollama /api/ps"
    assert said == [
        f"the server runs this model with 2,000 tokens of context ({source}), less than its configured window "
        "of 8,000: prompts are fitted to 2,000"
    ]
    assert len(sent) < MESSAGES // 2  # fitted to 2,000 - 512 tokens, not to 8,000 - 512
    assert sent[-1] == {"role": "user", "content": "now?"}
