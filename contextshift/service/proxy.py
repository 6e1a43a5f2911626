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

Speed: the audit (every message's entry, a few hundred KB at 1,000 messages) is built and written in a task
that runs while the provider works, and is in the database before the reply goes back. The call's end
(status, usage, calibration) is one transaction written after the reply has gone back (:meth:`ProxyService.
complete` does not wait for it): a tracked task that whatever reads its result waits for first (the audit's
GET, the model's calibration, the next call to the same model; see :meth:`ProxyService.settled`), and that
the service waits for before it stops (:meth:`ProxyService.settle`).

Recovery (T5): when the provider still rejects the prompt as too long, the real count it states teaches the
model's calibration, and the request is fitted again at that ratio and sent once more (streaming: only while
nothing was sent to the caller). The audit's ``attempts`` say so: ``context-length-retry``, then the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio

from ..core import limits
from ..core.calibration import Calibration
from ..core.errors import ContextShiftError, TokenBudgetExceeded
from ..core.host import default_registry
from ..core.messages import Message
from ..core.tokens import TokenizerProfile
from ..pipeline import ReplyReserveTooLarge, payload_tokens
from ..providers import (
    PROVIDER_CONTEXT_LENGTH,
    ChatRequest,
    ChatResult,
    Finished,
    ProviderClient,
    ProviderError,
    StreamEvent,
    make_client,
)
from ..providers.http import request_sent
from ..storage import Database, Repositories
from ..storage.tables import ModelRow, ProviderRow
from . import proxy_fit as fit
from .calibration import DOUBTED, Counting, counting_of, doubt_diagnostic, doubted
from .calls import Deadline, open_client
from .errors import Refusal, ServiceError
from .provider_hosts import check_provider_url
from .recovery import CONTEXT_LENGTH_RETRY, RETRY_GROWTH, corrected
from .turn import DEFAULT_CONTEXT_LIMIT, profile_for, serializer_for

log = logging.getLogger("contextshift.proxy")

ClientFactory = Callable[..., ProviderClient]

#: The reply reserve when the request sets no ``max_tokens`` (at most; see ``core.limits.reply_reserve``).
DEFAULT_RESERVE = limits.DEFAULT_REPLY_RESERVE
#: How long an endpoint audit is kept unless ``CONTEXTSHIFT_PROXY_AUDIT_HOURS`` says otherwise.
DEFAULT_AUDIT_TTL = timedelta(hours=24)
#: The strategy when neither the request, the token nor the model names one.
DEFAULT_STRATEGY = "truncate"
#: Options translated for an Anthropic provider; any other option is not forwarded there (and the audit says so).
_ANTHROPIC_SAME = ("temperature", "top_p", "top_k")
#: Anthropic request options an OpenAI-compatible provider takes under the same name.
_OPENAI_SAME = ("temperature", "top_p")
#: Seconds the audit waits for its request to be sent before it is written anyway (see ``_record``).
RECORD_WAIT = 2.0
#: The error code of a call whose protected messages do not fit.
CONTEXT_LENGTH_EXCEEDED = "CONTEXT_LENGTH_EXCEEDED"

# Re-exported for the routes and tests.
invalid_request = fit.invalid_request
OPENAI = fit.OPENAI
ANTHROPIC = fit.ANTHROPIC


def audit_ttl_from_env() -> timedelta:
    raw = os.environ.get("CONTEXTSHIFT_PROXY_AUDIT_HOURS")
    if not raw:
        return DEFAULT_AUDIT_TTL
    try:
        hours = float(raw)
    except ValueError:
        log.warning("CONTEXTSHIFT_PROXY_AUDIT_HOURS=%r is not a number; keeping audits 24 hours", raw)
        return DEFAULT_AUDIT_TTL
    return timedelta(hours=max(hours, 0.0))


# -- errors ----------------------------------------------------------------------------------------------


def model_not_found(name: str) -> ServiceError:
    return ServiceError(
        Refusal.NOT_FOUND, "MODEL_NOT_FOUND", f"The model {name!r} does not exist or is not enabled.", param="model"
    )


class ContextTooLong(ServiceError):
    """400: the protected messages (system messages, the last user message) alone exceed the budget, by our
    count or, after a rejection, at the rate the provider counted (``reported_tokens``)."""

    def __init__(
        self,
        audit_id: str,
        window: int,
        reserve: int,
        overhead: int,
        protected: int,
        *,
        reported_tokens: int | None = None,
    ) -> None:
        needed = protected + overhead
        counted = (
            f" (after the provider counted the prompt {reported_tokens} tokens)" if reported_tokens is not None else ""
        )
        super().__init__(
            Refusal.INVALID,
            CONTEXT_LENGTH_EXCEEDED,
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{needed} tokens that cannot be dropped (system messages, the last user message"
            f"{', tool definitions' if overhead else ''}) with {reserve} tokens reserved for the reply{counted}. "
            "Please reduce the length of the messages or of the completion.",
            param="messages",
            context_limit=window,
            response_reserve=reserve,
            prompt_tokens=needed,
        )
        self.audit_id = audit_id
        self.window = window
        self.reserve = reserve
        self.needed = needed


class ReserveTooLarge(ServiceError):
    """The request's reply reserve (its ``max_tokens``) alone takes the model's whole window, so no prompt can
    fit however short: a bot's ``RESPONSE_RESERVE_TOO_LARGE`` (:class:`~contextshift.pipeline.ReplyReserveTooLarge`),
    with its words. Decided before anything is fitted, audited or sent.

    Args:
        window: the model's context window, in tokens.
        reserve: the reply reserve, in tokens.
        field: the request field that sets it (``max_tokens`` or ``max_completion_tokens``).
    """

    def __init__(self, window: int, reserve: int, field: str) -> None:
        words = ReplyReserveTooLarge(window, reserve, setting=field)
        super().__init__(
            Refusal.UNPROCESSABLE,
            words.code,
            words.message,
            param=field,
            context_limit=window,
            response_reserve=reserve,
        )


class UpstreamFailed(ContextShiftError):
    """A provider failure, with the audit it was recorded in; ``code`` is the provider error's."""

    code: str  # instance attribute here; ContextShiftError keeps it on the class

    def __init__(self, error: ProviderError, audit_id: str, excluded: int) -> None:
        super().__init__(error.code)
        self.code = error.code
        self.error = error
        self.audit_id = audit_id
        self.excluded = excluded


# -- the call --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProxyCall:
    """One request to an endpoint, in OpenAI's or Anthropic's vocabulary (``dialect``)."""

    model: str
    messages: Sequence[Mapping[str, Any]]
    stream: bool = False
    #: ``max_tokens`` or ``max_completion_tokens`` of the request (``max_tokens_field`` says which).
    max_tokens: int | None = None
    max_tokens_field: str = "max_tokens"
    strategy: str | None = None
    #: The strategy of the caller's token (``api_tokens.context_strategy``), used when the request names none.
    token_strategy: str | None = None
    tools: list[dict[str, Any]] | None = None
    #: Every other field of the request (``tool_choice``, ``temperature``, ``response_format``, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The signed-in caller: the audit is theirs.
    user_id: str = ""
    #: The JSON text of each message as the caller sent it (forwarded as it is when the message is kept).
    messages_json: Sequence[bytes] | None = None
    #: The request body holds no NUL character (then the audit need not be searched for one).
    clean: bool = False
    dialect: str = fit.OPENAI
    #: OpenAI's ``stream_options.include_usage``: a stream ends with a usage chunk.
    include_usage: bool = False
    #: Anthropic's top-level ``system`` (a string or text blocks).
    system: Any = None


@dataclass(slots=True)
class Prepared:
    """A fitted call with its audit on its way: ready to send."""

    audit_id: str
    call: ProxyCall
    model: ModelRow
    provider: ProviderRow
    shape: fit.Shape
    fitted: fit.Fitted
    request: ChatRequest
    excluded: int
    #: T5: the model's counting; ``estimated`` is its uncalibrated count of the request (what usage calibrates).
    counting: Counting
    #: What the fit was made from: the caller's dicts (lean path) or core messages (the pipeline).
    source: list[dict[str, Any]] | list[Message]
    #: The lean path: the caller's dicts as core messages when they were at hand (``ProxyService.messages``).
    built: list[Message] | None = None
    estimated: int = 0
    #: The context-length retry and its numbers, when there was one (the audit's ``attempts``).
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: Writing the audit (started by ``prepare``, awaited before the audit is changed again).
    recording: asyncio.Task[None] | None = None
    #: Set once the request is on its way to the provider: the audit is written from then on.
    sent: asyncio.Event = field(default_factory=asyncio.Event)


def request_overhead(call: ProxyCall, profile: TokenizerProfile) -> int:
    """Tokens the request spends outside its messages: tool definitions, tool choice, response format."""
    parts = [
        json.dumps(value, ensure_ascii=False, sort_keys=True)
        for value in (call.tools, call.options.get("tool_choice"), call.options.get("response_format"))
        if value
    ]
    return profile.count("\n".join(parts)) if parts else 0


def reply_reserve(call: ProxyCall, model: ModelRow, window: int) -> int:
    """The request's ``max_tokens``, else the default every layer uses (``core.limits.reply_reserve``)."""
    return limits.reply_reserve(window, call.max_tokens, model.max_output_tokens)


def anthropic_options(call: ProxyCall) -> tuple[dict[str, Any], list[str]]:
    """The request's options in Anthropic's spelling, and the names of those Anthropic has no field for."""
    options = dict(call.options)
    if call.dialect == fit.ANTHROPIC:  # already Anthropic's
        return {k: v for k, v in options.items() if v is not None}, []
    out: dict[str, Any] = {k: options.pop(k) for k in _ANTHROPIC_SAME if options.get(k) is not None}
    stop = options.pop("stop", None)
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    user = options.pop("user", None)
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    choice = options.pop("tool_choice", None)
    parallel = options.pop("parallel_tool_calls", None)
    translated: dict[str, Any] | None = None
    if choice == "auto":
        translated = {"type": "auto"}
    elif choice == "required":
        translated = {"type": "any"}
    elif choice == "none":
        translated = {"type": "none"}
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        translated = {"type": "tool", "name": str(choice["function"].get("name", ""))}
    if parallel is False and call.tools:
        translated = translated or {"type": "auto"}
        if translated["type"] != "none":
            translated["disable_parallel_tool_use"] = True
    if translated is not None and call.tools:
        out["tool_choice"] = translated
    dropped = sorted(k for k, v in options.items() if v is not None)
    return out, dropped


def openai_options(call: ProxyCall) -> tuple[dict[str, Any], list[str]]:
    """The request's options for an OpenAI-compatible provider, and the names of those it has no field for."""
    options = {k: v for k, v in call.options.items() if v is not None}
    if call.dialect != fit.ANTHROPIC:
        options.pop("stream", None)
        options.pop("stream_options", None)
        return options, []
    out: dict[str, Any] = {k: options.pop(k) for k in _OPENAI_SAME if k in options}
    stop = options.pop("stop_sequences", None)
    if isinstance(stop, list) and stop:
        out["stop"] = list(stop)
    metadata = options.pop("metadata", None)
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    choice = options.pop("tool_choice", None)
    if isinstance(choice, Mapping) and call.tools:
        kind = choice.get("type")
        if kind in ("auto", "any", "none"):
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[str(kind)]
        elif kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": str(choice.get("name", ""))}}
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    return out, sorted(options)


def _clean_usage(reply: ChatResult | None) -> dict[str, int] | None:
    if reply is None or reply.usage is None:
        return None
    return {
        "input_tokens": reply.usage.input_tokens,
        "output_tokens": reply.usage.output_tokens,
        "cached_input_tokens": reply.usage.cached_input_tokens,
    }


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
    ) -> None:
        self.db = db
        self.client_factory = client_factory
        #: Shared with the generations (the app puts its HTTP connection pool here).
        self.client_options = client_options if client_options is not None else {}
        self.audit_ttl = audit_ttl if audit_ttl is not None else audit_ttl_from_env()
        #: The messages of earlier calls, read again by the next call that resends them (the lean path).
        self.messages = fit.MessageCache()
        #: The calls whose end is still being written, by audit id: (the model's id, the writing task).
        self._finishing: dict[str, tuple[str, asyncio.Task[None]]] = {}

    # -- calls still being finished --------------------------------------------------------------------------

    def _finish_later(self, prepared: Prepared, status: str, *, reply: ChatResult | None = None) -> None:
        """End the call's audit (and fold its usage into the calibration) in a task of its own, tracked
        until written: the reply need not wait for it."""
        audit_id = prepared.audit_id
        task = asyncio.get_running_loop().create_task(self._finish(prepared, status, reply=reply))
        self._finishing[audit_id] = (prepared.model.id, task)
        task.add_done_callback(lambda _task: self._finishing.pop(audit_id, None))

    def finishing(self, *, audit_id: str | None = None, model_id: str | None = None) -> bool:
        """Whether a call's end is still being written (that call's, the model's calls', or any)."""
        return bool(self._pending(audit_id=audit_id, model_id=model_id))

    def _pending(self, *, audit_id: str | None = None, model_id: str | None = None) -> list[asyncio.Task[None]]:
        if audit_id is not None:
            found = self._finishing.get(audit_id)
            return [found[1]] if found is not None else []
        return [task for model, task in self._finishing.values() if model_id is None or model == model_id]

    async def settled(self, *, audit_id: str | None = None, model_id: str | None = None) -> None:
        """Wait until the ends still being written are in the database: the call ``audit_id``'s, the calls
        to ``model_id``, or (neither given) every call's. Never raises (:meth:`_finish` logs its failures)."""
        tasks = self._pending(audit_id=audit_id, model_id=model_id)
        if tasks:
            with anyio.CancelScope(shield=True):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def settle(self) -> None:
        """Wait for every call's end still being written (the service does before it stops)."""
        while self._finishing:
            await self.settled()

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
        check_provider_url(provider.base_url)
        return chosen, provider

    async def resolve(self, name: str) -> tuple[ModelRow, ProviderRow]:
        """The enabled chat model named ``name`` (by id or name) and its provider, or 404 ``MODEL_NOT_FOUND``."""
        async with self.db.session(write=False) as session:
            return await self._resolve(Repositories(session), name)

    async def copy_chat_audit(self, chat_id: str, generation_id: str, user_id: str) -> None:
        """Sessions: the chat's audit of ``generation_id``, kept as the caller's proxy audit under the same id."""
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                repos = Repositories(session)
                row = await repos.audits.get(chat_id)
                if row is None or row.generation_id != generation_id:
                    return
                payload = {**row.payload, "chat_id": chat_id}
                excluded = int(payload.get("excluded_count") or 0)
                await repos.proxy_audits.prepare(
                    generation_id,
                    user_id=user_id,
                    model=str(payload.get("model") or ""),
                    payload=payload,
                    excluded_count=excluded,
                    ttl=self.audit_ttl,
                )
                if row.status != "prepared":
                    await repos.proxy_audits.finish(
                        generation_id, row.status, error_code=row.error_code, usage=row.usage
                    )

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
            check_provider_url(found[1].base_url)
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
        return counting_of(base, calibration)

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
        window = model.context_window
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
            await self._record_refusal(prepared, shape, failure, error.protected_tokens)
            raise failure from None
        prepared.recording = asyncio.create_task(self._record(prepared))
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
        prepared.request, dropped = self._chat_request(call, prepared.model, provider, fitted)
        if dropped:
            kind = "an Anthropic" if provider.kind == "anthropic" else "an OpenAI-compatible"
            note = f"not forwarded to {kind} provider (no such field): {', '.join(dropped)}"
            if fitted.audit is not None:  # made already (the pipeline path)
                fitted.audit["diagnostics"].append(note)
            elif note not in shape.notes:
                shape.notes.append(note)

    @staticmethod
    def _chat_request(
        call: ProxyCall, model: ModelRow, provider: ProviderRow, fitted: fit.Fitted
    ) -> tuple[ChatRequest, list[str]]:
        if provider.kind == "anthropic":
            extra, dropped = anthropic_options(call)
            request = ChatRequest(
                model=model.name,
                messages=fitted.messages,
                system=fitted.system,
                max_tokens=call.max_tokens if call.max_tokens is not None else fitted.reserve,
                stream=call.stream,
                tools=call.tools,
                extra=extra,
            )
            return request, dropped
        extra, dropped = openai_options(call)
        if call.max_tokens is not None:
            extra[call.max_tokens_field] = call.max_tokens
        request = ChatRequest(
            model=model.name,
            messages=fitted.messages,
            system=fitted.system,
            stream=call.stream,
            tools=call.tools,
            extra=extra,
        )
        return request, dropped

    # -- the audit -----------------------------------------------------------------------------------------

    def _payload(self, prepared: Prepared) -> dict[str, Any]:
        """The audit payload of the current fit (building the lean path's entries now), with the estimate."""
        fitted, shape, counting = prepared.fitted, prepared.shape, prepared.counting
        if fitted.audit is None:
            fitted.audit = fit.lean_audit(prepared.source, fitted, shape)
        # T5: the uncalibrated count of what is sent, which the provider's usage calibrates.
        if fitted.kept is not None and shape.profile is counting.base:  # an exact profile: the fit's own count
            estimated = fitted.prompt_tokens - shape.overhead
        elif fitted.kept is not None:
            estimated = counting.base.count_messages(fitted.kept)
        else:
            estimated = payload_tokens({"messages": fitted.messages, "system": fitted.system}, counting.base)
        prepared.estimated = estimated + request_overhead(prepared.call, counting.base)
        base = {
            "provider_id": prepared.provider.id,
            "provider_kind": prepared.provider.kind,
            "model": prepared.model.name,
        }
        payload = {**base, **fitted.audit, "calibration": counting.report(shape.profile)}
        if prepared.attempts:
            payload["attempts"] = list(prepared.attempts)
        return payload

    async def _record(self, prepared: Prepared) -> None:
        """Write the prepared audit (runs while the provider works; see :meth:`_recorded`). It starts once the
        request's body is written (:meth:`_send`): its few ms of work would otherwise hold up the sending
        (a call that never reaches the provider is recorded after :data:`RECORD_WAIT` seconds all the same)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RECORD_WAIT):
                await prepared.sent.wait()
        payload = self._payload(prepared)
        async with self.db.session() as session:
            repos = Repositories(session)
            await repos.proxy_audits.prepare(
                prepared.audit_id,
                user_id=prepared.call.user_id,
                model=prepared.model.name,
                payload=payload,
                excluded_count=prepared.excluded,
                ttl=self.audit_ttl,
                clean=prepared.call.clean,
            )

    async def _recorded(self, prepared: Prepared) -> bool:
        """Wait for the audit to be written; False (logged) when it could not be: the call goes on without."""
        task = prepared.recording
        if task is None:
            return True
        try:
            with anyio.CancelScope(shield=True):
                await asyncio.shield(task)
        except Exception as error:
            log.warning("could not record endpoint audit %s (%s)", prepared.audit_id, type(error).__name__)
            return False
        return True

    async def _record_refusal(
        self, prepared: Prepared, shape: fit.Shape, failure: ContextTooLong, protected: int
    ) -> None:
        payload = {
            "provider_id": prepared.provider.id,
            "provider_kind": prepared.provider.kind,
            "model": prepared.model.name,
            "tokenizer": {"profile": shape.profile.name, "approximate": shape.profile.approximate},
            "budget": {
                "context_limit": shape.window,
                "response_reserve": shape.reserve,
                "prompt_tokens": protected + shape.overhead,
            },
            "context_strategy": shape.strategy,
            "entries": [],
            "provider_messages": [],
            "diagnostics": [*shape.notes, failure.message],
            "excluded_count": 0,
        }
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                repos = Repositories(session)
                await repos.proxy_audits.prepare(
                    prepared.audit_id,
                    user_id=prepared.call.user_id,
                    model=prepared.model.name,
                    payload=payload,
                    excluded_count=0,
                    ttl=self.audit_ttl,
                )
                await repos.proxy_audits.finish(prepared.audit_id, "failed", error_code=failure.code)

    async def _finish(
        self, prepared: Prepared, status: str, *, code: str | None = None, reply: ChatResult | None = None
    ) -> None:
        """End the audit once, and (T5) fold the provider's prompt count into the model's calibration, in
        one transaction. Never fails the call: the caller's answer is already there."""
        recorded = await self._recorded(prepared)
        updates: dict[str, Any] | None = None
        if prepared.attempts:
            sent = prepared.fitted.prompt_tokens
            updates = {"attempts": [*prepared.attempts, {"outcome": status, "prompt_tokens": sent}]}
        usage = reply.usage if reply is not None else None
        note = doubted(prepared.model, prepared.estimated, usage)  # T5: a suspected truncation is not learned
        if note is not None:
            said = list((prepared.fitted.audit or {}).get("diagnostics") or [])
            updates = {**(updates or {}), DOUBTED: note, "diagnostics": [*said, doubt_diagnostic(note)]}
        try:
            with anyio.CancelScope(shield=True):
                async with self.db.session() as session:
                    repos = Repositories(session)
                    if recorded:
                        await repos.proxy_audits.finish(
                            prepared.audit_id,
                            status,
                            error_code=code,
                            usage=_clean_usage(reply),
                            payload_updates=updates,
                        )
                    calibration = None
                    if usage is not None and usage.input_tokens > 0 and prepared.estimated > 0 and note is None:
                        calibration = await repos.calibrations.observe(
                            prepared.model.id,
                            prepared.counting.base.name,
                            prepared.estimated,
                            usage.input_tokens,
                            window=prepared.model.context_window,
                        )
            if calibration is not None:  # the next call's counting, as committed (no read needed)
                reads = self.db.reads
                key = ("calibration", prepared.model.id, prepared.counting.base.name)
                reads.put(key, calibration, reads.stamp("token_calibrations"))
        except Exception as error:
            log.warning("could not finish endpoint audit %s (%s)", prepared.audit_id, type(error).__name__)

    # -- forwarding ---------------------------------------------------------------------------------------

    def _client(self, provider: ProviderRow, deadline: Deadline) -> ProviderClient:
        """N5: a client with the provider's timeouts and what is left of the call's deadline."""
        return open_client(self.client_factory, self.client_options, provider, deadline)

    @staticmethod
    @contextmanager
    def _send(prepared: Prepared, client: ProviderClient) -> Iterator[None]:
        """Around a provider call: ``prepared.sent`` is set when the body is written (by a client that says so;
        else at once), and at the latest when the call ends, however it ends.

        The context variable is not reset: a stream's later events may be read in another context (the
        response's task), where a reset would fail; the task that set it ends with the call's response."""
        if not getattr(client, "signals_sent", False):
            prepared.sent.set()
        request_sent.set(prepared.sent)
        try:
            yield
        finally:
            prepared.sent.set()

    async def _failed(self, prepared: Prepared, error: ProviderError) -> UpstreamFailed:
        await self._finish(prepared, "failed", code=error.code)
        return UpstreamFailed(error, prepared.audit_id, prepared.excluded)

    async def complete(self, prepared: Prepared) -> ChatResult:
        """Send the fitted request and wait for the whole reply (refitted and sent once more after a
        context-length rejection); raises :class:`UpstreamFailed` or :class:`ContextTooLong`.

        The reply is returned once the audit is in the database, while the call's end (status, usage,
        calibration) is still being written: :meth:`settled` waits for it."""
        deadline = Deadline.for_provider(prepared.provider.timeout_seconds)
        while True:
            client = self._client(prepared.provider, deadline)
            try:
                with self._send(prepared, client):
                    reply = await client.complete(prepared.request)
                break
            except ProviderError as error:
                if await self._refit(prepared, error):
                    continue
                raise await self._failed(prepared, error) from None
            except BaseException:
                await self._finish(prepared, "cancelled", code="GENERATION_CANCELLED")
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        await self._recorded(prepared)  # the audit the reply names is written before the reply goes back
        self._finish_later(prepared, "completed", reply=reply)
        return reply

    async def stream(self, prepared: Prepared) -> AsyncGenerator[StreamEvent, None]:
        """Stream the fitted request: ``TextDelta`` events, then one ``Finished``; raises :class:`UpstreamFailed`
        (or :class:`ContextTooLong`, only before the first event).

        A context-length rejection before the first event is refitted and sent once more. Closing the
        iterator early (the caller went away) cancels the provider call and marks the audit ``cancelled``.
        """
        finished: ChatResult | None = None
        started = False
        deadline = Deadline.for_provider(prepared.provider.timeout_seconds)
        while True:
            client = self._client(prepared.provider, deadline)
            try:
                with self._send(prepared, client):
                    async with client.stream(prepared.request) as events:
                        async for event in events:
                            if isinstance(event, Finished):
                                finished = event.result
                            started = True
                            yield event
                break
            except ProviderError as error:
                if not started and await self._refit(prepared, error):
                    continue
                raise await self._failed(prepared, error) from None
            except BaseException:
                await self._finish(prepared, "cancelled", code="GENERATION_CANCELLED")
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
        await self._finish(prepared, "completed", reply=finished)

    async def _refit(self, prepared: Prepared, error: ProviderError) -> bool:
        """T5: after a context-length rejection (once per call), learn the real size, fit again at that ratio
        and say True (send again). Raises :class:`ContextTooLong` when even the protected messages are over.

        With a stated count the ratio is that count over our uncalibrated one, and it is stored as a
        calibration observation; without one the prompt is assumed :data:`RETRY_GROWTH` larger than we
        counted it. A smaller limit stated by the provider replaces the model's window.
        """
        if error.code != PROVIDER_CONTEXT_LENGTH or prepared.attempts:
            return False
        await self._recorded(prepared)  # the audit (and the estimate) first
        counting, shape = prepared.counting, prepared.shape
        estimated, sent = prepared.estimated, prepared.fitted.prompt_tokens
        reported = error.reported_tokens
        calibration = counting.calibration
        if reported and estimated:
            ratio = reported / estimated
            try:
                async with self.db.session() as session:
                    calibration = await Repositories(session).calibrations.observe(
                        prepared.model.id, counting.base.name, estimated, reported
                    )
            except Exception as failure:  # the retry still uses the ratio
                log.warning("could not record the calibration of %s (%s)", prepared.model.id, type(failure).__name__)
        else:
            ratio = (sent / estimated if estimated else 1.0) * RETRY_GROWTH
        window = shape.window
        if error.reported_limit and error.reported_limit < window:
            window = error.reported_limit
        profile = corrected(counting.base, calibration, ratio)
        if profile is None:  # a profile that cannot be scaled: shrink the window instead
            shrunk = shape.reserve + math.floor((window - shape.reserve) / (ratio * 1.02))
            retry_shape = fit.with_profile(shape, shape.profile, shrunk)
        else:
            retry_shape = fit.with_profile(shape, profile, window)
        retry_shape.notes.append(
            f"the provider rejected the prompt as too long; fitted again at {ratio:.3f}x our count and sent once more"
        )
        prepared.attempts.append(
            {
                "outcome": CONTEXT_LENGTH_RETRY,
                "error_code": error.code,
                "prompt_tokens": sent,
                "estimated_tokens": estimated,
                "reported_tokens": reported,
                "reported_limit": error.reported_limit,
                "ratio": round(ratio, 4),
            }
        )
        try:
            self._fit(prepared, retry_shape)
        except TokenBudgetExceeded as budget_error:
            too_long = ContextTooLong(
                prepared.audit_id,
                window,
                retry_shape.reserve,
                retry_shape.overhead,
                budget_error.protected_tokens,
                reported_tokens=reported,
            )
            await self._finish(prepared, "failed", code=too_long.code)
            raise too_long from None
        payload = self._payload(prepared)
        try:
            with anyio.CancelScope(shield=True):
                async with self.db.session() as session:
                    await Repositories(session).proxy_audits.replace(
                        prepared.audit_id, payload, excluded_count=prepared.excluded
                    )
        except Exception as failure:
            log.warning("could not update endpoint audit %s (%s)", prepared.audit_id, type(failure).__name__)
        return True


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
