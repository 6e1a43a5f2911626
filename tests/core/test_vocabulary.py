"""One vocabulary (issue 24): the statuses and reasons of ``core/vocabulary.py`` are the ones the storage checks,
the service emits and the web UI explains: ``web/static/js/words.js`` has a key for every reason the code can
emit and none that nothing emits."""

from __future__ import annotations

import re
from pathlib import Path

from contextshift.core import vocabulary as v
from contextshift.core.compaction import plausibility
from contextshift.service import commands, summarizer
from contextshift.storage import tables

WORDS = Path(v.__file__).resolve().parents[1] / "web" / "static" / "js" / "words.js"


def js_keys(name: str) -> set[str]:
    """The keys of ``export const NAME = {...}`` in words.js (one ``key: "words"`` per line)."""
    source = WORDS.read_text(encoding="utf-8")
    found = re.search(rf"export const {name} = \{{(.*?)\n?\}};", source, re.S)
    assert found is not None, f"words.js has no {name}"
    return set(re.findall(r'^\s*"?([A-Za-z_][\w.-]*)"?:\s', found.group(1), re.M))


def test_words_js_explains_every_audit_reason_and_no_other() -> None:
    assert js_keys("REASON_WORDS") == set(v.AUDIT_REASONS)


def test_words_js_and_the_status_command_explain_every_reason_compaction_is_off() -> None:
    assert js_keys("COMPACTION_REASONS") == set(v.COMPACTION_OFF_REASONS) == set(commands.OFF_WORDS)


def test_words_js_and_the_compact_command_explain_every_summary_rejection() -> None:
    assert js_keys("REJECTION_WORDS") == set(v.SUMMARY_REJECTIONS) == set(commands.REJECTION_WORDS)


def test_words_js_names_every_compaction_trigger() -> None:
    assert js_keys("TRIGGER_WORDS") == set(v.COMPACTION_TRIGGERS)


def test_the_emitters_use_the_vocabulary() -> None:
    assert {
        plausibility.OTHER_SCRIPT,
        plausibility.OTHER_LANGUAGE,
        plausibility.FEW_FACTS,
        plausibility.REFUSAL,
    } == set(v.SUMMARY_REJECTIONS)
    assert set(summarizer.EXPLANATIONS) == set(v.COMPACTION_UNAVAILABLE_REASONS)
    assert set(v.COMPACTION_OFF_REASONS) == {*v.COMPACTION_UNAVAILABLE_REASONS, "disabled", "cooldown"}
    assert set(v.FINISHED_AUDIT_STATUSES) == set(v.AUDIT_STATUSES) - {"prepared"}
    assert set(v.COMPACTION_OUTCOMES) == set(v.COMPACTION_STATUSES) - {"running"}


def test_the_storage_checks_hold_the_same_statuses() -> None:
    assert tables.AUDIT_STATUSES == v.AUDIT_STATUSES
    assert tables.COMPACTION_STATUSES == v.COMPACTION_STATUSES
    assert tables.JOB_STATUSES == v.JOB_STATUSES
    assert tables.ATTEMPT_STATUSES == v.ATTEMPT_STATUSES
    assert set(v.SUCCESS.values()) <= {*v.AUDIT_STATUSES, *v.JOB_STATUSES, *v.COMPACTION_STATUSES}
