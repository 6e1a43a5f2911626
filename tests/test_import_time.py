"""``import contextshift`` stays light (N4): numpy, bm25s and the embedder load when first used, not on import.

Each case runs a fresh interpreter (this test process has long since loaded everything) on this checkout's
code and reads back which heavy modules are in ``sys.modules``. What is checked is which modules load, not how
long they take: timing is the benchmark's business (``python -X importtime -c "import contextshift"``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What a library user must not pay for until a strategy that needs it runs.
HEAVY = ("numpy", "bm25s", "onnxruntime", "tqdm", "Stemmer")

_PROBE = """
import json, sys
import contextshift
loaded = lambda: sorted(m for m in {heavy!r} if m in sys.modules)
out = {{"file": contextshift.__file__, "on_import": loaded()}}
{body}
print(json.dumps(out))
"""


def _probe(body: str = "") -> dict[str, object]:
    code = _PROBE.format(heavy=HEAVY, body=body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT, check=False
    )
    assert run.returncode == 0, run.stderr
    out: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(out["file"]).startswith(str(ROOT / "contextshift")), out["file"]  # this checkout's code ran
    return out


_CHAT = """
from contextshift import Message, shift_context, shift_with_strategy
chat = [Message(role="system", content="You are terse.")]
for n in range(40):
    chat.append(Message(role="user", content=f"Tell me about the lighthouse number {n} on the coast."))
    chat.append(Message(role="assistant", content=f"Lighthouse {n} stands on a rock and was built in 18{n:02d}."))
chat.append(Message(role="user", content="When was lighthouse 7 built?", source="input"))
count = lambda text: len(text.split())
"""


def test_importing_contextshift_loads_no_numpy_bm25s_onnxruntime_or_tqdm() -> None:
    assert _probe()["on_import"] == []


def test_shift_context_and_the_host_truncate_path_load_none_of_them() -> None:
    body = (
        _CHAT
        + """
shift_context(chat, count, 200)
result = shift_with_strategy(chat, count, 200, strategy="truncate")
out["strategy"] = result.strategy
out["after"] = loaded()
"""
    )
    out = _probe(body)
    assert out["strategy"] == "truncate"
    assert out["after"] == []


def test_the_recall_strategy_loads_bm25_on_first_use_and_runs_itself_not_a_fallback() -> None:
    body = (
        _CHAT
        + """
result = shift_with_strategy(chat, count, 200, strategy="recall")
out["strategy"] = result.strategy
out["diagnostics"] = result.diagnostics
out["after"] = loaded()
"""
    )
    out = _probe(body)
    assert out["on_import"] == []
    assert out["strategy"] == "recall", out["diagnostics"]
    assert "bm25s" in out["after"]  # type: ignore[operator]
