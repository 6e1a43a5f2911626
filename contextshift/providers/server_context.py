"""The context size a local server really runs a model with, so that a prompt is never cut silently (T5, issue 25).

A local server has a context size of its own, set when it loads the model, and may be smaller than the window
the model is configured with in contextshift. Ollama cuts a longer prompt to it without any error (from the
front: the system prompt goes first); llama.cpp refuses it. So the service asks the server, and fits prompts
to the smaller of the two (:func:`fitting_window`), saying so.

How each server tells (each ``GET``/``POST`` beside ``/v1``, on the server's root):

- **llama.cpp** (``llama-server``): ``GET /props`` → ``default_generation_settings.n_ctx``; older builds, or
  with ``/props`` off: ``GET /slots`` → each slot's ``n_ctx`` (the per-slot context: the server's ``-c``
  divided among ``--parallel`` slots, which is what one request gets).
- **Ollama**: ``GET /api/ps`` → the loaded model's ``context_length`` (what it runs with now), else
  ``POST /api/show {"model"}`` → ``num_ctx`` in its ``parameters`` (the Modelfile's ``PARAMETER num_ctx``).
  Ollama's native API would take ``options.num_ctx`` per request, but contextshift calls its OpenAI-compatible
  ``/v1/chat/completions``, which ignores ``options`` (and a top-level ``num_ctx``): the context a model runs
  with there is the Modelfile's ``num_ctx`` or the server's ``OLLAMA_CONTEXT_LENGTH``. So nothing is sent that
  would be ignored; the size is read, and a larger window needs one of those two settings (docs/limits.md).
- Anything else (a cloud API, vLLM, LM Studio) answers none of these: the configured window stands.

Nothing the server says beyond the number is kept; the API key goes only to the provider's own host.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from ..tokenizers.server import server_root

log = logging.getLogger("contextshift.providers")

LLAMA_CPP_PROPS: Final = "llama.cpp /props"
LLAMA_CPP_SLOTS: Final = "llama.cpp /slots"
OLLAMA_PS: Final = "Ollama /api/ps"
OLLAMA_SHOW: Final = "Ollama /api/show"
#: Seconds each of the probe's calls may take.
CALL_TIMEOUT: Final = 5.0
#: Seconds an answer is kept before the server is asked again: Ollama reloads a model with another context when
#: its settings change, and a llama.cpp server may be restarted with another ``-c``.
REASK_AFTER: Final = 60.0
#: Seconds a server that does not say (a cloud API: four 404s) is left alone before it is asked again.
REASK_SILENT_AFTER: Final = 600.0

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ServerContext:
    """The context size the server runs the model with, and where it said so."""

    n_ctx: int
    source: str


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _same_model(listed: Any, model: str) -> bool:
    """Ollama names a model ``name:tag``; ``llama3`` is ``llama3:latest``."""
    if not isinstance(listed, str):
        return False
    return listed == model or listed == f"{model}:latest" or f"{listed}:latest" == model


async def _json(client: httpx.AsyncClient, method: str, url: str, headers: Mapping[str, str], **kw: Any) -> Any:
    """The JSON of a 200 answer, or None (any failure: this server does not say)."""
    try:
        response = await client.request(method, url, headers=headers, timeout=CALL_TIMEOUT, **kw)
    except (httpx.HTTPError, ValueError):
        return None
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def from_props(payload: Any) -> int | None:
    settings = payload.get("default_generation_settings") if isinstance(payload, Mapping) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None


def from_slots(payload: Any) -> int | None:
    if not isinstance(payload, list) or not payload or not isinstance(payload[0], Mapping):
        return None
    return _positive(payload[0].get("n_ctx"))


def from_ps(payload: Any, model: str) -> int | None:
    models = payload.get("models") if isinstance(payload, Mapping) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, Mapping) and (
            _same_model(entry.get("name"), model) or _same_model(entry.get("model"), model)
        ):
            return _positive(entry.get("context_length"))
    return None


def from_show(payload: Any) -> int | None:
    parameters = payload.get("parameters") if isinstance(payload, Mapping) else None
    found = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    return int(found.group(1)) or None if found else None


async def read_server_context(
    client: httpx.AsyncClient, base_url: str, model: str, api_key: str | None = None
) -> ServerContext | None:
    """Ask the server at ``base_url`` what context it runs ``model`` with (see the module doc), or None when it
    does not say. Never raises for the server's sake: a failed call is "does not say"."""
    root = server_root(base_url)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    n_ctx = from_props(await _json(client, "GET", f"{root}/props", headers))
    if n_ctx is not None:
        return ServerContext(n_ctx, LLAMA_CPP_PROPS)
    n_ctx = from_slots(await _json(client, "GET", f"{root}/slots", headers))
    if n_ctx is not None:
        return ServerContext(n_ctx, LLAMA_CPP_SLOTS)
    n_ctx = from_ps(await _json(client, "GET", f"{root}/api/ps", headers), model)
    if n_ctx is not None:
        return ServerContext(n_ctx, OLLAMA_PS)
    n_ctx = from_show(await _json(client, "POST", f"{root}/api/show", headers, json={"model": model}))
    if n_ctx is not None:
        return ServerContext(n_ctx, OLLAMA_SHOW)
    return None


class ServerContexts:
    """:func:`read_server_context` per server and model, kept :data:`REASK_AFTER` seconds (a server that does not
    say: :data:`REASK_SILENT_AFTER`); one probe at a time per server and model however many requests wait for it."""

    def __init__(self, *, reask_after: float = REASK_AFTER, reask_silent_after: float = REASK_SILENT_AFTER) -> None:
        self.reask_after = reask_after
        self.reask_silent_after = reask_silent_after
        self._known: dict[tuple[str, str], tuple[ServerContext | None, float]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def get(
        self, client: httpx.AsyncClient, base_url: str, model: str, api_key: str | None = None
    ) -> ServerContext | None:
        key = (base_url.rstrip("/"), model)
        async with self._locks.setdefault(key, asyncio.Lock()):
            known = self._known.get(key)
            if known is not None:
                keep = self.reask_after if known[0] is not None else self.reask_silent_after
                if time.monotonic() - known[1] < keep:
                    return known[0]
            found = await read_server_context(client, base_url, model, api_key)
            self._known[key] = (found, time.monotonic())
            if found is not None:
                log.info(
                    "the server at %s runs %s with %d tokens of context (%s)", key[0], model, found.n_ctx, found.source
                )
            return found


def fitting_window(configured: int | None, server: ServerContext | None) -> tuple[int | None, str | None]:
    """The window to fit prompts to, and the audit's (and the provider check's) sentence when the server's
    context is what decides it: the smaller of the model's configured window and the server's context size.

    >>> window, said = fitting_window(8192, ServerContext(4096, LLAMA_CPP_PROPS))
    >>> window, said.split(", less")[0]
    (4096, 'the server runs this model with 4,096 tokens of context (llama.cpp /props)')
    >>> fitting_window(8192, ServerContext(16384, OLLAMA_PS))
    (8192, None)
    """
    if server is None or (configured is not None and server.n_ctx >= configured):
        return configured, None
    if configured is None:
        said = (
            f"the server runs this model with {server.n_ctx:,} tokens of context ({server.source}): "
            "prompts are fitted to it"
        )
        return server.n_ctx, said
    said = (
        f"the server runs this model with {server.n_ctx:,} tokens of context ({server.source}), less than its "
        f"configured window of {configured:,}: prompts are fitted to {server.n_ctx:,}"
    )
    return server.n_ctx, said


__all__ = [
    "LLAMA_CPP_PROPS",
    "LLAMA_CPP_SLOTS",
    "OLLAMA_PS",
    "OLLAMA_SHOW",
    "ServerContext",
    "ServerContexts",
    "fitting_window",
    "read_server_context",
]
