"""The compatible endpoints' work (V7): fit a caller's request to a model's window, forward it, audit it.

A :class:`ProxyCall` is what a caller asked for, in OpenAI's vocabulary (``dialect="openai"``, ``POST
/v1/chat/completions``) or Anthropic's (``"anthropic"``, ``POST /v1/messages``). :meth:`ProxyService.prepare`
resolves the model (by name or id; enabled, on an enabled provider), fits the messages
(:mod:`.proxy_fit`: the same shifting, strategies and audit entries as a chat) and starts writing the audit.
:meth:`ProxyService.complete` and :meth:`ProxyService.stream` forward the fitted request to the model's
provider and finish the audit exactly once.

Fitting rules:

* the budget is the model's window, minus the reply reserve (the request's ``max_tokens`` or
  ``max_completion_tokens``; else the smallest of :data:`DEFAULT_RESERVE`, the model's ``max_output_tokens``
  and a quarter of the window, as for a bot), minus the tokens of the tool definitions and other request
  options that travel with the messages; a reserve at or above the window is refused at once
  (:class:`ReserveTooLarge`, ``RESPONSE_RESERVE_TOO_LARGE``: nothing is fitted, audited or sent);
* the strategy is the request's (``contextshift.strategy``), else the caller's token's ``context_strategy``,
  else the model's ``context_strategy`` setting, else ``truncate``;
* system (and ``developer``) messages and the last user message are protected; tool calls and their results
  are removed together or not at all;
* kept messages go to an OpenAI-compatible provider exactly as the caller sent them (contextshift's own
  message keys such as ``pinned`` or ``meta`` are not honoured nor forwarded); otherwise they are translated.

The audit is :mod:`.proxy_audit`'s, the request and its options :mod:`.proxy_request`'s, the refusals
:mod:`.proxy_errors`'; the call itself goes through :mod:`.calls` like every provider call.

Recovery (T5): when the provider still rejects the prompt as too long, the real count it states teaches the
model's calibration, and the request is fitted again at that ratio and sent once more (streaming: only while
nothing was sent to the caller). The audit's ``attempts`` say so: ``context-length-retry``, then the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Mapping
from datetime import timedelta
from typing import Any

from ..core import limits
from ..core.calibration import Calibration
from ..core.errors import TokenBudgetExceeded
from ..core.host import default_registry
from ..core.messages import Message
from ..providers import ChatRequest, ChatResult, ProviderError, StreamEvent, make_client
from ..providers.server_context import fitting_window
from ..storage import Database, Repositories
from ..storage.tables import ModelRow, ProviderRow
from . import proxy_fit as fit
from .calibration import Counting, counting_of
from .calls import Calls, ClientFactory, SharedClient
from .counting import ServerCounting
from .provider_hosts import check_provider_url
from .proxy_audit import DEFAULT_AUDIT_TTL, EndpointAudits
from .proxy_call import Forwarding
from .proxy_errors import ContextTooLong, ReserveTooLarge, UpstreamFailed, model_not_found
from .proxy_request import (
    Prepared,
    ProxyCall,
    anthropic_options,
    chat_request,
    openai_options,
    reply_reserve,
    request_overhead,
)
from .rules import NO_RULES, Rules
from .turn import DEFAULT_CONTEXT_LIMIT, profile_for, serializer_for

log = logging.getLogger("contextshift.proxy")

#: The reply reserve when the request sets no ``max_tokens`` (at most; see ``core.limits.reply_reserve``).
DEFAULT_RESERVE = limits.DEFAULT_REPLY_RESERVE
#: The strategy when neither the request, the token nor the model names one.
DEFAULT_STRATEGY = "truncate"

# Re-exported for the routes and tests.
invalid_request = fit.invalid_request
OPENAI = fit.OPENAI
ANTHROPIC = fit.ANTHROPIC


# -- the service -----------------------------------------------------------------------------------------


class ProxyService:
    """Fits, forwards and audits endpoint calls against one database."""

    def __init__(
        self,
        db: Database,
        *,
        client_factory: ClientFactory = make_client,
        client_options: dict[str, Any] | None = None,
        audit_ttl: timedelta | None = None,
        server_counting: ServerCounting | None = None,
        shared_client: SharedClient | None = None,
        rules: Rules = NO_RULES,
    ) -> None:
        self.db = db
        #: What the settings decide for every call (provider hosts, estimate margin).
        self.rules = rules
        #: Every provider call (on the app's shared HTTP connection pool, while it is open).
        self.calls = Calls(client_factory, client_options, shared_client)
        #: The endpoint audits, and the calls whose end is still being written.
        self.audits = EndpointAudits(db, audit_ttl)
        #: The messages of earlier calls, read again by the next call that resends them (the lean path).
        self.messages = fit.MessageCache()
        #: What a local server says of its own context size (llama.cpp, Ollama), asked once a minute at most.
        self.server_counting = server_counting if server_counting is not None else ServerCounting(shared=shared_client)

    @property
    def client_factory(self) -> ClientFactory:
        return self.calls.factory

    @property
    def client_options(self) -> Mapping[str, Any]:
        """The options of a provider client made now (with the shared pool while it is open)."""
        return self.calls.current_options()

    @property
    def audit_ttl(self) -> timedelta:
        return self.audits.audit_ttl

    def finishing(self, *, audit_id: str | None = None, model_id: str | None = None) -> bool:
        """Whether a call's end is still being written (that call's, the model's calls', or any)."""
        return self.audits.finishing(audit_id=audit_id, model_id=model_id)

    async def settled(self, *, audit_id: str | None = None, model_id: str | None = None) -> None:
        """Wait until the ends still being written are in the database (:meth:`EndpointAudits.settled`)."""
        await self.audits.settled(audit_id=audit_id, model_id=model_id)

    async def settle(self) -> None:
        """Wait for every call's end still being written (the service does before it stops)."""
        await self.audits.settle()

    async def copy_chat_audit(self, chat_id: str, generation_id: str, user_id: str) -> None:
        """Sessions: the chat's audit of ``generation_id``, kept as the caller's proxy audit under the same id."""
        await self.audits.copy_chat_audit(chat_id, generation_id, user_id)

    # -- models -------------------------------------------------------------------------------------------

    async def models(self) -> list[ModelRow]:
        """The models a caller may name: enabled chat models on enabled providers."""
        async with self.db.session(write=False) as session:
            repos = Repositories(session)
            providers = {p.id: p for p in await repos.providers.list_all() if p.enabled}
            return [
                m
                for m in await repos.models.list_all()
                if m.type == "chat" and m.enabled and m.provider_id in providers
            ]

    async def _resolve(self, repos: Repositories, name: str) -> tuple[ModelRow, ProviderRow]:
        if not isinstance(name, str) or not name:
            raise invalid_request("model must be a non-empty string.", "model")
        candidates = await repos.models.named(name)  # enabled chat models: by id first, else by name
        chosen, provider = next((c for c in candidates if c[0].id == name), None) or next(
            (c for c in candidates if c[0].name == name), (None, None)
        )
        if chosen is None or provider is None or not provider.enabled:
            raise model_not_found(name)
        check_provider_url(provider.base_url, self.rules.provider_hosts)
        return chosen, provider

    async def resolve(self, name: str) -> tuple[ModelRow, ProviderRow]:
        """The enabled chat model named ``name`` (by id or name) and its provider, or 404 ``MODEL_NOT_FOUND``."""
        async with self.db.session(write=False) as session:
            return await self._resolve(Repositories(session), name)

    # -- fitting ------------------------------------------------------------------------------------------

    async def _resolved(self, name: str) -> tuple[ModelRow, ProviderRow]:
        """:meth:`resolve`, from the database's read cache while no write to models or providers came in."""
        reads = self.db.reads
        key = ("endpoint-model", name)
        found: tuple[ModelRow, ProviderRow] | None = reads.get(key)
        if found is None:
            stamp = reads.stamp("models", "providers")
            found = await self.resolve(name)
            reads.put(key, found, stamp)
        else:
            check_provider_url(found[1].base_url, self.rules.provider_hosts)
        return found

    async def _counting(self, model: ModelRow) -> Counting:
        """T5: the model's calibrated counting, after any call to it still folding its usage in."""
        if self.finishing(model_id=model.id):  # count as that call's usage will have taught
            await self.settled(model_id=model.id)
        base = profile_for(model)
        reads = self.db.reads
        key = ("calibration", model.id, base.name)
        calibration: Calibration | None = reads.get(key)
        if calibration is None:
            stamp = reads.stamp("token_calibrations")
            async with self.db.session(write=False) as session:
                calibration = await Repositories(session).calibrations.get(model.id, base.name)
            reads.put(key, calibration, stamp)
        return counting_of(base, calibration, self.rules.estimate_margin)

    async def prepare(self, call: ProxyCall) -> Prepared:
        """Resolve, fit and audit ``call``; raises ``ServiceError`` (``ContextTooLong`` and ``ReserveTooLarge``
        among them).

        The model, its provider and its calibration come from the database's read cache (``storage.
        readcache``) when no write to them has come in since they were read."""
        model, provider = await self._resolved(call.model)
        counting = await self._counting(model)
        strategy = call.strategy or call.token_strategy or model.context_strategy or DEFAULT_STRATEGY
        if strategy not in default_registry:
            raise invalid_request(
                f"Unknown context strategy {strategy!r}; registered: {', '.join(default_registry.names())}.",
                "contextshift.strategy",
            )
        if call.options.get("n") not in (None, 1):
            raise invalid_request("Only n=1 is supported.", "n")
        lean = call.dialect == fit.OPENAI and provider.kind != "anthropic"
        source: list[dict[str, Any]] | list[Message]
        built: list[Message] | None = None
        if lean:  # from the message cache (no dicts made) when it can build them all, else as dicts
            if call.messages_json is not None:
                built = self.messages.messages(call.messages, call.messages_json)
            source = built if built is not None else fit.caller_dicts(call.messages)
        elif call.dialect == fit.ANTHROPIC:
            source = fit.anthropic_messages(call.messages, call.system)
        else:
            source = [_as_core(item) for item in fit.caller_dicts(call.messages)]
        notes: list[str] = []
        # T5: a local server running the model with a smaller context would cut the prompt silently
        server = await self.server_counting.server_context(model, provider)
        window, fitted_to_server = fitting_window(model.context_window, server)
        if fitted_to_server is not None:
            notes.append(fitted_to_server)
        if window is None:
            window = DEFAULT_CONTEXT_LIMIT
            notes.append(f"context window unknown; assuming {DEFAULT_CONTEXT_LIMIT} tokens")
        reserve = reply_reserve(call, model, window)
        if reserve >= window:  # no prompt fits, however short: the request's own error, not its messages'
            raise ReserveTooLarge(window, reserve, call.max_tokens_field)
        overhead = request_overhead(call, counting.profile)
        if overhead:
            notes.append(f"{overhead} tokens of tool definitions and request options count against the window")
        shape = fit.Shape(counting.profile, window, reserve, overhead, strategy, notes, call.tools)
        prepared = Prepared(
            audit_id=uuid.uuid4().hex,
            call=call,
            model=model,
            provider=provider,
            shape=shape,
            fitted=fit.Fitted([], None, 0, reserve, 0),
            request=ChatRequest(model=model.name, messages=[]),
            excluded=0,
            counting=counting,
            source=source,
            built=built,
        )
        try:
            self._fit(prepared, shape)
        except TokenBudgetExceeded as error:
            failure = ContextTooLong(prepared.audit_id, window, reserve, overhead, error.protected_tokens)
            await self.audits.record_refusal(prepared, shape, failure, error.protected_tokens)
            raise failure from None
        prepared.recording = asyncio.create_task(self.audits.record(prepared))
        return prepared

    def _fit(self, prepared: Prepared, shape: fit.Shape) -> None:
        """Fit ``prepared.source`` to ``shape`` and make the request; raises ``TokenBudgetExceeded``."""
        call, provider = prepared.call, prepared.provider
        if call.dialect == fit.OPENAI and provider.kind != "anthropic":
            items: list[dict[str, Any]] = prepared.source  # type: ignore[assignment]
            fitted = fit.fit_lean(items, call.messages, call.messages_json, shape, prepared.built)
        else:
            messages: list[Message] = prepared.source  # type: ignore[assignment]
            fitted = fit.fit_through_pipeline(messages, shape, serializer_for(provider.kind), prepared.model.name)
        prepared.shape = shape
        prepared.fitted = fitted
        prepared.excluded = fitted.excluded
        prepared.request, dropped = chat_request(call, prepared.model, provider, fitted)
        if dropped:
            kind = "an Anthropic" if provider.kind == "anthropic" else "an OpenAI-compatible"
            note = f"not forwarded to {kind} provider (no such field): {', '.join(dropped)}"
            if fitted.audit is not None:  # made already (the pipeline path)
                fitted.audit["diagnostics"].append(note)
            elif note not in shape.notes:
                shape.notes.append(note)

    # -- forwarding ---------------------------------------------------------------------------------------

    async def complete(self, prepared: Prepared) -> ChatResult:
        """Send the fitted request and wait for the whole reply (refitted and sent once more after a
        context-length rejection); raises :class:`UpstreamFailed` or :class:`ContextTooLong`.

        The reply is returned once the audit is in the database, while the call's end (status, usage,
        calibration) is still being written: :meth:`settled` waits for it."""
        forwarding = Forwarding(prepared, self.db, self.audits, self._fit, finish_later=True)
        try:
            return await self.calls.complete(forwarding.target, forwarding, forwarding)
        except ProviderError as error:
            raise UpstreamFailed(error, prepared.audit_id, prepared.excluded) from None

    async def stream(self, prepared: Prepared) -> AsyncGenerator[StreamEvent, None]:
        """Stream the fitted request: ``TextDelta`` events, then one ``Finished``; raises :class:`UpstreamFailed`
        (or :class:`ContextTooLong`, only before the first event).

        A context-length rejection before the first event is refitted and sent once more. Closing the
        iterator early (the caller went away) cancels the provider call and marks the audit ``cancelled``.
        """
        forwarding = Forwarding(prepared, self.db, self.audits, self._fit, finish_later=False)
        events = self.calls.stream(forwarding.target, forwarding, forwarding)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event
        except ProviderError as error:
            raise UpstreamFailed(error, prepared.audit_id, prepared.excluded) from None


def _as_core(item: dict[str, Any]) -> Message:
    """A caller's dict (:func:`~.proxy_fit.caller_dicts`) as a core message for the prompt pipeline."""
    try:
        return Message.from_dict({**item, "source": "system" if item.get("role") == "system" else "history"})
    except (TypeError, ValueError) as error:
        param = f"messages[{str(item.get('id'))[1:]}]"
        raise invalid_request(f"{param}: {error}", param) from None


__all__ = [
    "DEFAULT_AUDIT_TTL",
    "DEFAULT_RESERVE",
    "DEFAULT_STRATEGY",
    "ContextTooLong",
    "Prepared",
    "ProxyCall",
    "ProxyService",
    "ReserveTooLarge",
    "UpstreamFailed",
    "anthropic_options",
    "openai_options",
]
