"""Numbering a prompt's audit entries keeps every other field (the pipeline numbers them without
``dataclasses.replace``, so a new field of ``AuditEntry`` must be copied there too)."""

from __future__ import annotations

from dataclasses import fields, replace

from contextshift.pipeline.audit import AuditEntry, _numbered


def test_numbering_an_entry_changes_its_order_and_nothing_else() -> None:
    entry = AuditEntry(
        identifier="m1",
        role="user",
        source="history",
        content="hello",
        tokens=12,
        included=False,
        reason="context-shift",
        order=0,
        name="ann",
        relevance=0.5,
        stands_for=["a", "b"],
    )
    assert len(fields(AuditEntry)) == 11  # a new field: copy it in _numbered, then count it here
    assert _numbered(entry, 7) == replace(entry, order=7)
    assert _numbered(entry, 7).order == 7
