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
from operator import eq
from typing import Any

import orjson

from ..core.errors import TokenBudgetExceeded
from ..core.host import shift_with_strategy
from ..core.messages import Message, as_message, read_message
from ..core.shifting import ShiftResult, shift_context
from ..core.tokens import TokenizerProfile, message_costs
from ..core.vocabulary import CONTEXT_SHIFT, FIT, PROTECTED
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
#: What :class:`MessageCache` keeps at most, in bytes of JSON: about two 10,000-message requests
#: (4.8 MB each in the endpoint benchmark), some tens of MB with their messages.
DEFAULT_MESSAGE_CACHE_BYTES = 12_000_000
_MESSAGE_ID = re.compile(r"\bm(\d+)\b")
#: How many whole requests :class:`MessageCache` keeps for the start of the next one.
HISTORIES = 64


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
    _check_list(raw)
    last_user = last_user_index(raw)
    return [caller_dict(item, index, index == last_user) for index, item in enumerate(raw)]


def _check_list(raw: Any) -> None:
    if not isinstance(raw, list | tuple) or not raw:
        raise invalid_request("messages must be a non-empty list.", "messages")


def caller_dict(item: Any, index: int, last_user: bool) -> dict[str, Any]:
    """One of :func:`caller_dicts`' dicts: the caller's message ``item`` at ``index``, checked and copied."""
    if type(item) is not dict:
        raise invalid_request(f"messages[{index}] must be an object.", f"messages[{index}]")
    role = item.get("role")
    if role not in _ROLES:
        raise invalid_request(f"messages[{index}]: unknown role {role!r}.", f"messages[{index}]")
    copy = {**item} if not item.keys() & CONTEXTSHIFT_KEYS else forwardable(item)
    copy["id"] = f"m{index}"
    if role == "developer":
        copy["role"] = "system"
    if last_user:
        copy["pinned"] = True
    return copy


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
    """Messages already read, by the JSON they came in (``jsonspans``), their position and whether they were the
    protected input (V7 speed): an agent sends its whole history again on every call, so at 1,000 messages
    nearly every message of a call was read, checked and built on the call before.

    A message read from the same JSON at the same position is the same message (the JSON decides every
    field; the position its id ``m<i>``), so it is taken from here rather than built again. Bounded by the
    bytes of the JSON it keeps (:data:`DEFAULT_MESSAGE_CACHE_BYTES`), the least recently used going first.

    The last requests are also kept whole, by their first message's JSON (:data:`HISTORIES` of them, within
    the same bound): a request that starts as one of them did, as an agent's next call does, takes that
    common start as it is, found by comparing the JSON in order rather than looking each message up.
    """

    __slots__ = ("_bytes", "_entries", "_histories", "_history_bytes", "max_bytes")

    def __init__(self, max_bytes: int | None = None) -> None:
        self._entries: OrderedDict[tuple[bytes, int, bool], Message] = OrderedDict()
        self._bytes = 0
        self.max_bytes = max_bytes if max_bytes is not None else DEFAULT_MESSAGE_CACHE_BYTES
        #: By first message's JSON: (every message's JSON, the messages, the protected input's position, bytes).
        self._histories: OrderedDict[bytes, tuple[Sequence[bytes], list[Message], int, int]] = OrderedDict()
        self._history_bytes = 0

    def _common_start(self, texts: Sequence[bytes], last_user: int) -> list[Message]:
        """The messages of the longest start ``texts`` share with a kept request, each at the same place with
        the same protection."""
        earlier = self._histories.get(texts[0])
        if earlier is None:
            return []
        old_texts, old_messages, old_last, _size = earlier
        same = list(map(eq, texts, old_texts))  # C speed; as long as the shorter of the two
        prefix = same.index(False) if False in same else len(same)
        if old_last != last_user:  # the protected input moved: neither place is the same message any more
            prefix = min(prefix, *(i for i in (old_last, last_user) if i >= 0))
        return old_messages[:prefix]

    def _keep_history(self, texts: Sequence[bytes], messages: list[Message], last_user: int) -> None:
        size = sum(map(len, texts))
        if size > self.max_bytes:
            return
        histories = self._histories
        replaced = histories.pop(texts[0], None)
        if replaced is not None:
            self._history_bytes -= replaced[3]
        histories[texts[0]] = (texts, messages, last_user, size)
        self._history_bytes += size
        while (self._history_bytes > self.max_bytes or len(histories) > HISTORIES) and histories:
            _first, dropped = histories.popitem(last=False)
            self._history_bytes -= dropped[3]

    def __len__(self) -> int:
        return len(self._entries)

    def messages(self, raw: Sequence[Any], texts: Sequence[bytes]) -> list[Message] | None:
        """The core message of each of the caller's messages ``raw`` (as :func:`caller_dicts` reads them),
        whose JSON as sent is ``texts``; None when one cannot be built (then the shift builds them from
        :func:`caller_dicts`, and says what is wrong as it always has). A message found here is not read,
        checked nor copied again: the same JSON at the same place was all of that before.

        Raises:
            ServiceError: ``INVALID_REQUEST``, as :func:`caller_dicts` does.
        """
        _check_list(raw)
        last_user = last_user_index(raw)
        entries = self._entries
        out = self._common_start(texts, last_user) if texts else []
        append, found, move = out.append, entries.get, entries.move_to_end
        added: list[tuple[tuple[bytes, int, bool], Message]] = []
        for index in range(len(out), len(texts)):
            text = texts[index]
            key = (text, index, index == last_user)
            message = found(key)
            if message is None:
                item = caller_dict(raw[index], index, index == last_user)
                try:
                    message = read_message(item, index)
                except (TypeError, ValueError):
                    return None
                added.append((key, message))
            else:
                move(key)
            append(message)
        for key, message in added:
            if len(key[0]) <= self.max_bytes:
                entries[key] = message
                self._bytes += len(key[0])
        while self._bytes > self.max_bytes and entries:
            (text, _index, _pinned), _message = entries.popitem(last=False)
            self._bytes -= len(text)
        if texts:
            self._keep_history(texts, list(out), last_user)
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
    messages_json: Sequence[bytes] | None,
    shape: Shape,
    built: Sequence[Message] | None = None,
) -> Fitted:
    """Shift the caller's dicts (:func:`caller_dicts`) and forward the kept ones as the caller sent them
    (``raw``; with ``messages_json``, as their own JSON). ``built``: the dicts' messages when they are
    at hand already (:class:`MessageCache`), the same shift without reading the dicts again. Raises
    ``TokenBudgetExceeded`` when the protected messages alone do not fit."""
    shifted = _shift(built if built is not None else items, shape)
    kept = shifted.kept
    if _all_kept(shifted, items, built) and all(map(verbatim, raw)):  # the whole request, as the caller wrote it
        whole: list[dict[str, Any]] = list(raw)  # type: ignore[arg-type]
        return Fitted(
            RawMessages(whole, b"[" + b",".join(messages_json) + b"]") if messages_json is not None else whole,
            None,
            0,
            shape.reserve,
            shifted.tokens + shape.overhead,
            shifted=shifted,
            kept=list(kept),
        )
    out: list[dict[str, Any]] = []
    texts: list[bytes] = []
    forwarded = 0
    for message in kept:
        index = _position(message.id, len(raw))
        if index is not None:
            original = raw[index]
            if verbatim(original):
                out.append(original)  # type: ignore[arg-type]
                texts.append(messages_json[index] if messages_json is not None else b"")
            else:
                out.append(forwardable(original))
                texts.append(b"")
            forwarded += 1
        else:  # written by the strategy (a summary, a shortened message)
            for written in to_openai_messages([message]):
                out.append(written)
                texts.append(b"")
    messages: list[dict[str, Any]] = out
    if messages_json is not None:
        parts = [text or json_bytes(m) for text, m in zip(texts, out, strict=True)]
        messages = RawMessages(out, b"[" + b",".join(parts) + b"]")
    return Fitted(
        messages,
        None,
        len(raw) - forwarded,
        shape.reserve,
        shifted.tokens + shape.overhead,
        shifted=shifted,
        kept=list(shifted.kept),
    )


def json_bytes(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (``json`` for what orjson cannot write: an integer past 64 bits, say)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _all_kept(shifted: ShiftResult, items: Sequence[Mapping[str, Any]], built: Sequence[Message] | None) -> bool:
    """Whether the shift kept every message as it was, in order (nothing left out, shortened nor written)."""
    kept = shifted.kept
    if len(kept) != len(items) or shifted.truncated:
        return False
    if built is not None:
        return all(a is b for a, b in zip(kept, built, strict=True))
    return all(m.id == item["id"] for m, item in zip(kept, items, strict=True))


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


def _audited(item: dict[str, Any] | Message, built: Mapping[str, Message]) -> Message:
    if isinstance(item, Message):
        return item
    return built.get(item["id"]) or as_message(item)


def lean_audit(items: Sequence[dict[str, Any]] | Sequence[Message], fitted: Fitted, shape: Shape) -> dict[str, Any]:
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
    messages = [_audited(items[i], built) for i in listed]
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
                "reason": reason or CONTEXT_SHIFT,
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
                "reason": FIT,
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
    "DEFAULT_MESSAGE_CACHE_BYTES",
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
