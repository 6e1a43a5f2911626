"""Exact counts from the provider's own tokenizer before the pipeline runs (T4, T5).

The pipeline is synchronous and pure; tokenize calls are network calls. So the service probes the provider
once (:class:`~contextshift.tokenizers.server.ServerTokenizers`), gives the pipeline a profile over the shared
count cache, and builds the prompt in rounds: each round's missing texts (counted by estimate meanwhile) are
fetched in one concurrent batch and the prompt is built again; normally the second round finds every count.
If the server stops answering, the estimates stay and the prompt says it is approximate.

With an embedder (the ``embeddings`` extra, for ``recall`` and ``vector-recall``) the pipeline runs in a worker
thread: embedding texts is model inference, tens to hundreds of milliseconds the first time a chat's texts are
seen, and must not hold up every other request on the event loop. The embedder and the count cache are
thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from ..core.errors import TokenBudgetExceeded
from ..core.fetched import FetchedCountsProfile
from ..core.tokens import TokenizerProfile
from ..pipeline import PipelineRequest, PipelineResult, run_pipeline
from ..providers.server_context import ServerContext, ServerContexts
from ..storage.tables import ModelRow, ProviderRow
from ..tokenizers.server import PROFILE_NAME, ServerTokenizer, ServerTokenizers
from .calls.shared import SharedClient

log = logging.getLogger("contextshift.counting")

#: Rounds of "build, fetch what was missing" before the prompt is taken as it is.
MAX_ROUNDS = 4
#: Provider kinds whose servers may have a tokenizer endpoint (OpenAI-compatible local servers).
PROBED_KINDS = frozenset({"openai"})


def wants_server(model: ModelRow | None, provider: ProviderRow | None, offline: TokenizerProfile) -> bool:
    """Probe when the model's ``tokenizer`` says ``server``, or when it has none and only an estimate exists."""
    if model is None or provider is None or provider.kind not in PROBED_KINDS:
        return False
    if model.tokenizer:
        return model.tokenizer.strip().lower() == PROFILE_NAME
    return offline.approximate


@dataclass(slots=True)
class ServerCounting:
    """The service's server tokenizers and the shared HTTP client their calls use (while it is open)."""

    tokenizers: ServerTokenizers = field(default_factory=ServerTokenizers)
    shared: SharedClient | None = None
    #: The context sizes local servers run their models with (llama.cpp ``/props``, Ollama ``/api/ps``...).
    contexts: ServerContexts = field(default_factory=ServerContexts)

    @contextlib.asynccontextmanager
    async def http(self) -> AsyncIterator[httpx.AsyncClient]:
        pool = self.shared.client if self.shared is not None else None
        if pool is not None:
            yield pool
            return
        async with httpx.AsyncClient() as client:
            yield client

    async def tokenizer_for(
        self, model: ModelRow | None, provider: ProviderRow | None, offline: TokenizerProfile
    ) -> ServerTokenizer | None:
        if not wants_server(model, provider, offline):
            return None
        assert model is not None and provider is not None
        try:
            # N5: a probe (several dialects, a few seconds each) never outlasts the provider's own timeout
            async with asyncio.timeout(provider.timeout_seconds), self.http() as client:
                return await self.tokenizers.get(client, provider.base_url, model.name, provider.api_key)
        except TimeoutError:
            log.info("the tokenizer probe of %s outlasted the provider's timeout; counting by estimate", model.name)
            return None

    async def server_context(self, model: ModelRow | None, provider: ProviderRow | None) -> ServerContext | None:
        """The context size the provider's server runs ``model`` with, when it says (T5: a local server that
        would cut a longer prompt silently); None for other kinds, or when the server does not answer within
        the provider's own timeout (N5). Fit to :func:`~contextshift.providers.server_context.fitting_window`."""
        if model is None or provider is None or provider.kind not in PROBED_KINDS:
            return None
        try:
            async with asyncio.timeout(provider.timeout_seconds), self.http() as client:
                return await self.contexts.get(client, provider.base_url, model.name, provider.api_key)
        except TimeoutError:
            log.info(
                "the context probe of %s outlasted the provider's timeout; its configured window stands", model.name
            )
            return None


async def run_counted(
    request: PipelineRequest, server: ServerTokenizer | None, counting: ServerCounting | None
) -> PipelineResult:
    """``run_pipeline`` with the server's counts fetched first (see the module docstring)."""
    profile = request.profile
    if server is None or counting is None or not isinstance(profile, FetchedCountsProfile):
        return await _run(request)
    async with counting.http() as client:
        for round_number in range(MAX_ROUNDS):
            result: PipelineResult | None = None
            error: TokenBudgetExceeded | None = None
            try:
                result = await _run(request)
            except TokenBudgetExceeded as exc:
                error = exc
            if not profile.missing or round_number == MAX_ROUNDS - 1:
                if error is not None:
                    raise error
                assert result is not None
                return result
            if not await server.fill(client, profile):
                break
    return await _run(request)  # the server failed: estimates, and the result says approximate


async def _run(request: PipelineRequest) -> PipelineResult:
    """The pipeline; in a worker thread when it embeds texts (see the module docstring)."""
    if request.embedder is not None:
        return await asyncio.to_thread(run_pipeline, request)
    return run_pipeline(request)


__all__ = ["MAX_ROUNDS", "ServerCounting", "run_counted", "wants_server"]
