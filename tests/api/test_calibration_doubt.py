"""T5: calibration a single bad report cannot break, through the service (SQLite, PostgreSQL).

The fake provider lies about usage the two ways real servers do: a count far below the prompt (cached tokens
left out, a truncated count) and a count equal to the model's window (a server that silently cuts the prompt
to its own context size). Neither teaches the factor, and both audits (the chat's and the endpoint's) say so.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Service
from tests.api.test_calibration import WINDOW, long_chat, ordinary
from tests.fakes import Reply

LIES = {"far-below": 100, "at-window": WINDOW}


async def calibration_of(service: Service, model_id: str) -> dict[str, Any]:
    return (await service.http.get(f"/api/v2/models/{model_id}")).json()["model"]["calibration"]  # type: ignore[no-any-return]


def call(turn: int) -> dict[str, Any]:
    """An endpoint call with a 120-message conversation (far over the 2,000-token window) and a new turn."""
    messages = [{"role": "user" if n % 2 == 0 else "assistant", "content": ordinary(n)} for n in range(120)]
    return {"model": "mystery-model", "messages": [*messages, {"role": "user", "content": f"turn {turn}"}]}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
async def test_an_endpoint_report_that_cannot_be_a_density_is_not_believed(service: Service, lie: str) -> None:
    ids = await service.setup_chat(model="mystery-model", context_window=WINDOW)
    service.fake.script(Reply("first", input_tokens=LIES[lie]), Reply("second"))
    first = await service.http.post("/v1/chat/completions", json=call(0))
    assert first.status_code == 200, first.text
    audit = (await service.http.get(f"/api/v2/proxy-audits/{first.headers['x-contextshift-audit']}")).json()["audit"]
    assert audit["usage"]["input_tokens"] == LIES[lie]
    [said] = [d for d in audit["diagnostics"] if "suspected truncation" in d]
    assert f"reported {LIES[lie]:,} prompt tokens" in said
    calibration = await calibration_of(service, ids["model"])
    assert (calibration["calls"], calibration["factor"]) == (0, 1.0)  # nothing learned from the lie
    second = await service.http.post("/v1/chat/completions", json=call(1))
    assert second.status_code == 200, second.text
    sent_first, sent_second = (len(r.messages) for r in service.fake.requests)
    assert sent_second == sent_first  # the same fit: the lie did not let four times as much through


async def test_a_chat_turns_lying_report_leaves_the_factor_and_the_audit_says_so(service: Service) -> None:
    ids = await long_chat(service)
    service.fake.script(Reply("fine", input_tokens=100))
    answered = await service.http.post(
        f"/api/v2/chats/{ids['chat']}/generate", json={"content": "and now?", "stream": False}
    )
    assert answered.status_code == 200, answered.text
    audit = (await service.http.get(f"/api/v2/chats/{ids['chat']}/context-audit")).json()["audit"]
    assert audit["status"] == "completed" and audit["usage"]["input_tokens"] == 100
    assert any("suspected truncation (report-far-below-count)" in d for d in audit["diagnostics"])
    assert (await calibration_of(service, ids["model"]))["calls"] == 0
