"""The public API documents itself: every exported callable says Args, Returns and Raises where they apply.

As Haystack and httpx do: a function with parameters has ``Args:``, one that returns something has
``Returns:``, one whose own body raises has ``Raises:``; a class made with arguments has ``Args:``.
"""

from __future__ import annotations

import inspect
import pydoc
from typing import Any, Protocol

import pytest

import contextshift
import contextshift.core

EXPORTED: dict[str, Any] = {}
for module in (contextshift, contextshift.core):
    for export in module.__all__:
        value = getattr(module, export)
        if inspect.isfunction(value) or inspect.isclass(value):
            EXPORTED.setdefault(export, value)


def _parameters(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


def _missing(value: Any) -> list[str]:
    doc = inspect.getdoc(value) or ""
    if not doc.strip():
        return ["a docstring"]
    missing = []
    if inspect.isclass(value):
        if Protocol in value.__mro__:  # a protocol is described, not constructed
            return []
        if _parameters(value.__init__) and "Args:" not in doc:
            missing.append("Args:")
        return missing
    source = inspect.getsource(value)
    body = source.split('"""', 2)[-1] if source.count('"""') >= 2 else source
    if _parameters(value) and "Args:" not in doc:
        missing.append("Args:")
    returns = inspect.signature(value).return_annotation
    if returns not in ("None", None, inspect.Signature.empty) and "Returns:" not in doc:
        missing.append("Returns:")
    if "raise " in body and "Raises:" not in doc:
        missing.append("Raises:")
    return missing


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_every_exported_callable_documents_its_arguments_result_and_errors(name: str) -> None:
    assert _missing(EXPORTED[name]) == [], f"{name}'s docstring lacks {_missing(EXPORTED[name])}"


def _public_members() -> dict[str, Any]:
    """Every public method and property that an exported class defines itself, as ``Class.member``."""
    members: dict[str, Any] = {}
    for name, value in EXPORTED.items():
        if not inspect.isclass(value):
            continue
        for attribute, member in vars(value).items():
            if attribute.startswith("_"):
                continue
            if isinstance(member, classmethod | staticmethod):
                member = member.__func__
            if isinstance(member, property) or inspect.isfunction(member):
                members[f"{name}.{attribute}"] = member
    return members


MEMBERS = _public_members()


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_every_public_method_and_property_of_an_exported_class_is_documented(name: str) -> None:
    member = MEMBERS[name]
    if isinstance(member, property):  # read like an attribute: it says what it is
        assert (member.__doc__ or "").strip(), f"{name} has no docstring"
        return
    assert _missing(member) == [], f"{name}'s docstring lacks {_missing(member)}"


def test_help_of_shift_context_reads_as_a_manual_page() -> None:
    page = pydoc.render_doc(contextshift.shift_context, renderer=pydoc.plaintext)
    for section in ("Args:", "count_tokens:", "budget:", "Returns:", "ShiftResult", "Raises:", "TokenBudgetExceeded"):
        assert section in page
    assert page.index("Args:") < page.index("Returns:") < page.index("Raises:")
