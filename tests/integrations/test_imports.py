"""The adapters are imported only when used, and each says which extra to install when its framework is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib.abc, json, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None

sys.meta_path.insert(0, Missing())
try:
    import contextshift.integrations.{module}
except ImportError as error:
    print(json.dumps({{"type": type(error).__name__, "code": getattr(error, "code", None), "text": str(error),
                       "import_error": isinstance(error, ImportError)}}))
"""


def run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return done.stdout.strip()


def test_importing_contextshift_imports_no_framework() -> None:
    loaded = run(
        "import sys, contextshift, contextshift.integrations; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain', 'langchain_core', 'langgraph', "
        "'pydantic_ai', 'agents'}))"
    )
    assert loaded == "[]"


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("langchain", "langchain", "langchain"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("openai_agents", "agents", "openai-agents"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(module: str, blocked: str, extra: str) -> None:
    answer = json.loads(run(BLOCK.format(module=module, blocked=blocked)))
    assert answer["type"] == "IntegrationUnavailable" and answer["import_error"] is True
    assert answer["code"] == "INTEGRATION_NOT_INSTALLED"
    assert f"pip install 'contextshift[{extra}]'" in answer["text"]
