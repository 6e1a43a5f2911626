"""The one place the service calls a provider: a :class:`CallTarget`, and :class:`Calls` that sends to it.

Every provider call of the service goes through :meth:`Calls.complete` or :meth:`Calls.stream` (a chat turn,
an endpoint call, a compaction pass) or :meth:`Calls.list_models` (the provider forms). A send:

- builds a client per attempt with the target's timeouts and what is left of the call's one
  :class:`~.limits.Deadline` (N5), and closes it however the attempt ends, even when cancelled;
- asks its :class:`Plan` for the request (which may count it with the client first), and after a
  context-length rejection (before anything was streamed) lets the plan fit again once (:mod:`.refit`) and
  sends once more;
- tells its :class:`Recorder` (the chat audit, the endpoint audit, the compaction pass) how it ended: once,
  ``completed``, ``failed`` (then the :class:`~contextshift.providers.ProviderError` is raised on) or
  ``cancelled`` (then the cancellation, or whatever ended it, is raised on).

An error the plan raises while it fits (a refusal with its own code) passes through unrecorded: the plan
recorded it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from ...core.errors import ContextShiftError
from ...providers import (
    PROVIDER_CONTEXT_LENGTH,
    ChatRequest,
    ChatResult,
    Finished,
    ListedModel,
    ProviderClient,
    ProviderError,
    StreamEvent,
    make_client,
)
from .limits import Deadline, HasTimeout, open_client
from .shared import SharedClient

ClientFactory = Callable[..., ProviderClient]


@dataclass(frozen=True, slots=True)
class CallTarget:
    """Where one call goes: the model's name on its provider, the window and reply reserve the prompt was
    fitted to, and the provider's ``timeout_seconds`` that set the call's timeouts and total deadline."""

    model: str
    provider: HasTimeout
    window: int = 0
    reserve: int = 0

    def deadline(self) -> Deadline:
        """The call's total deadline, from now (every attempt and the one resend share it)."""
        return Deadline.for_provider(self.provider.timeout_seconds)


class Plan(Protocol):
    """What a send needs from its caller: the request, and one fit again after a context-length rejection."""

    async def request(self, client: ProviderClient) -> ChatRequest:
        """The request to send now (the client is the attempt's: a plan may ask it to count first)."""
        ...

    async def refit(self, error: ProviderError) -> bool:
        """After a context-length rejection ``error`` (at most once a call): fit again and say True to send
        once more, or False to fail with ``error``."""
        ...


class Recorder(Protocol):
    """How a call's end is kept: the chat audit, the endpoint audit, the compaction pass each have one."""

    def sending(self, client: ProviderClient) -> contextlib.AbstractContextManager[None]:
        """Around the provider call itself (the endpoint audit starts writing once the body is sent)."""
        ...

    async def completed(self, reply: ChatResult | None) -> None:
        """The call answered ``reply`` (None: a stream that ended without a ``Finished``)."""
        ...

    async def failed(self, error: ProviderError) -> None:
        """The provider failed with ``error`` (raised on after this)."""
        ...

    async def cancelled(self) -> None:
        """The call was cancelled (or ended by anything but a provider failure; raised on after this)."""
        ...


def require_content(reply: ChatResult | None) -> ChatResult:
    """A reply with neither text nor tool calls is a failure (``EMPTY_RESPONSE``), never a stored message."""
    if reply is None or (not reply.text and not reply.tool_calls):
        raise ProviderError("EMPTY_RESPONSE", "The provider returned an empty reply.")
    return reply


class _Resend:
    """One call's allowance of one resend after a context-length rejection."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.used = False

    async def again(self, error: ProviderError, *, started: bool = False) -> bool:
        if started or self.used or error.code != PROVIDER_CONTEXT_LENGTH:
            return False
        self.used = True
        return await self.plan.refit(error)


class Calls:
    """Sends to providers with ``factory`` (``make_client`` or a test's), the service's client ``options``
    (``retry``, ``timeouts``, an ``http_client`` of the caller's...) and the ``shared`` connection pool, asked for
    at each call (:meth:`current_options`)."""

    def __init__(
        self,
        factory: ClientFactory = make_client,
        options: Mapping[str, Any] | None = None,
        shared: SharedClient | None = None,
    ) -> None:
        self.factory = factory
        self.options: Mapping[str, Any] = dict(options or {})
        self.shared = shared

    def current_options(self) -> Mapping[str, Any]:
        """The options for a client made now: with the shared pool while it is open (an ``http_client`` in
        the options wins)."""
        pool = self.shared.client if self.shared is not None else None
        if pool is None or "http_client" in self.options:
            return self.options
        return {**self.options, "http_client": pool}

    @asynccontextmanager
    async def client(self, provider: HasTimeout, deadline: Deadline) -> AsyncIterator[ProviderClient]:
        """A client for one attempt, closed when it ends however it ends (shielded from cancellation)."""
        client = open_client(self.factory, self.current_options(), provider, deadline)
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    async def list_models(self, provider: HasTimeout, deadline: Deadline) -> list[ListedModel]:
        """The provider's model list, one attempt within ``deadline``."""
        async with self.client(provider, deadline) as client:
            return await client.list_models()

    async def complete(
        self, target: CallTarget, plan: Plan, recorder: Recorder, *, need_content: bool = False
    ) -> ChatResult:
        """Send ``plan``'s request to ``target`` and wait for the whole reply (see the module docstring);
        ``need_content``: an empty reply fails with ``EMPTY_RESPONSE``."""
        deadline = target.deadline()
        resend = _Resend(plan)
        while True:
            try:
                async with self.client(target.provider, deadline) as client:
                    request = await plan.request(client)
                    with recorder.sending(client):
                        reply = await client.complete(request)
                    if need_content:
                        require_content(reply)
                break
            except ProviderError as error:
                if await resend.again(error):
                    continue
                await recorder.failed(error)
                raise
            except ContextShiftError:  # the plan's own refusal, recorded by it
                raise
            except BaseException:
                await recorder.cancelled()
                raise
        await recorder.completed(reply)
        return reply

    async def stream(
        self, target: CallTarget, plan: Plan, recorder: Recorder, *, need_content: bool = False
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream ``plan``'s request to ``target``: its events, the last a ``Finished`` (see the module
        docstring); a context-length rejection is fitted again only before the first event. Close the
        iterator to cancel the call (``contextlib.aclosing``)."""
        deadline = target.deadline()
        resend = _Resend(plan)
        started = False
        finished: ChatResult | None = None
        while True:
            try:
                async with self.client(target.provider, deadline) as client:
                    request = await plan.request(client)
                    with recorder.sending(client):
                        async with client.stream(request) as events:
                            async for event in events:
                                if isinstance(event, Finished):
                                    finished = event.result
                                started = True
                                yield event
                    if need_content:
                        require_content(finished)
                break
            except ProviderError as error:
                if await resend.again(error, started=started):
                    continue
                await recorder.failed(error)
                raise
            except ContextShiftError:  # the plan's own refusal, recorded by it
                raise
            except BaseException:
                await recorder.cancelled()
                raise
        await recorder.completed(finished)


__all__ = ["CallTarget", "Calls", "ClientFactory", "Plan", "Recorder", "require_content"]
