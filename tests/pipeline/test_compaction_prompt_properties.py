"""After compaction, the prompt always fits (C2, C8, S3/S6): hypothesis over generated sessions.

Each generated session is compacted once (selection, a summary of random size that passed validation, the
commit), then the pipeline builds the next prompt from the compacted history: it fits the budget, or
``TOKEN_BUDGET_EXCEEDED`` is raised exactly because the protected context alone does not fit; no message is
lost or shown twice, and no tool exchange is split.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextshift import get_tokenizer
from contextshift.core.compaction import select_fold, validate_summary
from contextshift.core.messages import Message
from contextshift.pipeline import PipelineRequest, PromptBudgetExceeded, Sources, run_pipeline
from tests.core.test_compaction_properties import commit, ref_groups, sessions

PROFILE = get_tokenizer(None)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=sessions(),
    window=st.integers(min_value=64, max_value=6000),
    summary_words=st.integers(min_value=1, max_value=80),
)
def test_the_prompt_after_compaction_always_fits(history: list[Message], window: int, summary_words: int) -> None:
    selection = select_fold(history, target_tokens=int(window * 0.4), input_budget=max(64, window), counter=PROFILE)
    compacted = history
    if not selection.empty:
        text = " ".join(f"fact{n}" for n in range(summary_words))
        if validate_summary(text, "stop", selection.fold_tokens, PROFILE.count(text) + 8).ok:
            compacted = commit(history, selection, "summary-new")
            folded = {m.id for m in selection.fold}
            kept = [m.id for m in compacted if m.id != "summary-new"]
            assert not folded & set(kept)  # nothing shown twice
            assert sorted(folded | set(kept)) == sorted(m.id for m in history)  # nothing lost
            for group in ref_groups(history):
                ids = {history[p].id for p in group}
                assert ids <= folded or not ids & folded  # no exchange split
    reserve = max(1, window // 10)
    request = PipelineRequest(
        sources=Sources(history=compacted), profile=PROFILE, context_limit=window, response_reserve=reserve
    )
    try:
        result = run_pipeline(request)
    except PromptBudgetExceeded as error:
        assert error.params["prompt_tokens"] > window - reserve
        return
    assert result.budget["prompt_tokens"] <= window - reserve
