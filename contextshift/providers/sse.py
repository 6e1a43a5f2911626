"""A minimal Server-Sent Events reader over an async line iterator (the part of the spec LLM APIs use)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


async def read_events(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Events from SSE lines: ``event:`` and (multi-line) ``data:`` fields, dispatched on a blank line."""
    event = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield SSEEvent(event or "message", "\n".join(data))
