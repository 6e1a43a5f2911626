"""Assembly (P1 stages persona → lorebook → memory → template): the blocks of one prompt, in order.

Every block is a core ``Message`` with a stable id (``core.system-prompt``, ``lore.<entry>``,
``memory.<id>``, ``template.<id>``, history ids, ``core.current-input``) and the source that decides its
protection. Blocks that are not in the prompt at all (a disabled lorebook entry, an empty persona, a memory
that was not retrieved) are returned as *skipped*, with their reason, for the audit.

Pin on a summarized message: a history message that a summary's ``meta.covers`` names is in the prompt raw
(the service loads a summarized message only when it is pinned). The summary stays where it stands and
stands for the rest: its covers lose the raw ids, so the audit lists the pinned message once, sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..core.messages import Message
from ..core.vocabulary import EMPTY, LOW_RELEVANCE, SUMMARIZED
from .lorebook import Activation, LoreEntry, activate
from .memory import MemoryItem, retrieve
from .template import CustomBlock, TemplateItem

CURRENT_INPUT_ID = "core.current-input"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A block left out before counting, and why (``disabled``, ``empty``, ``low-relevance``)."""

    message: Message
    reason: str
    slot: int  # how many assembled blocks come before it


@dataclass(slots=True)
class Assembly:
    messages: list[Message]
    skipped: list[Skipped] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Sources:
    """Everything the stages assemble from."""

    system_prompt: str = ""
    persona: str = ""
    character: str = ""
    post_history: str = ""
    lore: Sequence[LoreEntry] = ()
    memories: Sequence[MemoryItem] = ()
    history: Sequence[Message] = ()
    user_input: str | None = None
    scan_depth: int = 10
    memory_limit: int = 5
    #: Raw messages that stored compaction summaries stand for (the audit lists them as ``summarized``).
    summarized: Sequence[Message] = ()


def _lore_message(verdict: Activation) -> Message:
    entry = verdict.entry
    return Message(
        role="system",
        content=entry.content,
        id=f"lore.{entry.id}",
        source="lorebook",
        pinned=entry.constant,
        relevance=verdict.relevance,
        meta={"keys": list(verdict.matched)} if verdict.matched else {},
    )


def _current_input(sources: Sources) -> tuple[list[Message], Message | None]:
    """History without the current input, and the current input (a new draft or the last user message)."""
    history = [m if m.source else replace(m, source="history") for m in sources.history]
    if sources.user_input is not None:
        if not sources.user_input.strip():
            return history, None
        return history, Message(role="user", content=sources.user_input, id=CURRENT_INPUT_ID, source="input")
    if history and history[-1].role == "user":
        return history[:-1], replace(history[-1], source="input")
    return history, None


def assemble(sources: Sources, template: Sequence[TemplateItem]) -> Assembly:
    history, current = _current_input(sources)
    recent = [m.text for m in history[-sources.scan_depth :]] if sources.scan_depth else []
    scan_text = "\n".join([*recent, current.text if current else ""])
    verdicts = activate(sources.lore, scan_text)
    out = Assembly(messages=[])

    def skip(message: Message, reason: str) -> None:
        out.skipped.append(Skipped(message, reason, len(out.messages)))

    def fixed(block_id: str, text: str, source: str) -> None:
        message = Message(role="system", content=text, id=block_id, source=source)  # type: ignore[arg-type]
        if text.strip():
            out.messages.append(message)
        else:
            skip(message, EMPTY)

    def lore_at(position: str) -> None:
        for verdict in verdicts:
            if verdict.entry.position != position:
                continue
            if verdict.active:
                out.messages.append(_lore_message(verdict))
            else:
                skip(_lore_message(verdict), verdict.reason)

    for item in template:
        if isinstance(item, CustomBlock):
            block = Message(role=item.role, content=item.content, id=f"template.{item.id}", source="template")  # type: ignore[arg-type]
            if item.content.strip():
                out.messages.append(block)
            else:
                skip(block, EMPTY)
        elif item == "system_prompt":
            fixed("core.system-prompt", sources.system_prompt, "system")
        elif item == "persona":
            fixed("core.persona", sources.persona, "persona")
        elif item == "character":
            if sources.character.strip():
                fixed("core.character", sources.character, "character")
        elif item == "lorebook_before":
            lore_at("before")
        elif item == "lorebook_after":
            lore_at("after")
        elif item == "memory":
            query = current.text if current else (history[-1].text if history else "")
            for recall in retrieve(sources.memories, query, sources.memory_limit):
                message = Message(
                    role="system",
                    content=recall.item.content,
                    id=f"memory.{recall.item.id}",
                    source="memory",
                    relevance=recall.relevance,
                )
                if recall.retrieved:
                    out.messages.append(message)
                else:
                    skip(message, LOW_RELEVANCE)
        elif item == "history":
            raw = {m.id for m in history}
            for message in _with_depth_lore(history, verdicts, skip):
                covers = message.meta.get("covers") if message.source == "summary" else None
                if isinstance(covers, list):
                    message = _standing_for_the_rest(message, covers, raw)
                    wanted = set(message.meta["covers"])
                    for covered in (m for m in sources.summarized if m.id in wanted):
                        skip(covered, SUMMARIZED)
                out.messages.append(message)
        elif item == "post_history":
            if sources.post_history.strip():
                fixed("core.post-history", sources.post_history, "system")
        elif item == "input" and current is not None:
            out.messages.append(current)
    return out


def _standing_for_the_rest(summary: Message, covers: list[object], raw: set[str]) -> Message:
    """A summary whose covered messages are partly in the history raw (the user pinned them): it stays, in
    its place and with its text, and stands for the rest only. The pinned messages are sent raw and marked
    ``protected``, never ``summarized``."""
    rest = [c for c in covers if c not in raw]
    if len(rest) == len(covers):
        return summary
    return replace(summary, meta={**summary.meta, "covers": rest})


def _with_depth_lore(
    history: list[Message], verdicts: list[Activation], skip: Callable[[Message, str], None]
) -> list[Message]:
    """History with the ``depth`` lorebook entries inserted that many messages from its end."""
    placed = list(history)
    for verdict in verdicts:
        if verdict.entry.position != "depth":
            continue
        if not verdict.active:
            skip(_lore_message(verdict), verdict.reason)
            continue
        depth = max(0, verdict.entry.depth if verdict.entry.depth is not None else 4)
        at = max(0, len(placed) - depth)
        while at < len(placed) and placed[at].role == "tool":
            at += 1  # never between a tool call and its results
        placed.insert(at, _lore_message(verdict))
    return placed
