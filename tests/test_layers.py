"""The package's layers depend inward only: the core on nothing else, no adapter in a circle with another.

Read from the source (every ``import`` and ``from ... import`` of every module), so a new import that breaks
the layering fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "contextshift"


def _layer_of(module: Path) -> str:
    parts = module.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py") if len(parts) > 1 else "__init__"


def _imported_layers(module: Path) -> set[str]:
    """The top-level subpackages of contextshift that ``module`` imports."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    depth = len(module.relative_to(PACKAGE).parts) - 1  # how many levels below contextshift/
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names = [node.module or ""]
            else:
                up = node.level - 1
                if up > depth:
                    continue
                base = list(module.relative_to(PACKAGE).parts[: depth - up])
                target = [*base, *(node.module.split(".") if node.module else [])]
                # ``from .. import x`` at the top imports from the package's own __init__.
                names = ["contextshift." + ".".join(target or ["__init__"])]
        for name in names:
            if name.startswith("contextshift."):
                found.add(name.split(".")[1])
    return found


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module in PACKAGE.rglob("*.py"):
        layer = _layer_of(module)
        edges.setdefault(layer, set()).update(_imported_layers(module) - {layer})
    return edges


def test_the_core_imports_nothing_else_from_the_package() -> None:
    assert _edges()["core"] == set()


@pytest.mark.parametrize("layer", ["api", "web", "service", "storage", "providers", "pipeline", "jobs", "embeddings"])
def test_no_layer_is_in_a_circle(layer: str) -> None:
    edges = _edges()
    seen: set[str] = set()
    todo = list(edges.get(layer, ()))
    while todo:
        current = todo.pop()
        if current in seen or current == "__init__":
            continue
        seen.add(current)
        todo.extend(edges.get(current, ()))
    assert layer not in seen, f"{layer} reaches itself through {sorted(seen)}"


def test_the_web_ui_does_not_import_the_api() -> None:
    assert "api" not in _edges()["web"]
