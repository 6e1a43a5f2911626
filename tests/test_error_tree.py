"""One error tree (httpx's model): every exception contextshift defines derives from ContextShiftError and
has a stable code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import contextshift
from contextshift.core.errors import ContextShiftError

CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(contextshift.__path__, "contextshift."):
        if ".migrations" in module_info.name:
            continue
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("contextshift."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_error_class_derives_from_context_shift_error_and_has_a_code() -> None:
    classes = _exception_classes()
    assert len(classes) > 10
    strays = [c.__qualname__ for c in classes if not issubclass(c, ContextShiftError)]
    assert strays == []
    for cls in classes:
        code = getattr(cls, "code", None)
        assert isinstance(code, str) and (CODE.match(code) or code == "compaction.model_unavailable"), cls
