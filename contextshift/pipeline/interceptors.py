"""Prompt interceptors (G7): plugin hooks that may edit the prompt after shifting.

An interceptor is any object with a ``name``, a ``priority`` (lower runs first; default 100) and a call
``interceptor(messages, context) -> list[Message]``. The host runs each with a timeout and then holds the
line: protected messages come back exactly as they were (removed ones are restored in place, edited ones
are replaced by the originals), messages an interceptor adds are never protected, and a failing
interceptor is skipped with a diagnostic. A final shift after all interceptors enforces the budget, and it
drops interceptor additions before any original message, so appending cannot slip past the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, runtime_checkable

from ..core.messages import Message
from ..core.timeouts import PluginFailed, call_with_timeout
from ..core.vocabulary import PROTECTED_SYSTEM_SOURCES

DEFAULT_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class InterceptorContext:
    """What an interceptor may know about the turn."""

    model: str
    budget: int
    tokenizer: str
    preview: bool
    chat_id: str | None = None
    bot_id: str | None = None


@runtime_checkable
class Interceptor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def priority(self) -> int: ...

    def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]: ...


class AuthorNote:
    """The built-in author's note: a short instruction kept ``depth`` messages from the end of the prompt.

    It is added after shifting, so it always stands near the reply instead of scrolling away with history.
    """

    name = "author-note"
    priority = 50

    def __init__(self, text: str, depth: int = 4) -> None:
        self.text = text.strip()
        self.depth = max(0, depth)

    def __call__(self, messages: list[Message], context: InterceptorContext) -> list[Message]:
        if not self.text:
            return messages
        note = Message(role="system", content=f"[Author's note: {self.text}]", id="author-note", source="template")
        at = max(0, len(messages) - self.depth)
        while at < len(messages) and messages[at].role == "tool":
            at += 1  # never between a call and its results
        return [*messages[:at], note, *messages[at:]]


@dataclass(slots=True)
class InterceptorRun:
    messages: list[Message]
    added: set[str]
    removed: set[str]
    diagnostics: list[str]


def _unprotected(message: Message) -> Message:
    source = message.source
    if source == "input" or (message.role == "system" and source in PROTECTED_SYSTEM_SOURCES):
        source = "plugin"
    return replace(message, pinned=False, source=source)


def run_interceptors(
    messages: Sequence[Message],
    interceptors: Sequence[Interceptor],
    context: InterceptorContext,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> InterceptorRun:
    """Run every interceptor in priority order under the host's rules (G7)."""
    current = list(messages)
    originals = {m.id: m for m in messages}
    added: set[str] = set()
    diagnostics: list[str] = []
    for interceptor in sorted(interceptors, key=lambda i: (i.priority, i.name)):
        snapshot = list(current)
        try:
            returned = call_with_timeout(partial(interceptor, list(snapshot), context), timeout)
            if not isinstance(returned, list) or not all(isinstance(m, Message) for m in returned):
                raise PluginFailed("returned something that is not a list of messages")
        except PluginFailed as error:
            diagnostics.append(f'interceptor "{interceptor.name}" skipped: {error}')
            continue
        current, note = _sanitize(snapshot, returned, originals, added, interceptor.name)
        diagnostics.extend(note)
    removed = {m.id for m in messages} - {m.id for m in current}
    return InterceptorRun(current, added, removed, diagnostics)


def _sanitize(
    before: list[Message],
    returned: list[Message],
    originals: dict[str, Message],
    added: set[str],
    name: str,
) -> tuple[list[Message], list[str]]:
    known = {m.id: m for m in before}
    out: list[Message] = []
    seen: set[str] = set()
    new = edited = restored = 0
    for message in returned:
        if message.id in known and message.id not in seen:
            original = known[message.id]
            if original.protected:
                edited += message != original
                message = original
            else:
                edited += message.content != original.content
                message = replace(message, pinned=original.pinned, source=original.source)
        else:
            base = message.id or f"plugin.{name}"
            ident, n = base, 1
            while ident in seen or ident in known or ident in originals:
                n += 1
                ident = f"{base}-{n}"
            message = _unprotected(replace(message, id=ident))
            added.add(ident)
            new += 1
        seen.add(message.id)
        out.append(message)
    # Protected messages the interceptor dropped go back just before the next surviving original.
    for index, original in enumerate(before):
        if original.protected and original.id not in seen:
            following = next((m.id for m in before[index + 1 :] if m.id in seen), None)
            at = next(i for i, m in enumerate(out) if m.id == following) if following else len(out)
            out.insert(at, original)
            seen.add(original.id)
            restored += 1
    dropped = len([m for m in before if m.id not in seen])
    notes = [f'interceptor "{name}": +{new} added, -{dropped} removed, ~{edited} edited']
    if restored:
        notes.append(f'interceptor "{name}" removed {restored} protected message(s); they were restored')
    return out, notes
