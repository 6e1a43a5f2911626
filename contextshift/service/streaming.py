"""A turn's event stream run in a task of its own, read with heartbeats (N5).

The route that streams a turn reads :meth:`EventPump.events`. The turn runs in the pump's task, started
at once, so it reaches its end (and stores its reply) even if the response is never read; closing the
reader early cancels the task, which is how a client that goes away stops the turn. While nothing comes
for ``heartbeat`` seconds (waiting for the provider's first token, a slow stream), the reader gets a
:class:`Heartbeat`, sent as an SSE comment so proxies and clients see the connection alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")

#: Seconds between heartbeats while a stream is idle.
DEFAULT_HEARTBEAT = 15.0


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing happened for a heartbeat interval."""


@dataclass(frozen=True, slots=True)
class _End:
    error: BaseException | None = None


class EventPump(Generic[T]):
    def __init__(self, source: AsyncIterator[T], heartbeat: float = DEFAULT_HEARTBEAT) -> None:
        self.heartbeat = heartbeat
        self._queue: asyncio.Queue[T | _End] = asyncio.Queue()
        self.task: asyncio.Task[None] = asyncio.create_task(self._run(source))

    async def _run(self, source: AsyncIterator[T]) -> None:
        end = _End()
        try:
            async for item in source:
                self._queue.put_nowait(item)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            end = _End(error)
        finally:
            self._queue.put_nowait(end)

    async def events(self) -> AsyncIterator[T | Heartbeat]:
        try:
            while True:
                try:
                    async with asyncio.timeout(self.heartbeat):  # not wait_for, which can drop a cancellation
                        item = await self._queue.get()
                except TimeoutError:
                    yield Heartbeat()
                    continue
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            if not self.task.done():
                self.task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(self.task, return_exceptions=True)
