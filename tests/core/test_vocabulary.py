"""One vocabulary (issue 24): the statuses and reasons of ``core/vocabulary.py`` are the ones the storage checks,
the service emits and the web UI explains: ``web/static/js/words.js`` has a key for every reason the code can
emit and none that nothing emits."""

from __future__ import annotations

import re
from pathlib import Path

from contextshift.api.error_codes import ERROR_CODES
from contextshift.core import calibration
from contextshift.core import vocabulary as v
from contextshift.core.compaction import plausibility, policy, rendering, selection, validation
from contextshift.service import commands, summarizer
from contextshift.storage import tables
from contextshift.storage.repositories import GENERATION_INTERRUPTED

WORDS = Path(v.__file__).resolve().parents[1] / "web" / "static" / "js" / "words.js"


KEBAB = re.compile(r"[a-z]+(-[a-z]+)*")
#: Error codes words.js explains that are not in the envelope's table: an audit's or a reply's stored code for a
#: stopped or cut-off turn, and the browser's own when the service cannot be reached.
STORED_OR_CLIENT_CODES = {"GENERATION_CANCELLED", GENERATION_INTERRUPTED, "NETWORK"}


def js_block(name: str) -> str:
    source = WORDS.read_text(encoding="utf-8")
    found = re.search(rf"export const {name} = (?:Object\.freeze\()?\{{(.*?)\n?\}}\)?;", source, re.S)
    assert found is not None, f"words.js has no {name}"
    return found.group(1)


def js_keys(name: str) -> set[str]:
    """The keys of ``export const NAME = {...}`` in words.js (one ``key: "words"`` per line)."""
    return set(re.findall(r'^\s*"?([A-Za-z_][\w.-]*)"?:\s', js_block(name), re.M))


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
    assert summarizer.REASONS == v.COMPACTION_UNAVAILABLE_REASONS
    assert set(v.FINISHED_AUDIT_STATUSES) == set(v.AUDIT_STATUSES) - {"prepared"}
    assert set(v.COMPACTION_OUTCOMES) == set(v.COMPACTION_STATUSES) - {"running"}


def test_the_storage_checks_hold_the_same_statuses() -> None:
    assert tables.AUDIT_STATUSES == v.AUDIT_STATUSES
    assert tables.COMPACTION_STATUSES == v.COMPACTION_STATUSES
    assert tables.JOB_STATUSES == v.JOB_STATUSES
    assert tables.ATTEMPT_STATUSES == v.ATTEMPT_STATUSES


STATUS_SETS = {
    "audit": v.AUDIT_STATUSES,
    "compaction": v.COMPACTION_STATUSES,
    "outcome": v.COMPACTION_OUTCOMES,
    "job": v.JOB_STATUSES,
    "attempt": v.ATTEMPT_STATUSES,
}


def test_every_status_set_is_built_from_the_same_eight_words() -> None:
    assert len(v.STATUS_WORDS) == len(set(v.STATUS_WORDS)) == 8
    for statuses in STATUS_SETS.values():
        assert set(statuses) <= set(v.STATUS_WORDS)
    assert set(v.FAILED_ATTEMPT_STATUSES) == set(v.ATTEMPT_STATUSES) - {v.RUNNING, v.COMPLETED}
    assert set(v.ENDED_JOB_STATUSES) == set(v.JOB_STATUSES) - {v.QUEUED, v.RUNNING}


def test_success_and_failure_are_one_word_in_every_set_that_ends() -> None:
    for name, statuses in STATUS_SETS.items():
        assert v.COMPLETED in statuses, name
        assert v.FAILED in statuses, name
        assert not {"ok", "succeeded", "error", "noop"} & set(statuses), name


def test_the_renamed_statuses_lead_to_the_words_of_today() -> None:
    sets = {"compaction_logs": v.COMPACTION_STATUSES, "jobs": v.JOB_STATUSES, "job_attempts": v.ATTEMPT_STATUSES}
    for table, renames in v.RENAMED_STATUSES.items():
        assert set(renames.values()) <= set(sets[table])
        assert not set(renames) & set(sets[table])


def test_words_js_spells_the_statuses_as_the_vocabulary() -> None:
    pairs = dict(re.findall(r'^\s*([A-Z_]+):\s*"([a-z-]+)",?$', js_block("STATUS"), re.M))
    assert pairs == {word.upper(): word for word in v.STATUS_WORDS}


def test_every_reason_code_is_kebab_case() -> None:
    reasons = {
        *v.AUDIT_REASONS,
        *v.COMPACTION_OFF_REASONS,
        *v.SUMMARY_REJECTIONS,
        *v.COMPACTION_SKIP_REASONS,
        *v.PARTIAL_REASONS,
        *v.RENAMED_REASONS.values(),
        policy.WINDOW_UNKNOWN,
        policy.BELOW_TRIGGER,
        policy.BACKGROUND_TRIGGER,
        policy.SYNC_TRIGGER,
        policy.OVER_SYNC_REACH,
        policy.LEGACY_THRESHOLD,
        selection.SELECTED,
        selection.BUDGET_LIMITED,
        selection.BELOW_TARGET,
        selection.NOTHING_TO_FOLD,
        validation.EMPTY,
        validation.TRUNCATED,
        validation.NOT_SMALLER,
        validation.UNFAITHFUL,
        rendering.WINDOW_TOO_SMALL,
        rendering.INPUT_OVERFLOW,
        calibration.AT_WINDOW,
        calibration.FAR_BELOW,
    }
    assert len(reasons) == 49
    assert sorted(r for r in reasons if not KEBAB.fullmatch(r)) == []
    assert policy.OVER_SYNC_REACH in v.COMPACTION_SKIP_REASONS
    assert set(v.RENAMED_REASONS.values()) == {v.PROVIDER_ERROR, calibration.AT_WINDOW, calibration.FAR_BELOW}


def test_words_js_explains_only_codes_the_service_or_the_browser_gives() -> None:
    assert js_keys("ERROR_WORDS") - set(ERROR_CODES) == STORED_OR_CLIENT_CODES
