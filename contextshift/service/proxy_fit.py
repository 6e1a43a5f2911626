"""How the compatible endpoints (V7) fit a caller's messages to a model's window, and what their audit says.

Two request shapes come in: OpenAI's Chat Completions (``dialect="openai"``) and Anthropic's Messages
(``"anthropic"``). Two ways out:

* :func:`fit_lean`, for OpenAI-shaped messages going to an OpenAI-compatible provider: the caller's dicts
  are shifted as they are (the core's lazy dict path), and the kept ones are forwarded exactly as the caller
  wrote them, as their own JSON text when the request came with it (:class:`~contextshift.providers.
  serialize.RawMessages`). The audit's entries are built later, by :func:`lean_audit`, off the request's
  critical path.
* :func:`fit_through_pipeline`, for everything that needs a translation (an Anthropic provider, or an
  Anthropic-shaped request): the prompt pipeline serializes for the provider and recounts the exact wire
  request.

Protected: system (and ``developer``) messages and the last user message that says something (in
Anthropic's shape, a user message of only ``tool_result`` blocks is a tool result, not the question). A tool
call and its results are kept or dropped together.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import TokenBudgetExceeded
from ..core.host import shift_with_strategy
from ..core.messages import Message, as_message, read_message
from ..core.shifting import ShiftResult, shift_context
from ..core.tokens import TokenizerProfile, message_costs
from ..core.vocabulary import FIT, PROTECTED
from ..pipeline import PipelineRequest, PromptBudgetExceeded, Sources, run_pipeline
from ..pipeline.audit import MAX_ENTRIES
from ..providers import to_openai_messages
from ..providers.serialize import RawMessages
from .errors import Refusal, ServiceError

OPENAI = "openai"
ANTHROPIC = "anthropic"
#: The template of an endpoint prompt: the caller's messages, the last user message as the input.
PROXY_TEMPLATE = ("history", "input")
#: Message keys that mean something to contextshift but are not OpenAI's: never honoured from a caller.
CONTEXTSHIFT_KEYS = frozenset({"id", "pinned", "source", "relevance", "workspace", "meta", "toolCallId", "callId"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: Audit entries keep at most this much of a message's text: the caller has the whole text, and a long
#: agent conversation's audit would otherwise store it all again on every call.
MAX_ENTRY_CHARS = 500
#: What :class:`MessageCache` keeps at most, in characters of JSON text: about two 10,000-message requests
#: (4.8 MB each in the endpoint benchmark), some tens of MB with their messages.
DEFAULT_MESSAGE_CACHE_CHARS = 12_000_000
_MESSAGE_ID = re.compile(r"\bm(\d+)\b")


def invalid_request(message: str, param: str | None = None) -> ServiceError:
    return ServiceError(Refusal.INVALID, "INVALID_REQUEST", message, param=param)


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
    """The messages to send (in the provider's wire format) and how they were chosen."""

    messages: list[dict[str, Any]]
    system: str | None
    excluded: int
    reserve: int
    #: Our count of the prompt as budgeted (messages and overhead).
    prompt_tokens: int
    #: The audit payload (a chat audit's fields) when it is already made; else :func:`lean_audit` makes it.
    audit: dict[str, Any] | None = None
    #: The lean path's shift, for :func:`lean_audit`.
    shifted: ShiftResult | None = None
    #: The kept messages when they are sent as they are (then they are what to count).
    kept: list[Message] | None = None


# -- reading the caller's messages ------------------------------------------------------------------------


def last_user_index(raw: Sequence[Any], dialect: str = OPENAI) -> int:
    """The position of the message protected as the caller's input: the last user message (for Anthropic's
    shape, the last one that is not only ``tool_result`` blocks, else the last user message); -1 if none."""
    fallback = -1
    for index in range(len(raw) - 1, -1, -1):
        item = raw[index]
        if not isinstance(item, Mapping) or item.get("role") != "user":
            continue
        if dialect == OPENAI:
            return index
        content = item.get("content")
        if not isinstance(content, list) or any(
            not isinstance(part, Mapping) or part.get("type") != "tool_result" for part in content
        ):
            return index
        if fallback < 0:
            fallback = index
    return fallback


def caller_dicts(raw: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI-shaped request messages as the dicts to shift: ids ``m0``, ``m1``, ..., ``developer`` read as
    ``system``, the last user message pinned, contextshift's own keys dropped (never honoured from a caller)."""
    if not isinstance(raw, list | tuple) or not raw:
        raise invalid_request("messages must be a non-empty list.", "messages")
    last_user = last_user_index(raw)
    out: list[dict[str, Any]] = []
    append = out.append
    for index, item in enumerate(raw):
        if type(item) is not dict:
            raise invalid_request(f"messages[{index}] must be an object.", f"messages[{index}]")
        role = item.get("role")
        if role not in _ROLES:
            raise invalid_request(f"messages[{index}]: unknown role {role!r}.", f"messages[{index}]")
        copy = {**item} if not item.keys() & CONTEXTSHIFT_KEYS else forwardable(item)
        copy["id"] = f"m{index}"
        if role == "developer":
            copy["role"] = "system"
        if index == last_user:
            copy["pinned"] = True
        append(copy)
    return out


def forwardable(item: Mapping[str, Any]) -> dict[str, Any]:
    """A caller's OpenAI message as it is forwarded: without contextshift's keys, ``developer`` as ``system``."""
    out = {k: v for k, v in item.items() if k not in CONTEXTSHIFT_KEYS}
    if out.get("role") == "developer":
        out["role"] = "system"
    return out


def verbatim(item: Mapping[str, Any]) -> bool:
    """Whether a caller's message is forwarded exactly as written (its own JSON text may be reused)."""
    return item.get("role") != "developer" and not item.keys() & CONTEXTSHIFT_KEYS


class MessageCache:
    """Messages already read, by the JSON text they came in, their position and whether they were the
    protected input (V7 speed): an agent sends its whole history again on every call, so at 1,000 messages
    nearly every message of a call was read, checked and built on the call before.

    A message read from the same text at the same position is the same message (the text decides every
    field; the position its id ``m<i>``), so it is taken from here rather than built again. Bounded by the
    characters of the texts it keeps (:data:`DEFAULT_MESSAGE_CACHE_CHARS`), the least recently used going first.
    """

    __slots__ = ("_chars", "_entries", "max_chars")

    def __init__(self, max_chars: int | None = None) -> None:
        self._entries: OrderedDict[tuple[str, int, bool], Message] = OrderedDict()
        self._chars = 0
        self.max_chars = max_chars if max_chars is not None else DEFAULT_MESSAGE_CACHE_CHARS

    def __len__(self) -> int:
        return len(self._entries)

    def messages(self, items: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[Message] | None:
        """The core message of each of :func:`caller_dicts`' ``items``, whose JSON texts as sent are ``texts``;
        None when one cannot be built (then the shift builds them, and says what is wrong as it always has).
        """
        entries = self._entries
        out: list[Message] = []
        append, found, move = out.append, entries.get, entries.move_to_end
        added: list[tuple[tuple[str, int, bool], Message]] = []
        for index, (item, text) in enumerate(zip(items, texts, strict=True)):
            key = (text, index, item.get("pinned") is True)
            message = found(key)
            if message is None:
                try:
                    message = read_message(item, index)
                except (TypeError, ValueError):
                    return None
                added.append((key, message))
            else:
                move(key)
            append(message)
        for key, message in added:
            if len(key[0]) <= self.max_chars:
                entries[key] = message
                self._chars += len(key[0])
        while self._chars > self.max_chars and entries:
            (text, _index, _pinned), _message = entries.popitem(last=False)
            self._chars -= len(text)
        return out


def anthropic_messages(raw: Sequence[Any], system: Any) -> list[Message]:
    """An Anthropic Messages request's ``system`` and ``messages`` as core messages (ids ``system``, ``m0``...)."""
    if not isinstance(raw, list | tuple) or not raw:
        raise invalid_request("messages must be a non-empty list.", "messages")
    out: list[Message] = []
    if system is not None and system != "":
        if not isinstance(system, str) and not (
            isinstance(system, list) and all(isinstance(b, Mapping) and b.get("type") == "text" for b in system)
        ):
            raise invalid_request("system must be a string or a list of text blocks.", "system")
        out.append(Message.from_dict({"role": "system", "content": system, "id": "system", "source": "system"}))
    last_user = last_user_index(raw, ANTHROPIC)
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise invalid_request(f"messages[{index}] must be an object.", f"messages[{index}]")
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise invalid_request(f"messages[{index}]: role must be user or assistant.", f"messages[{index}]")
        content = item.get("content")
        if not isinstance(content, str | list):
            where = f"messages[{index}]"
            raise invalid_request(f"{where}: content must be a string or a list of blocks.", where)
        try:
            data = {"role": role, "content": content, "id": f"m{index}", "source": "history"}
            out.append(Message.from_dict({**data, "pinned": index == last_user}))
        except (TypeError, ValueError) as error:
            raise invalid_request(f"messages[{index}]: {error}", f"messages[{index}]") from None
    return out


def _param_of(error: Exception) -> str:
    found = _MESSAGE_ID.search(str(error))
    return f"messages[{found.group(1)}]" if found else "messages"


# -- fitting -----------------------------------------------------------------------------------------------


def _shift(items: Sequence[Mapping[str, Any]] | Sequence[Message], shape: Shape) -> ShiftResult:
    if shape.budget <= 0:
        raise TokenBudgetExceeded(0, shape.budget)
    try:
        if shape.strategy == "truncate":  # the core's own algorithm: nothing for the strategy host to review
            return shift_context(items, shape.profile, shape.budget)
        return shift_with_strategy(items, shape.profile, shape.budget, strategy=shape.strategy)
    except TokenBudgetExceeded:
        raise
    except (TypeError, ValueError) as error:
        raise invalid_request(f"{error}", _param_of(error)) from None


def fit_lean(
    items: list[dict[str, Any]],
    raw: Sequence[Mapping[str, Any]],
    messages_json: Sequence[str] | None,
    shape: Shape,
    built: Sequence[Message] | None = None,
) -> Fitted:
    """Shift the caller's dicts (:func:`caller_dicts`) and forward the kept ones as the caller sent them
    (``raw``; with ``messages_json``, as their own JSON text). ``built``: the dicts' messages when they are
    at hand already (:class:`MessageCache`), the same shift without reading the dicts again. Raises
    ``TokenBudgetExceeded`` when the protected messages alone do not fit."""
    shifted = _shift(built if built is not None else items, shape)
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    forwarded = 0
    for message in shifted.kept:
        index = _position(message.id, len(raw))
        if index is not None:
            original = raw[index]
            if verbatim(original):
                out.append(original)  # type: ignore[arg-type]
                texts.append(messages_json[index] if messages_json is not None else "")
            else:
                out.append(forwardable(original))
                texts.append("")
            forwarded += 1
        else:  # written by the strategy (a summary, a shortened message)
            for written in to_openai_messages([message]):
                out.append(written)
                texts.append("")
    messages: list[dict[str, Any]] = out
    if messages_json is not None:
        parts = [
            text or json.dumps(m, ensure_ascii=False, separators=(",", ":")) for text, m in zip(texts, out, strict=True)
        ]
        messages = RawMessages(out, "[" + ",".join(parts) + "]")
    return Fitted(
        messages,
        None,
        len(raw) - forwarded,
        shape.reserve,
        shifted.tokens + shape.overhead,
        shifted=shifted,
        kept=list(shifted.kept),
    )


def _position(message_id: str, size: int) -> int | None:
    if message_id.startswith("m") and message_id[1:].isdigit():
        index = int(message_id[1:])
        if index < size:
            return index
    return None


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


def lean_audit(items: list[dict[str, Any]], fitted: Fitted, shape: Shape) -> dict[str, Any]:
    """The audit payload of a :func:`fit_lean` fit: a chat audit's fields, every message in order with its
    tokens and reason (over :data:`MAX_ENTRIES`, the first and the last half of them)."""
    shifted = fitted.shifted
    assert shifted is not None
    extra = len(shifted.truncated) + (1 if shape.overhead else 0)
    total = len(items) + extra
    half = MAX_ENTRIES // 2
    listed: Sequence[int] = range(len(items))
    if total > MAX_ENTRIES:
        listed = [*range(min(half, len(items))), *range(max(total - half, half), len(items))]
    built = {m.id: m for m in shifted.kept}
    messages = [built.get(items[i]["id"]) or as_message(items[i]) for i in listed]
    costs, _ = message_costs(messages, shape.profile, 4)
    kept = {m.id for m in shifted.kept}
    entries: list[dict[str, Any]] = []
    for index, message, cost in zip(listed, messages, costs, strict=True):
        included = message.id in kept
        reason = (PROTECTED if message.protected else FIT) if included else shifted.reasons.get(message.id)
        entries.append(
            {
                "identifier": message.id,
                "role": message.role,
                "source": "input" if message.pinned else ("system" if message.role == "system" else "history"),
                "content": _clip(message.text),
                "tokens": cost,
                "included": included,
                "reason": reason or "context-shift",
                "order": index,
                "name": message.name,
                "relevance": None,
            }
        )
    order = len(items)
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
                "order": order,
                "name": replacement.name,
                "relevance": None,
                "stands_for": list(truncation.source_ids),
            }
        )
        order += 1
    if shape.overhead:
        entries.append(_tools_entry(shape, order))
    diagnostics = [*shape.notes, *shifted.diagnostics]
    if total > MAX_ENTRIES:  # bounded like a chat audit's; the start and the end of the prompt are listed
        diagnostics.append(f"{total - 2 * half} entries in the middle of the prompt are not listed")
        entries = entries[:half] + entries[-half:]
    diagnostics.append(
        f'tokenizer "{shape.profile.name}" is approximate'
        if shape.profile.approximate
        else f'tokenizer "{shape.profile.name}" selected'
    )
    diagnostics.append("provider messages: the included entries, sent exactly as the caller wrote them")
    return {
        "tokenizer": {"profile": shape.profile.name, "approximate": shape.profile.approximate},
        "budget": {
            "context_limit": shape.window,
            "response_reserve": shape.reserve,
            "prompt_tokens": fitted.prompt_tokens,
        },
        "context_strategy": shifted.strategy,
        "entries": entries,
        "provider_messages": [],
        "diagnostics": diagnostics,
        "excluded_count": fitted.excluded,
        "max_tokens": shape.reserve,
    }


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
        list(payload["messages"]),
        payload.get("system") or None,
        result.excluded_count,
        result.max_tokens,
        audit["budget"]["prompt_tokens"],
        audit=audit,
    )


def with_profile(shape: Shape, profile: TokenizerProfile, window: int) -> Shape:
    """``shape`` measured with another profile and window (a refit after a context-length rejection)."""
    return replace(shape, profile=profile, window=window, notes=list(shape.notes))


__all__ = [
    "ANTHROPIC",
    "DEFAULT_MESSAGE_CACHE_CHARS",
    "MAX_ENTRY_CHARS",
    "OPENAI",
    "Fitted",
    "MessageCache",
    "Shape",
    "anthropic_messages",
    "caller_dicts",
    "fit_lean",
    "fit_through_pipeline",
    "invalid_request",
    "last_user_index",
    "lean_audit",
]
