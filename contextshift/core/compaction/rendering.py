"""The summarizer request (C7, C9): instruction, typed transcript, output cap and input budget.

Records are rendered as typed text, one line per item: ``role: text`` for messages (media as ``[image]`` /
``[file]``), ``assistant: [tool_call: name] arguments`` and ``tool: [tool_result: name] outcome`` for tool
exchanges, an ``[earlier summary]`` block for a summary being rolled up, and a ``=== workspace: … ===``
header whenever the workspace changes in a session that spans several. Tool arguments are capped at
:data:`TOOL_ARGS_CAP` characters and results at :data:`TOOL_RESULT_CAP`, with ``…[truncated N chars]``;
data URIs and long base64 runs become ``[media]``. When a budget is given and the transcript does not fit,
the longest bodies are cut to a common length until it does (a single oversized exchange still compacts,
C9); if even that fails, :class:`SummarizerInputTooLarge` is raised before any model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ContextShiftError
from ..messages import Message
from ..tokens import approximate_count
from .layout import TextCounter
from .records import (
    Record,
    SummaryRecord,
    TextItem,
    TextRecord,
    ToolCallItem,
    ToolResultItem,
    build_records,
    record_is_empty,
)

TOOL_ARGS_CAP = 500
TOOL_RESULT_CAP = 2000
HEADER_CAP = 256
#: C9: the output cap is min(4096, window / 10).
MAX_OUTPUT_TOKENS = 4096
#: C9: the transcript never takes more than this share of the summarizer window.
INPUT_SHARE_PERCENT = 85
#: Room left for the chat format's framing and the counting error of an estimate.
FRAMING_TOKENS = 512

WINDOW_TOO_SMALL = "window-too-small"
INPUT_OVERFLOW = "input-overflow"

SYSTEM_PROMPT = (
    "You condense the older part of a conversation into a summary that will take its place. The assistant "
    "that continues the conversation will see only your summary instead of these messages, so keep what it "
    "needs to carry on: facts, names, numbers, dates, identifiers, file paths and links; decisions and why "
    "they were made; the user's requests, preferences and constraints; open questions and unfinished work; "
    "and the outcomes of tool calls that matter (what was found or changed, not raw output). Copy "
    "identifiers, numbers, dates, names, file paths and links verbatim, and keep every decision and open "
    "question.\n"
    "Be faithful: state only what the transcript says, never guess or add advice. Be compact: short plain "
    "sentences or bullet points, no greeting, no preamble, nothing about yourself.\n"
    "If the transcript starts with an earlier summary, merge it with the newer messages into one summary "
    "that replaces it, without mentioning that there was an earlier summary.\n"
    "If the transcript is divided into workspaces, keep one section per workspace and say which workspace "
    "each point belongs to.\n"
    "Write in the language of the conversation. Reply with the summary only."
)
USER_INTRO = "Summarize this conversation transcript."
#: G4b: what the summarizer is told about the user's standing instructions (they stay raw beside the summary).
STANDING_INTRO = (
    "The user gave these standing instructions. They stay in force and are kept verbatim next to your summary, "
    "so never drop, reword or contradict them; if the transcript mentions one, keep it verbatim:"
)
#: At most this many characters of standing instructions are listed (they are bounded in prompts too).
STANDING_CAP = 2000
TRANSCRIPT_OPEN = "<transcript>"
TRANSCRIPT_CLOSE = "</transcript>"

#: A piece of a tool result: a sentence, a line, or a JSON field.
# A run of text up to a sentence or clause end (``.!?;,`` before a space or a quote), a newline or the end;
# a stop inside a word ("3.14", "a,b") does not end it. No nested quantifiers: linear on any text (an
# earlier form backtracked exponentially on a long run without an end, and stalled a compaction pass).
_PIECE = re.compile(r'[^\n.!?;,]+(?:[.!?;,](?!\s|")[^\n.!?;,]*)*(?:[.!?;,](?=\s|")|\n|$)')
#: A piece worth keeping holds a digit or a capitalized word (a name, an identifier).
_FACT = re.compile(r"\d|\b[A-Z][\w-]*[a-z0-9]")
_GAP = " … "
_DIGIT = re.compile(r"\d")
_DATA_URI = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/=]*")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{256,}={0,2}")


class SummarizerInputTooLarge(ContextShiftError):
    """C9: the summarizer request cannot be made to fit; raised before any model call."""

    code = "COMPACTION_INPUT_TOO_LARGE"

    def __init__(self, needed: int, budget: int, reason: str = INPUT_OVERFLOW) -> None:
        super().__init__(
            f"the summarizer request needs {needed} tokens but only {budget} are available",
            needed=needed,
            budget=budget,
            reason=reason,
        )
        self.reason = reason
        self.needed = needed
        self.budget = budget


def scrub_media(text: str) -> str:
    """Data URIs and base64 runs of 256+ characters become ``[media]`` (raw data never reaches the model)."""
    if len(text) < 64:
        return text
    return _BASE64_RUN.sub("[media]", _DATA_URI.sub("[media]", text))


def clip(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters followed by ``…[truncated N chars]``; unchanged if it fits."""
    if limit is None or len(text) <= limit:
        return text
    limit = max(0, limit)
    cut = len(text) - limit
    return f"{text[:limit]}…[truncated {cut} chars]"


def condense(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, keeping the facts the cut would lose (a capped tool result).

    The pieces (sentences, lines, JSON fields) with a number or a name that lie past ``limit`` are kept
    (numbers first, short before long, each distinct piece once), in their order, joined by `` … `` after
    a shorter head; the marker then counts every character left out. They take at most half of
    ``limit``. With no such piece past the limit this is :func:`truncate`.
    """
    if limit is None or len(text) <= limit:
        return text
    limit = max(0, limit)
    spans = [m.span() for m in _PIECE.finditer(text)]
    facts = [(a, b) for a, b in spans if _FACT.search(text, a, b)]
    if not any(b > limit for _, b in facts):
        return clip(text, limit)
    lost = [(a, b) for a, b in facts if a >= limit // 2]
    room = min(limit // 2, sum(b - a + len(_GAP) for a, b in lost))
    head = limit - room
    pieces: list[tuple[int, str]] = []
    for a, b in facts:
        if a >= head:  # whole pieces only
            piece = text[a:b].strip()
            if piece:
                pieces.append((a, piece))
    # Numbers first (codes, ids, amounts), then names, short pieces (a JSON field) before long ones; a
    # piece said already is not said twice.
    ranked = sorted(pieces, key=lambda p: (not _DIGIT.search(p[1]), len(p[1]), p[0]))
    chosen: list[tuple[int, str]] = []
    seen: set[str] = set()
    used = 0
    for position, piece in ranked:
        if piece not in seen and used + len(piece) + len(_GAP) <= room:
            chosen.append((position, piece))
            seen.add(piece)
            used += len(piece) + len(_GAP)
    kept = [piece for _, piece in sorted(chosen)]
    if not kept:
        return clip(text, limit)
    cut = len(text) - head - sum(len(p) for p in kept)
    return text[:head] + "".join(_GAP + p for p in kept) + f"…[truncated {cut} chars]"


def _clean_header(value: str) -> str:
    value = " ".join(value.split()).replace("[", "(").replace("]", ")")
    return clip(value, HEADER_CAP)


@dataclass(frozen=True, slots=True)
class _Line:
    prefix: str
    body: str
    cap: int | None  # the body's own cap (tool arguments and results)

    def render(self, shrink: int | None) -> str:
        limit = self.cap if shrink is None else (shrink if self.cap is None else min(self.cap, shrink))
        return self.prefix + (condense(self.body, limit) if self.cap is not None else clip(self.body, limit))


def _role(role: str, name: str | None) -> str:
    return f"{role} ({_clean_header(name)})" if name else role


def _lines(record: Record) -> list[_Line]:
    if isinstance(record, SummaryRecord):
        where = f", workspaces: {', '.join(_clean_header(w) for w in record.workspaces)}" if record.workspaces else ""
        return [
            _Line(f"[earlier summary{where}]\n", record.text.strip(), None),
            _Line("[end of earlier summary]", "", None),
        ]
    if isinstance(record, TextRecord):
        return [_Line(f"{_role(record.role, record.name)}: ", scrub_media(record.text), None)]
    lines: list[_Line] = []
    for item in record.items:
        if isinstance(item, TextItem):
            lines.append(_Line(f"{_role(item.role, item.name)}: ", scrub_media(item.text), None))
        elif isinstance(item, ToolCallItem):
            marker = f"assistant: [tool_call: {_clean_header(item.name) or 'unnamed'}]"
            arguments = scrub_media(item.arguments.strip())
            lines.append(_Line(marker + (" " if arguments else ""), arguments, TOOL_ARGS_CAP))
        elif isinstance(item, ToolResultItem):
            marker = f"tool: [tool_result: {_clean_header(item.name)}]" if item.name else "tool: [tool_result]"
            outcome = scrub_media(item.text.strip())
            lines.append(_Line(marker + " ", outcome or "(empty)", TOOL_RESULT_CAP))
    return lines


def _workspace(record: Record) -> str | None:
    return record.workspace


def spans_workspaces(records: Sequence[Record]) -> bool:
    """Whether the records happened in more than one workspace (unnamed counts as one of them)."""
    spaces = {_workspace(r) for r in records if not isinstance(r, SummaryRecord)}
    for record in records:
        if isinstance(record, SummaryRecord):
            spaces.update(record.workspaces)
    return len(spaces) > 1 and spaces != {None}


def workspace_header(workspace: str | None) -> str:
    return f"=== workspace: {_clean_header(workspace) if workspace else '(none)'} ==="


def _layout(records: Sequence[Record]) -> list[_Line]:
    multi = spans_workspaces(records)
    out: list[_Line] = []
    current: object = object()
    for record in records:
        if record_is_empty(record):
            continue
        if multi and not isinstance(record, SummaryRecord) and record.workspace != current:
            current = record.workspace
            out.append(_Line(workspace_header(record.workspace), "", None))
        elif isinstance(record, SummaryRecord):
            current = object()  # the next record names its workspace again
        out.extend(_lines(record))
    return out


def _render(lines: Sequence[_Line], shrink: int | None) -> str:
    body = "\n".join(line.render(shrink) for line in lines)
    return f"{USER_INTRO}\n\n{TRANSCRIPT_OPEN}\n{body}\n{TRANSCRIPT_CLOSE}"


def render_transcript(records: Sequence[Record]) -> str:
    """The summarizer's user message for ``records``, at the normal caps."""
    return _render(_layout(records), None)


def prompt_overhead_tokens(count: TextCounter = approximate_count) -> int:
    """Tokens of the user message around the transcript (intro and tags)."""
    return count(_render([], None))


def record_tokens(record: Record, count: TextCounter = approximate_count, *, with_header: bool = False) -> int:
    """Upper estimate of one record's share of the transcript (a workspace header when ``with_header``)."""
    lines = _lines(record) if not record_is_empty(record) else []
    if with_header and lines and not isinstance(record, SummaryRecord):
        lines = [_Line(workspace_header(record.workspace), "", None), *lines]
    if not lines:
        return 0
    return count("\n".join(line.render(None) for line in lines) + "\n") + 1


@dataclass(frozen=True, slots=True)
class SummarizerPrompt:
    """A ready summarizer request: one system and one user message, plus their token count."""

    system: str
    user: str
    input_tokens: int  # system + user
    user_tokens: int
    shrunk: bool  # bodies were cut below their normal caps to fit the budget
    record_count: int

    def messages(self) -> list[Message]:
        return [Message(role="system", content=self.system), Message(role="user", content=self.user)]


def build_prompt(
    fold: Sequence[Message] | Sequence[Record],
    *,
    budget_tokens: int | None = None,
    count: TextCounter = approximate_count,
    system: str = SYSTEM_PROMPT,
    standing: Sequence[str] = (),
) -> SummarizerPrompt:
    """The summarizer request for the folded messages (or records); the user message fits ``budget_tokens``.

    ``standing``: the user's standing instructions that stay raw (``Selection.standing``); the instruction lists
    them (up to :data:`STANDING_CAP` characters) to be kept verbatim and never contradicted (G4b).
    """
    system = with_standing(system, standing)
    records: Sequence[Record]
    if fold and isinstance(fold[0], Message):
        records = build_records([m for m in fold if isinstance(m, Message)])
    else:
        records = [r for r in fold if not isinstance(r, Message)]
    lines = _layout(records)
    user = _render(lines, None)
    tokens = count(user)
    shrunk = False
    if budget_tokens is not None and tokens > budget_tokens:
        longest = max((len(line.body) for line in lines), default=0)
        floor = _render(lines, 0)
        if count(floor) > budget_tokens:
            raise SummarizerInputTooLarge(count(floor), budget_tokens)
        low, high = 0, longest  # the longest common body length that fits
        while low < high:
            mid = (low + high + 1) // 2
            if count(_render(lines, mid)) <= budget_tokens:
                low = mid
            else:
                high = mid - 1
        user, shrunk = _render(lines, low), True
        tokens = count(user)
    return SummarizerPrompt(system, user, count(system) + tokens, tokens, shrunk, len(records))


def with_standing(system: str, standing: Sequence[str]) -> str:
    """The summarizer's instruction with the standing instructions listed, newest kept when over the cap."""
    listed: list[str] = []
    room = STANDING_CAP
    for text in reversed(standing):
        line = "- " + " ".join(text.split())
        if len(line) > room:
            break
        listed.insert(0, line)
        room -= len(line)
    return "\n".join([system, STANDING_INTRO, *listed]) if listed else system


def max_output_tokens(summarizer_window: int) -> int:
    """C9: the summarizer's ``max_tokens``: min(4096, window // 10), at least 1."""
    if isinstance(summarizer_window, bool) or not isinstance(summarizer_window, int) or summarizer_window <= 0:
        raise ValueError("the summarizer window must be a positive integer")
    return max(1, min(MAX_OUTPUT_TOKENS, summarizer_window // 10))


def input_budget(summarizer_window: int, count: TextCounter = approximate_count, *, system: str = SYSTEM_PROMPT) -> int:
    """C9: tokens the user message (transcript) may take; 0 or less means the window is too small."""
    out = max_output_tokens(summarizer_window)
    room = min(summarizer_window * INPUT_SHARE_PERCENT // 100, summarizer_window - out - FRAMING_TOKENS)
    return room - count(system)
