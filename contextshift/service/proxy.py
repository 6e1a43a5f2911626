"""The OpenAI-compatible endpoint's work (V7): fit a caller's request to a model's window, forward it, audit it.

A :class:`ProxyCall` is what a caller asked for, in OpenAI's vocabulary. :meth:`ProxyService.prepare`
resolves the model (by name or id; enabled, on an enabled provider), fits the messages with the prompt
pipeline (the same shifting, strategies and audit entries as a chat), and records the audit before anything
is sent. :meth:`ProxyService.complete` and :meth:`ProxyService.stream` forward the fitted request to the
model's provider and finish the audit exactly once.

Fitting rules:

* the budget is the model's window, minus the reply reserve (the request's ``max_tokens`` or
  ``max_completion_tokens``; else the smallest of :data:`DEFAULT_RESERVE`, the model's ``max_output_tokens``
  and a quarter of the window, as for a bot), minus
  the tokens of the tool definitions and other request options that travel with the messages;
* system (and ``developer``) messages and the last user message are protected; tool calls and their results
  are removed together or not at all;
* kept messages go to an OpenAI-compatible provider exactly as the caller sent them (contextshift's own
  message keys such as ``pinned`` or ``meta`` are not honoured nor forwarded); an Anthropic provider gets
  them translated.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio

from ..core import limits
from ..core.errors import ContextShiftError, TokenBudgetExceeded
from ..core.host import default_registry, shift_with_strategy
from ..core.messages import Message
from ..core.shifting import shift_context
from ..core.tokens import TokenizerProfile, message_costs
from ..core.vocabulary import FIT, PROTECTED
from ..pipeline import PipelineRequest, PromptBudgetExceeded, Sources, payload_tokens, run_pipeline
from ..pipeline.audit import MAX_ENTRIES
from ..providers import (
    PROVIDER_CONTEXT_LENGTH,
    ChatRequest,
    ChatResult,
    Finished,
    ProviderClient,
    ProviderError,
    StreamEvent,
    Usage,
    make_client,
    to_openai_messages,
)
from ..storage import Database, Repositories
from ..storage.tables import ModelRow, ProviderRow
from .calibration import Counting, counting_for, learn
from .errors import Refusal, ServiceError
from .provider_hosts import check_provider_url
from .turn import DEFAULT_CONTEXT_LIMIT, profile_for, serializer_for

log = logging.getLogger("contextshift.proxy")

ClientFactory = Callable[..., ProviderClient]

#: The reply reserve when the request sets no ``max_tokens`` (at most; see ``core.limits.reply_reserve``).
DEFAULT_RESERVE = limits.DEFAULT_REPLY_RESERVE
#: How long an endpoint audit is kept unless ``CONTEXTSHIFT_PROXY_AUDIT_HOURS`` says otherwise.
DEFAULT_AUDIT_TTL = timedelta(hours=24)
#: The template of an endpoint prompt: the caller's messages, the last user message as the input.
PROXY_TEMPLATE = ("history", "input")
#: Message keys that mean something to contextshift but are not OpenAI's: never honoured from a caller.
_CONTEXTSHIFT_KEYS = frozenset({"id", "pinned", "source", "relevance", "workspace", "meta", "toolCallId", "callId"})
#: Options translated for an Anthropic provider; any other option is not forwarded there (and the audit says so).
_ANTHROPIC_SAME = ("temperature", "top_p", "top_k")
_SIMPLE_ROLES = frozenset({"system", "user", "assistant", "tool"})
#: Audit entries keep at most this much of a message's text: the caller has the whole text, and a long
#: agent conversation's audit would otherwise store it all again on every call.
MAX_ENTRY_CHARS = 500


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


def invalid_request(message: str, param: str | None = None) -> ServiceError:
    return ServiceError(Refusal.INVALID, "INVALID_REQUEST", message, param=param)


class ContextTooLong(ServiceError):
    """400: the protected messages (system messages, the last user message) alone exceed the budget."""

    def __init__(self, audit_id: str, window: int, reserve: int, overhead: int, protected: int) -> None:
        needed = protected + overhead
        super().__init__(
            Refusal.INVALID,
            "CONTEXT_LENGTH_EXCEEDED",
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{needed} tokens that cannot be dropped (system messages, the last user message"
            f"{', tool definitions' if overhead else ''}) with {reserve} tokens reserved for the reply. "
            "Please reduce the length of the messages or of the completion.",
            param="messages",
            context_limit=window,
            response_reserve=reserve,
            prompt_tokens=needed,
        )
        self.audit_id = audit_id


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
    """One request to the endpoint, in OpenAI's vocabulary."""

    model: str
    messages: Sequence[Mapping[str, Any]]
    stream: bool = False
    #: ``max_tokens`` or ``max_completion_tokens`` of the request (``max_tokens_field`` says which).
    max_tokens: int | None = None
    max_tokens_field: str = "max_tokens"
    strategy: str | None = None
    tools: list[dict[str, Any]] | None = None
    #: Every other field of the request (``tool_choice``, ``temperature``, ``response_format``, ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The signed-in caller: the audit is theirs.
    user_id: str = ""


@dataclass(slots=True)
class Prepared:
    """A fitted call with its audit prepared: ready to send."""

    audit_id: str
    model: ModelRow
    provider: ProviderRow
    fitted: Fitted
    request: ChatRequest
    excluded: int
    #: T5: the model's counting, and its uncalibrated count of the request (what usage calibrates).
    counting: Counting | None = None
    estimated: int = 0


def core_messages(raw: Sequence[Mapping[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """The request's messages as core messages (ids ``m0``, ``m1``, ...) and as the wire dicts to forward."""
    if not isinstance(raw, list | tuple) or not raw:
        raise invalid_request("messages must be a non-empty list.", "messages")
    last_user = next(
        (i for i in range(len(raw) - 1, -1, -1) if isinstance(raw[i], Mapping) and raw[i].get("role") == "user"), -1
    )
    messages: list[Message] = []
    wire: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise invalid_request(f"messages[{index}] must be an object.", f"messages[{index}]")
        role = item.get("role")
        if role == "developer":
            role = "system"
        source = "system" if role == "system" else "history"
        content, name, link = item.get("content"), item.get("name"), item.get("tool_call_id")
        try:
            if (
                role in _SIMPLE_ROLES
                and (content is None or type(content) is str)
                and not item.get("tool_calls")
                and (name is None or type(name) is str)
                and (link is None or type(link) is str)
            ):  # the common case, built directly (from_dict costs several times more)
                message = Message(
                    role=role,
                    content=content,
                    id=f"m{index}",
                    name=name,
                    tool_call_id=link or None,
                    pinned=index == last_user,
                    source=source,  # type: ignore[arg-type]
                )
            else:
                data = {k: item[k] for k in ("content", "name", "tool_calls", "tool_call_id") if k in item}
                data.update(role=role, id=f"m{index}", source=source, pinned=index == last_user)
                message = Message.from_dict(data)
        except (TypeError, ValueError) as error:
            raise invalid_request(f"messages[{index}]: {error}", f"messages[{index}]") from None
        messages.append(message)
        out = {k: v for k, v in item.items() if k not in _CONTEXTSHIFT_KEYS}
        out["role"] = role
        wire.append(out)
    return messages, wire


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


# -- fitting --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """What a fit is measured against."""

    profile: TokenizerProfile
    window: int
    reserve: int
    #: Tokens of the tool definitions and options that travel with the messages.
    overhead: int
    strategy: str
    notes: list[str]
    tools: list[dict[str, Any]] | None

    @property
    def budget(self) -> int:
        """What the messages may use: the window less the reply reserve and the overhead."""
        return self.window - self.reserve - self.overhead


@dataclass(slots=True)
class Fitted:
    """The messages to send (in the provider's wire format) and the audit of how they were chosen."""

    messages: list[dict[str, Any]]
    system: str | None
    #: The audit payload (a chat audit's fields: tokenizer, budget, entries, ...), without provider and model.
    audit: dict[str, Any]
    excluded: int
    reserve: int
    #: The kept messages, when they are sent as they are (then they are what to count).
    kept: list[Message] | None = None


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ENTRY_CHARS else text[:MAX_ENTRY_CHARS] + "…"


def _tools_entry(shape: Shape, order: int) -> dict[str, Any]:
    return {
        "identifier": "request.tools",
        "role": "system",
        "source": "system",
        "content": _clip(json.dumps(shape.tools or [], ensure_ascii=False)),
        "tokens": shape.overhead,
        "included": True,
        "reason": PROTECTED,
        "order": order,
        "name": "tools",
        "relevance": None,
    }


def fit_for_openai(messages: list[Message], wire: list[dict[str, Any]], shape: Shape) -> Fitted:
    """Shift ``messages`` to the budget and forward the kept ones as the caller sent them.

    The lean path for OpenAI-compatible providers: the wire messages are the caller's own, so the shift's
    whole-prompt count of the kept messages (S2, S6) is the count of what is sent; no reserialization.
    Raises ``TokenBudgetExceeded`` when the protected messages alone do not fit.
    """
    if shape.budget <= 0:
        raise TokenBudgetExceeded(0, shape.budget)
    if shape.strategy == "truncate":  # the core's own algorithm: nothing for the strategy host to review
        shifted = shift_context(messages, shape.profile, shape.budget)
    else:
        shifted = shift_with_strategy(messages, shape.profile, shape.budget, strategy=shape.strategy)
    by_id = {f"m{i}": w for i, w in enumerate(wire)}
    out: list[dict[str, Any]] = []
    forwarded = 0
    for message in shifted.kept:
        original = by_id.get(message.id)
        if original is not None:
            out.append(original)
            forwarded += 1
        else:  # written by the strategy (a summary, a shortened message)
            out.extend(to_openai_messages([message]))
    costs, _ = message_costs(messages, shape.profile, 4)
    kept = {m.id for m in shifted.kept}
    last_user = next((m.id for m in reversed(messages) if m.role == "user"), None)
    entries: list[dict[str, Any]] = []
    for order, (message, cost) in enumerate(zip(messages, costs, strict=True)):
        included = message.id in kept
        reason = (PROTECTED if message.protected else FIT) if included else shifted.reasons.get(message.id)
        entries.append(
            {
                "identifier": message.id,
                "role": message.role,
                "source": "input" if message.id == last_user else (message.source or "history"),
                "content": _clip(message.text),
                "tokens": cost,
                "included": included,
                "reason": reason or "context-shift",
                "order": order,
                "name": message.name,
                "relevance": None,
            }
        )
    for truncation in shifted.truncated:
        replacement = truncation.replacement
        entries.append(
            {
                "identifier": replacement.id,
                "role": replacement.role,
                "source": replacement.source or "summary",
                "content": _clip(replacement.text),
                "tokens": truncation.tokens_after,
                "included": replacement.id in kept,
                "reason": "fit",
                "order": len(entries),
                "name": replacement.name,
                "relevance": None,
                "stands_for": list(truncation.source_ids),
            }
        )
    if shape.overhead:
        entries.append(_tools_entry(shape, len(entries)))
    excluded = len(messages) - forwarded
    diagnostics = [*shape.notes, *shifted.diagnostics]
    if len(entries) > MAX_ENTRIES:  # bounded like a chat audit's; the start and the end of the prompt are listed
        half = MAX_ENTRIES // 2
        diagnostics.append(f"{len(entries) - 2 * half} entries in the middle of the prompt are not listed")
        entries = entries[:half] + entries[-half:]
    diagnostics.append(
        f'tokenizer "{shape.profile.name}" is approximate'
        if shape.profile.approximate
        else f'tokenizer "{shape.profile.name}" selected'
    )
    diagnostics.append("provider messages: the included entries, sent exactly as the caller wrote them")
    audit = {
        "tokenizer": {"profile": shape.profile.name, "approximate": shape.profile.approximate},
        "budget": {
            "context_limit": shape.window,
            "response_reserve": shape.reserve,
            "prompt_tokens": shifted.tokens + shape.overhead,
        },
        "context_strategy": shifted.strategy,
        "entries": entries,
        "provider_messages": [],
        "diagnostics": diagnostics,
        "excluded_count": excluded,
        "max_tokens": shape.reserve,
    }
    return Fitted(out, None, audit, excluded, shape.reserve, list(shifted.kept))


def fit_through_pipeline(
    messages: list[Message], shape: Shape, serializer: Callable[[list[Message]], dict[str, Any]], model: str
) -> Fitted:
    """Fit with the prompt pipeline, which serializes for the provider and recounts the exact wire request
    (a translation, e.g. to Anthropic's shape, may cost more than the messages did)."""
    request = PipelineRequest(
        sources=Sources(history=messages),
        profile=shape.profile,
        context_limit=shape.window - shape.overhead,
        response_reserve=shape.reserve,
        strategy=shape.strategy,
        template=PROXY_TEMPLATE,
        serializer=serializer,
        model=model,
        notes=shape.notes,
    )
    try:
        result = run_pipeline(request)
    except PromptBudgetExceeded as error:
        protected = int(str(error.params.get("prompt_tokens", error.protected_tokens)))
        raise TokenBudgetExceeded(protected, shape.budget) from None
    audit = result.to_dict()
    audit["budget"]["context_limit"] = shape.window
    audit["budget"]["prompt_tokens"] += shape.overhead
    if shape.overhead:
        audit["entries"].append(_tools_entry(shape, len(audit["entries"])))
    payload = result.payload
    return Fitted(
        list(payload["messages"]), payload.get("system") or None, audit, result.excluded_count, result.max_tokens
    )


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
        candidates = [m for m in await repos.models.list_all() if m.type == "chat" and m.enabled]
        chosen = next((m for m in candidates if m.id == name), None) or next(
            (m for m in candidates if m.name == name), None
        )
        provider = await repos.providers.get(chosen.provider_id) if chosen is not None else None
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

    async def prepare(self, call: ProxyCall) -> Prepared:
        """Resolve, fit and audit ``call``; raises ``ServiceError`` (``ContextTooLong`` among them)."""
        async with self.db.session(write=False) as session:  # reads only: no turn at the write lock
            repos = Repositories(session)
            model, provider = await self._resolve(repos, call.model)
            counting = await counting_for(repos, model, profile_for(model))  # T5: calibrated counts
        strategy = call.strategy or "truncate"
        if strategy not in default_registry:
            raise invalid_request(
                f"Unknown context strategy {strategy!r}; registered: {', '.join(default_registry.names())}.",
                "contextshift.strategy",
            )
        if call.options.get("n") not in (None, 1):
            raise invalid_request("Only n=1 is supported.", "n")
        messages, wire = core_messages(call.messages)
        profile = counting.profile
        notes: list[str] = []
        window = model.context_window
        if window is None:
            window = DEFAULT_CONTEXT_LIMIT
            notes.append(f"context window unknown; assuming {DEFAULT_CONTEXT_LIMIT} tokens")
        reserve = reply_reserve(call, model, window)
        overhead = request_overhead(call, profile)
        if overhead:
            notes.append(f"{overhead} tokens of tool definitions and request options count against the window")
        audit_id = uuid.uuid4().hex
        base = {"provider_id": provider.id, "provider_kind": provider.kind, "model": model.name}
        shape = Shape(profile, window, reserve, overhead, strategy, notes, call.tools)
        try:
            if provider.kind == "anthropic":
                fitted = fit_through_pipeline(messages, shape, serializer_for("anthropic"), model.name)
            else:
                fitted = fit_for_openai(messages, wire, shape)
        except TokenBudgetExceeded as error:
            failure = ContextTooLong(audit_id, window, reserve, overhead, error.protected_tokens)
            payload = {
                **base,
                "tokenizer": {"profile": profile.name, "approximate": profile.approximate},
                "budget": {
                    "context_limit": window,
                    "response_reserve": reserve,
                    "prompt_tokens": error.protected_tokens + overhead,
                },
                "context_strategy": strategy,
                "entries": [],
                "provider_messages": [],
                "diagnostics": [*notes, failure.message],
                "excluded_count": 0,
            }
            await self._record(audit_id, call, model, payload, 0, failed=failure.code)
            raise failure from None
        request, dropped = self._chat_request(call, model, provider, fitted)
        if dropped:
            fitted.audit["diagnostics"].append(
                f"not forwarded to an Anthropic provider (no such field): {', '.join(dropped)}"
            )
        await self._record(
            audit_id, call, model, {**base, **fitted.audit, "calibration": counting.report()}, fitted.excluded
        )
        # T5: the uncalibrated count of what is sent, which the provider's usage calibrates.
        if fitted.kept is not None:
            estimated = counting.base.count_messages(fitted.kept)
        else:
            estimated = payload_tokens({"messages": fitted.messages, "system": fitted.system}, counting.base)
        estimated += request_overhead(call, counting.base)
        return Prepared(audit_id, model, provider, fitted, request, fitted.excluded, counting, estimated)

    @staticmethod
    def _chat_request(
        call: ProxyCall, model: ModelRow, provider: ProviderRow, fitted: Fitted
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
        extra = {k: v for k, v in call.options.items() if k not in ("stream", "stream_options")}
        if call.max_tokens is not None:
            extra[call.max_tokens_field] = call.max_tokens
        request = ChatRequest(
            model=model.name, messages=fitted.messages, stream=call.stream, tools=call.tools, extra=extra
        )
        return request, []

    async def _record(
        self,
        audit_id: str,
        call: ProxyCall,
        model: ModelRow,
        payload: dict[str, Any],
        excluded: int,
        *,
        failed: str | None = None,
    ) -> None:
        async with self.db.session() as session:
            repos = Repositories(session)
            await repos.proxy_audits.prepare(
                audit_id,
                user_id=call.user_id,
                model=model.name,
                payload=payload,
                excluded_count=excluded,
                ttl=self.audit_ttl,
            )
            if failed is not None:
                await repos.proxy_audits.finish(audit_id, "failed", error_code=failed)

    # -- forwarding ---------------------------------------------------------------------------------------

    def _client(self, provider: ProviderRow) -> ProviderClient:
        return self.client_factory(provider.kind, provider.base_url, provider.api_key, **self.client_options)

    async def _finish(
        self, prepared: Prepared, status: str, *, code: str | None = None, reply: ChatResult | None = None
    ) -> None:
        usage = None
        if reply is not None and reply.usage is not None:
            usage = {
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
                "cached_input_tokens": reply.usage.cached_input_tokens,
            }
        with anyio.CancelScope(shield=True):
            async with self.db.session() as session:
                await Repositories(session).proxy_audits.finish(prepared.audit_id, status, error_code=code, usage=usage)

    @contextlib.asynccontextmanager
    async def _forwarding(self, prepared: Prepared) -> AsyncIterator[ProviderClient]:
        """The provider's client for one forwarded call, and the one failure path of :meth:`complete` and
        :meth:`stream`: a provider error finishes the audit ``failed`` (after teaching the calibration what a
        context-length rejection says) and raises :class:`UpstreamFailed`; anything else (a cancellation, the
        caller gone) finishes it ``cancelled`` and propagates. The client is closed either way."""
        client = self._client(prepared.provider)
        try:
            yield client
        except ProviderError as error:
            await self._learn_from_rejection(prepared, error)
            await self._finish(prepared, "failed", code=error.code)
            raise UpstreamFailed(error, prepared.audit_id, prepared.excluded) from None
        except BaseException:
            await self._finish(prepared, "cancelled", code="GENERATION_CANCELLED")
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    async def complete(self, prepared: Prepared) -> ChatResult:
        """Send the fitted request and wait for the whole reply; raises :class:`UpstreamFailed`."""
        async with self._forwarding(prepared) as client:
            reply = await client.complete(prepared.request)
        await self._finish(prepared, "completed", reply=reply)
        await self._learn(prepared, reply)
        return reply

    async def stream(self, prepared: Prepared) -> AsyncGenerator[StreamEvent, None]:
        """Stream the fitted request: ``TextDelta`` events, then one ``Finished``; raises :class:`UpstreamFailed`.

        Closing the iterator early (the caller went away) cancels the provider call and marks the audit
        ``cancelled``.
        """
        finished: ChatResult | None = None
        async with self._forwarding(prepared) as client, client.stream(prepared.request) as events:
            async for event in events:
                if isinstance(event, Finished):
                    finished = event.result
                yield event
        await self._finish(prepared, "completed", reply=finished)
        await self._learn(prepared, finished)

    async def _learn_from_rejection(self, prepared: Prepared, error: ProviderError) -> None:
        """T5: a context-length rejection that states the real count teaches the factor, so the caller's
        next request fits (the endpoint does not resend on its own)."""
        if error.code != PROVIDER_CONTEXT_LENGTH or not error.reported_tokens or prepared.counting is None:
            return
        usage = Usage(input_tokens=error.reported_tokens)
        await learn(self.db, prepared.model, prepared.counting.base, prepared.estimated, usage)

    async def _learn(self, prepared: Prepared, reply: ChatResult | None) -> None:
        """T5: the provider's prompt tokens calibrate the model's estimates, as for chat generations."""
        if prepared.counting is not None and reply is not None:
            await learn(self.db, prepared.model, prepared.counting.base, prepared.estimated, reply.usage)


__all__ = [
    "DEFAULT_AUDIT_TTL",
    "DEFAULT_RESERVE",
    "ContextTooLong",
    "Prepared",
    "ProxyCall",
    "ProxyService",
    "UpstreamFailed",
    "anthropic_options",
    "core_messages",
]
