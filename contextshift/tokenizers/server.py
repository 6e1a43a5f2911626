"""The ``server`` profile's adapter (T5): counting with a local model server's own tokenizer and chat template.

Three endpoint dialects are known:

- ``llama-cpp-python``: ``POST /extras/tokenize/count`` ``{"input"}`` → ``{"count"}`` (BOS included, so the
  count of ``""`` is subtracted); no template endpoint, so the chat framing is measured once from the
  ``usage.prompt_tokens`` of two one-token completions.
- ``llama.cpp`` (``llama-server``): ``POST /tokenize`` ``{"content", "add_special"}`` → ``{"tokens"}``, and
  ``POST /apply-template`` ``{"messages"}`` → ``{"prompt"}`` for the chat template.
- ``vllm``: ``POST /tokenize`` ``{"model", "prompt"}`` → ``{"count"}``, or ``{"model", "messages"}`` for a whole
  templated chat.

:meth:`ServerTokenizers.get` probes a provider once (per process, per base URL and model; a failed probe is
retried after a while) and returns a :class:`ServerTokenizer`, whose :meth:`ServerTokenizer.profile` is the
pure :class:`~contextshift.core.fetched.FetchedCountsProfile` the pipeline sees. :meth:`ServerTokenizer.fill`
fetches what a profile found missing (concurrently, a few calls at a time) into the shared cache. Nothing
from an upstream body reaches a log or an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx

from ..core.errors import ContextShiftError
from ..core.fetched import ChatFraming, FetchedCountsProfile
from ..core.tokens import CountCache, TokenizerProfile

log = logging.getLogger("contextshift.tokenizers.server")

LLAMA_CPP_PYTHON: Final = "llama-cpp-python"
LLAMA_CPP: Final = "llama.cpp"
VLLM: Final = "vllm"
DIALECTS: tuple[str, ...] = (LLAMA_CPP_PYTHON, LLAMA_CPP, VLLM)

#: The profile name reports show.
PROFILE_NAME: Final = "server"
#: Seconds after which a provider that did not answer the probe is probed again.
REPROBE_AFTER: Final = 300.0
#: Seconds a tokenize call may take once the server is known, and a template-measuring call during the probe.
CALL_TIMEOUT: Final = 30.0
TEMPLATE_TIMEOUT: Final = 120.0
#: Tokenize calls in flight at once per fill.
CONCURRENCY: Final = 4
#: Used when the template cannot be measured: more than any common template costs (ChatML costs 5, Llama 3 ~5).
UNMEASURED_FRAMING = ChatFraming(tokens_per_message=8, reply_priming=8)

_PROBE_TEXT = "Hello"
_ONE_TURN = [{"role": "user", "content": "Hello"}]
_THREE_TURNS = [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there"},
    {"role": "user", "content": "How are you?"},
]


class TokenizeFailed(ContextShiftError):
    """A tokenize call that did not give a count (the upstream answer is not kept)."""

    code = "TOKENIZER_SERVER_FAILED"


def server_root(base_url: str) -> str:
    """The server's root URL: tokenizer endpoints live beside ``/v1``, not under it."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


@dataclass(slots=True)
class TokenizeStats:
    """What tokenizing cost: calls made, their total seconds, and failures."""

    calls: int = 0
    seconds: float = 0.0
    failures: int = 0

    @property
    def mean_latency(self) -> float | None:
        return self.seconds / self.calls if self.calls else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ServerTokenizer:
    """One server and model: its dialect, the count cache shared by every prompt, and the chat framing."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dialect: str,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | None = None,
        concurrency: int = CONCURRENCY,
        cache_limit: int = 200_000,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown tokenizer dialect {dialect!r}")
        self.base_url = base_url.rstrip("/")
        self.root = server_root(base_url)
        self.model = model
        self.dialect = dialect
        self._api_key = api_key or None
        self.timeout = timeout or httpx.Timeout(CALL_TIMEOUT, connect=2.0)
        self.concurrency = max(1, concurrency)
        self.cache = CountCache(cache_limit)
        self.framing = UNMEASURED_FRAMING
        self.framing_measured = False
        #: Tokens the count endpoint adds to any text (llama-cpp-python's BOS), subtracted from every count.
        self.offset = 0
        self.stats = TokenizeStats()

    def __repr__(self) -> str:  # never shows the key
        return f"ServerTokenizer(dialect={self.dialect!r}, root={self.root!r}, model={self.model!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key is not None:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _post(self, client: httpx.AsyncClient, url: str, body: Mapping[str, Any]) -> Any:
        started = time.perf_counter()
        self.stats.calls += 1
        try:
            response = await client.post(url, json=dict(body), headers=self._headers(), timeout=self.timeout)
            if response.status_code != 200:
                raise TokenizeFailed(f"HTTP {response.status_code}")
            return response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise TokenizeFailed(type(error).__name__) from None
        finally:
            self.stats.seconds += time.perf_counter() - started

    # -- counting one text ----------------------------------------------------------------------------

    async def raw_count(self, client: httpx.AsyncClient, text: str, *, special: bool = False) -> int:
        """The endpoint's own count of ``text`` (``special``: with BOS/EOS as a prompt would get them)."""
        if self.dialect == LLAMA_CPP_PYTHON:
            payload = await self._post(client, f"{self.root}/extras/tokenize/count", {"input": text})
            value = _int(payload.get("count")) if isinstance(payload, Mapping) else None
        elif self.dialect == LLAMA_CPP:
            body = {"content": text, "add_special": special, "parse_special": True}
            payload = await self._post(client, f"{self.root}/tokenize", body)
            tokens = payload.get("tokens") if isinstance(payload, Mapping) else None
            value = len(tokens) if isinstance(tokens, list) else None
        else:
            body = {"model": self.model, "prompt": text, "add_special_tokens": special}
            payload = await self._post(client, f"{self.root}/tokenize", body)
            value = _int(payload.get("count")) if isinstance(payload, Mapping) else None
        if value is None:
            raise TokenizeFailed("no count in the answer")
        return value

    async def count_text(self, client: httpx.AsyncClient, text: str) -> int:
        """Tokens of ``text`` as message content (no BOS)."""
        if not text:
            return 0
        return max(0, await self.raw_count(client, text) - self.offset)

    async def count_texts(self, client: httpx.AsyncClient, texts: Sequence[str]) -> dict[str, int]:
        """Counts of the distinct ``texts``, a few calls at a time; cached ones are not fetched again."""
        wanted = [t for t in dict.fromkeys(texts) if t and self.cache.get(t) is None]
        gate = asyncio.Semaphore(self.concurrency)

        async def one(text: str) -> tuple[str, int]:
            async with gate:
                return text, await self.count_text(client, text)

        counted = dict(await asyncio.gather(*(one(t) for t in wanted)))
        for text, value in counted.items():
            self.cache.put(text, value)
        return counted

    # -- the chat template ----------------------------------------------------------------------------

    async def prompt_count(self, client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> int:
        """The server's count of a whole templated prompt (reply priming included)."""
        if self.dialect == LLAMA_CPP:
            payload = await self._post(client, f"{self.root}/apply-template", {"messages": messages})
            prompt = payload.get("prompt") if isinstance(payload, Mapping) else None
            if not isinstance(prompt, str):
                raise TokenizeFailed("no prompt in the answer")
            return await self.raw_count(client, prompt, special=True)
        if self.dialect == VLLM:
            body = {"model": self.model, "messages": messages, "add_generation_prompt": True}
            payload = await self._post(client, f"{self.root}/tokenize", body)
            value = _int(payload.get("count")) if isinstance(payload, Mapping) else None
            if value is None:
                raise TokenizeFailed("no count in the answer")
            return value
        # llama-cpp-python has no template endpoint: a one-token completion reports the prompt's size.
        body = {"model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0.0, "stream": False}
        payload = await self._post(client, f"{self.base_url}/chat/completions", body)
        usage = payload.get("usage") if isinstance(payload, Mapping) else None
        value = _int(usage.get("prompt_tokens")) if isinstance(usage, Mapping) else None
        if value is None:
            raise TokenizeFailed("no usage in the answer")
        return value

    async def measure_framing(self, client: httpx.AsyncClient) -> ChatFraming:
        """The template's per-message and fixed costs, from two small prompts; kept for the server's life."""
        if self.dialect == LLAMA_CPP_PYTHON:
            self.offset = await self.raw_count(client, "")
        contents = [str(m["content"]) for m in _THREE_TURNS]
        await self.count_texts(client, contents)
        texts_one = sum(self.cache.get(str(m["content"])) or 0 for m in _ONE_TURN)
        texts_three = sum(self.cache.get(c) or 0 for c in contents)
        one = await self.prompt_count(client, list(_ONE_TURN))
        three = await self.prompt_count(client, list(_THREE_TURNS))
        self.framing = ChatFraming.measured(
            one_turn=one, three_turns=three, texts_one=texts_one, texts_three=texts_three
        )
        self.framing_measured = True
        return self.framing

    # -- what the pipeline sees -------------------------------------------------------------------------

    def profile(self, fallback: TokenizerProfile) -> FetchedCountsProfile:
        """A fresh per-prompt profile over the shared cache; ``fallback`` estimates what is not fetched yet."""
        return FetchedCountsProfile(PROFILE_NAME, cache=self.cache, framing=self.framing, fallback=fallback)

    async def fill(self, client: httpx.AsyncClient, profile: FetchedCountsProfile) -> bool:
        """Fetch the texts ``profile`` had to estimate; False (estimates stay) when the server failed."""
        missing = profile.take_missing()
        if not missing:
            return True
        try:
            counted = await self.count_texts(client, missing)
        except TokenizeFailed as error:
            self.stats.failures += 1
            log.warning("tokenizing with %s failed (%s); counts stay estimated", self.dialect, error)
            return False
        profile.provide({t: counted[t] if t in counted else (self.cache.get(t) or 0) for t in missing})
        return True


async def probe(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout: httpx.Timeout | None = None,
) -> ServerTokenizer | None:
    """The tokenizer of the server at ``base_url``, with its framing measured, or None if it has none."""
    wait = timeout or httpx.Timeout(5.0, connect=2.0)
    for dialect in DIALECTS:
        candidate = ServerTokenizer(base_url, model, dialect, api_key=api_key, timeout=wait)
        try:
            await candidate.raw_count(client, _PROBE_TEXT)
        except TokenizeFailed:
            continue
        # Measuring the template may take one-token completions on a cold, busy server: give them time.
        candidate.timeout = httpx.Timeout(TEMPLATE_TIMEOUT, connect=2.0)
        try:
            await candidate.measure_framing(client)
        except TokenizeFailed as error:
            log.warning("%s tokenizer found but its chat template could not be measured (%s)", dialect, error)
        candidate.stats = TokenizeStats()
        candidate.timeout = httpx.Timeout(CALL_TIMEOUT, connect=2.0)
        log.info("provider at %s tokenizes (%s)", candidate.root, dialect)
        return candidate
    return None


class ServerTokenizers:
    """The server tokenizers found so far, by base URL and model (one probe each; failures re-probed later)."""

    def __init__(self, *, reprobe_after: float = REPROBE_AFTER, timeout: httpx.Timeout | None = None) -> None:
        self.reprobe_after = reprobe_after
        self.timeout = timeout
        self._found: dict[tuple[str, str], ServerTokenizer] = {}
        self._absent: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def known(self) -> list[ServerTokenizer]:
        return list(self._found.values())

    async def get(
        self, client: httpx.AsyncClient, base_url: str, model: str, api_key: str | None = None
    ) -> ServerTokenizer | None:
        key = (base_url.rstrip("/"), model)
        found = self._found.get(key)
        if found is not None:
            return found
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._found.get(key)
            if found is not None:
                return found
            absent_since = self._absent.get(key)
            if absent_since is not None and time.monotonic() - absent_since < self.reprobe_after:
                return None
            tokenizer = await probe(client, base_url, model, api_key, timeout=self.timeout)
            if tokenizer is None:
                self._absent[key] = time.monotonic()
                return None
            self._found[key] = tokenizer
            self._absent.pop(key, None)
            return tokenizer


__all__ = [
    "DIALECTS",
    "LLAMA_CPP",
    "LLAMA_CPP_PYTHON",
    "PROFILE_NAME",
    "VLLM",
    "ServerTokenizer",
    "ServerTokenizers",
    "TokenizeFailed",
    "TokenizeStats",
    "probe",
    "server_root",
]
