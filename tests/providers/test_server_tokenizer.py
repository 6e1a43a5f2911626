"""T5: a provider's own tokenizer endpoint, probed and used (llama.cpp, llama-cpp-python and vLLM dialects).

The fake serves each dialect over a real socket with a tokenizer whose counts are knowable (see
``tests/fakes/tokenizer``): its ChatML template costs 3 tokens a message and 2 to prime the reply.
"""

from __future__ import annotations

import httpx
import pytest

from contextshift.core import ApproximateProfile, Message
from contextshift.core.fetched import ChatFraming
from contextshift.tokenizers.server import ServerTokenizers, probe, server_root
from tests.fakes import tokenizer as fake_tokenizer
from tests.fakes.server import FakeProvider, closed_port_url

DIALECTS = ["llama-cpp-python", "llama.cpp", "vllm"]


def test_the_root_is_beside_v1() -> None:
    assert server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert server_root("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_probe_finds_the_dialect_and_measures_the_template_exactly(
    dialect: str, fake_provider: FakeProvider
) -> None:
    fake_provider.tokenizer = dialect
    async with httpx.AsyncClient(timeout=30) as client:
        found = await probe(client, fake_provider.base_url + "/v1", "local")
        assert found is not None and found.dialect == dialect and found.framing_measured
        assert found.framing == ChatFraming(tokens_per_message=3, reply_priming=2 + (dialect == "llama-cpp-python"))
        assert found.offset == (1 if dialect == "llama-cpp-python" else 0)  # llama-cpp-python's BOS
        counted = await found.count_texts(client, ["Hello, world!", "Привет, мир", ""])
    assert counted == {"Hello, world!": 4, "Привет, мир": 3}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_profile_counts_a_whole_prompt_as_the_server_does(dialect: str, fake_provider: FakeProvider) -> None:
    fake_provider.tokenizer = dialect
    messages = [
        Message("system", "You are a terse assistant."),
        Message("user", "What is 2 + 2?"),
        Message("assistant", "4."),
        Message("user", "And in Chinese? 用中文说"),
    ]
    wire = [{"role": m.role, "content": m.text} for m in messages]
    async with httpx.AsyncClient(timeout=30) as client:
        found = await probe(client, fake_provider.base_url, "local")
        assert found is not None
        profile = found.profile(ApproximateProfile())
        estimate = profile.count_messages(messages)
        assert profile.approximate and len(profile.missing) == 4
        assert await found.fill(client, profile)
    assert not profile.approximate
    exact = profile.count_messages(messages)
    assert exact == fake_tokenizer.prompt_tokens(dialect, {"messages": wire})
    assert exact != estimate


async def test_each_text_is_tokenized_once_for_every_prompt(fake_provider: FakeProvider) -> None:
    fake_provider.tokenizer = "llama.cpp"
    async with httpx.AsyncClient(timeout=30) as client:
        found = await probe(client, fake_provider.base_url, "local")
        assert found is not None
        before = len(fake_provider.tokenize_requests)
        first = found.profile(ApproximateProfile())
        first.count_messages([Message("user", "one"), Message("user", "two")])
        await found.fill(client, first)
        second = found.profile(ApproximateProfile())
        second.count_messages([Message("user", "two"), Message("user", "three")])
        assert second.missing == ["three"]
        await found.fill(client, second)
    assert len(fake_provider.tokenize_requests) - before == 3
    assert found.stats.calls == 3 and found.stats.mean_latency is not None


async def test_a_server_without_a_tokenizer_is_not_used_and_not_probed_again(fake_provider: FakeProvider) -> None:
    tokenizers = ServerTokenizers()
    async with httpx.AsyncClient(timeout=30) as client:
        assert await tokenizers.get(client, fake_provider.base_url, "gpt-local") is None
        assert await tokenizers.get(client, fake_provider.base_url, "gpt-local") is None
        assert await tokenizers.get(client, closed_port_url(), "gpt-local") is None
    assert fake_provider.requests == []  # probes of missing endpoints are not chat requests


async def test_counts_stay_estimated_when_the_server_stops_tokenizing(fake_provider: FakeProvider) -> None:
    fake_provider.tokenizer = "vllm"
    async with httpx.AsyncClient(timeout=30) as client:
        found = await probe(client, fake_provider.base_url, "local")
        assert found is not None
        fake_provider.tokenizer = None  # now every tokenize call answers 404
        profile = found.profile(ApproximateProfile())
        estimate = profile.count_messages([Message("user", "a question nobody counted")])
        assert not await found.fill(client, profile)
    assert profile.count_messages([Message("user", "a question nobody counted")]) == estimate
    assert profile.approximate and found.stats.failures == 1


def test_framing_is_measured_from_two_prompts_and_never_undercounts_them() -> None:
    framing = ChatFraming.measured(one_turn=30, three_turns=46, texts_one=2, texts_three=7)
    assert framing == ChatFraming(tokens_per_message=6, reply_priming=22)  # (46-30-5)/2 = 5.5 -> 6
    assert 2 + framing.tokens_per_message + framing.reply_priming >= 30
    assert 7 + 3 * framing.tokens_per_message + framing.reply_priming >= 46
    with pytest.raises(ValueError):
        ChatFraming(tokens_per_message=-1, reply_priming=0)
