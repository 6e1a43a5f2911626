"""A local fake LLM provider that speaks OpenAI Chat Completions and Anthropic Messages over real HTTP.

The server is uvicorn serving a raw ASGI app on ``127.0.0.1`` (port chosen by the OS) in a background
thread, so it works from sync and async tests alike and from any event loop.

Register the fixtures in a conftest::

    from tests.fakes.fixtures import fake_provider, fake_provider_server  # noqa: F401

Then::

    async def test_reply(fake_provider):
        fake_provider.script(
            Reply("Hello!", input_tokens=120, cached_input_tokens=100, output_tokens=3),
            Error(429, retry_after=0),                       # body and a header carry SECRET
            Error(500),
            Error.context_length(),                          # 400, "prompt is too long", context_length_exceeded
            Reply(tool_calls=[FakeToolCall("call_1", "search", {"q": "x"})], finish_reason="tool_calls"),
            Reply("slow", delay=2.0),                        # for read timeouts
            Reply("a b c d", chunk_delay=0.05),              # slow stream (cancellation tests)
            Reply("a b c d", abort_after=2),                 # the connection drops mid-stream
            Raw(200, b"not json"),                           # a malformed answer
        )
        client = make_client("openai", fake_provider.base_url, "sk-test")   # or "anthropic"
        ...
        request = fake_provider.last                       # RecordedRequest: path, headers, body, json, messages
        assert request.json["max_tokens"] == 256
        assert len(fake_provider.requests) == 1

* ``base_url`` serves every kind: ``{base_url}/chat/completions`` (also ``/v1/chat/completions``) is OpenAI,
  ``{base_url}/v1/messages`` is Anthropic; ``GET .../models`` lists ``fake-model`` (or ``model_list``), and
  ``script_models(Error(503), Reply(hold=threading.Event()), ...)`` scripts its answers (``model_requests``).
* Each request takes the next scripted item; with an empty script the answer is ``Reply()``: the text
  ``"Echo: <last user message>"``, finish ``stop``, usage estimated from the request (~4 chars a token).
  Streaming follows the request's ``stream`` flag (OpenAI usage chunk only with ``include_usage``).
* ``expected_api_key = "sk-..."`` makes the fake answer 401 to any other key.
* ``strict`` (default on) rejects with 400 what the real API would (Anthropic: roles not alternating, first
  turn not user, missing ``max_tokens`` or ``anthropic-version``, unpaired tool_use/tool_result, empty text
  blocks; OpenAI: missing model/messages, tool message without ``tool_call_id``); see ``RecordedRequest.rejected``.
* ``RecordedRequest.disconnected`` / ``.completed`` are ``threading.Event``s; poll with
  ``await fake_provider.await_for(lambda: request.disconnected.is_set())`` (``wait_for`` in sync tests).
* Faults before any answer: :func:`closed_port_url` (refused), :func:`unresolvable_url` (DNS: a ``.invalid``
  host), :func:`tls_to_plain_url` (TLS: ``https://`` to the fake's plain-HTTP port).
* ``count_as(chars_per_token=2.6, window=2000, model=None)`` makes the fake count prompts its own way
  (:class:`Counting`; ``count_text=`` for an exact encoding): a prompt plus ``max_tokens`` over the window
  gets the 400 ``context_length_exceeded`` a real provider sends, stating the real count ("your messages
  resulted in N tokens" / "prompt is too long: N tokens > W maximum"), and replies report the real count
  as usage. ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` by the same count.
  ``RecordedRequest.over_limit`` marks the rejected requests. ``reset()`` clears it.
* For a server of your own (e.g. a benchmark): ``with FakeProvider() as fake: ...``.
"""

from .script import SECRET, Error, FakeToolCall, Raw, RecordedRequest, Reply, ScriptItem
from .server import FakeProvider, closed_port_url, tls_to_plain_url, unresolvable_url
from .tokens import Counting

__all__ = [
    "SECRET",
    "Counting",
    "Error",
    "FakeProvider",
    "FakeToolCall",
    "Raw",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "closed_port_url",
    "tls_to_plain_url",
    "unresolvable_url",
]
