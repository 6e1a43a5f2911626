"""T5: the real count and the limit read from a context-length rejection (numbers only, never its text)."""

from __future__ import annotations

import json
import pickle

import httpx
import pytest

from contextshift.providers import ProviderError
from contextshift.providers.errors import context_numbers, error_from_event, error_from_status


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9013 tokens. "
            "Please reduce the length of the messages.",
            (9013, 8192),
        ),
        (
            "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (1,900 in the "
            "messages, 200 in the completion).",
            (1900, 2048),
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", (210000, 200000)),
        (
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input",
            (188240, 200000),
        ),
        ("the request exceeds the available context size", (None, None)),
    ],
)
def test_counts_are_read_from_every_providers_wording(message: str, expected: tuple[int | None, int | None]) -> None:
    assert context_numbers({"error": {"message": message}}) == expected


def test_llama_cpp_fields_are_read() -> None:
    payload = {"error": {"message": "exceeds the available context size", "n_prompt_tokens": 4140, "n_ctx": 4096}}
    assert context_numbers(payload) == (4140, 4096)


def test_the_error_carries_the_numbers_and_no_text() -> None:
    message = "maximum context length is 2000 tokens. However, your messages resulted in 3077 tokens. sk-SECRET"
    body = json.dumps({"error": {"message": message, "code": "context_length_exceeded"}}).encode()
    error = error_from_status(400, body, httpx.Headers())
    assert error.code == "PROVIDER_CONTEXT_LENGTH"
    assert (error.reported_tokens, error.reported_limit) == (3077, 2000)
    assert "SECRET" not in str(error) + repr(error) + str(error.params)
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, ProviderError) and copy.reported_tokens == 3077 and copy.reported_limit == 2000


def test_a_stream_error_event_carries_the_numbers_too() -> None:
    error = error_from_event(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 5000 tokens > 4096 maximum"},
        }
    )
    assert error.code == "PROVIDER_CONTEXT_LENGTH" and error.reported_tokens == 5000 and error.reported_limit == 4096
