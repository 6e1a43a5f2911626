"""The limits every layer shares: the default reply reserve and the legacy compaction ratio."""

from __future__ import annotations

import pytest

from contextshift.core.limits import DEFAULT_REPLY_RESERVE, ratio_ok, reply_reserve
from contextshift.pipeline.assemble import Sources
from contextshift.pipeline.run import PipelineRequest, PromptBudgetExceeded, ReplyReserveTooLarge, run_pipeline
from contextshift.tokenizers import get_tokenizer


@pytest.mark.parametrize(
    ("window", "configured", "max_output", "expected"),
    [
        (128_000, None, None, DEFAULT_REPLY_RESERVE),  # a large model: 1,024
        (128_000, 0, 512, 512),  # the model's output limit is smaller
        (1_000, None, 4_096, 250),  # a small model: a quarter of its window, not 1,024 (which leaves nothing)
        (2, None, None, 1),  # never 0
        (1_000, 300, 100, 300),  # a bot's own reserve is taken as it is
    ],
)
def test_the_default_reply_reserve_is_the_smallest_of_1024_the_output_limit_and_a_quarter_of_the_window(
    window: int, configured: int | None, max_output: int | None, expected: int
) -> None:
    assert reply_reserve(window, configured, max_output) == expected


def test_a_small_model_with_the_default_reserve_still_gets_a_prompt() -> None:
    window = 1_000
    request = PipelineRequest(
        sources=Sources(user_input="hello"),
        profile=get_tokenizer("gpt-4o"),
        context_limit=window,
        response_reserve=reply_reserve(window),
    )
    assert run_pipeline(request).budget["response_reserve"] == 250


@pytest.mark.parametrize("reserve", [1_000, 1_024])
def test_a_reserve_at_or_above_the_window_fails_with_its_own_message_naming_both(reserve: int) -> None:
    request = PipelineRequest(
        sources=Sources(user_input="hi"), profile=get_tokenizer("gpt-4o"), context_limit=1_000, response_reserve=reserve
    )
    with pytest.raises(ReplyReserveTooLarge) as caught:
        run_pipeline(request)
    assert isinstance(caught.value, PromptBudgetExceeded)
    assert caught.value.code == "RESPONSE_RESERVE_TOO_LARGE"
    assert f"({reserve} tokens)" in caught.value.message and "(1000 tokens)" in caught.value.message
    assert "protected prompt needs 0 tokens" not in str(caught.value)


@pytest.mark.parametrize(("value", "ok"), [(0.5, True), (0, False), (1, False), (1.0, False), (True, False)])
def test_the_ratio_is_strictly_between_zero_and_one(value: object, ok: bool) -> None:
    assert ratio_ok(value) is ok
