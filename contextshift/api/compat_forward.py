"""One way to answer a prepared endpoint call (V7), in whichever wire shape its route speaks.

``POST /v1/chat/completions`` and ``POST /v1/messages`` differ only in how a reply, a stream and an error are
written (a :class:`Dialect`); the order of things is the same: forward, and answer with the reply or the
error, the visibility headers on every answer. A stream starts only once the provider's first event is in,
so a provider's refusal (or a context-length rejection recovered by a refit) still gets its own status.
A reply goes back before its call's end is written (see :meth:`ProxyService.complete`); the response's
background task waits for that write, so a server that drains its requests before stopping loses none.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from ..providers import Finished, ProviderError, TextDelta
from ..providers.base import ChatResult, StreamEvent
from ..service.errors import ServiceError
from ..service.proxy import ContextTooLong, Prepared, ProxyCall, ProxyService, UpstreamFailed, invalid_request
from . import jsonspans
from .limits import MAX_MESSAGES

#: Response headers on every endpoint answer that reached fitting.
EXCLUDED_HEADER = "x-contextshift-excluded"
AUDIT_HEADER = "x-contextshift-audit"


def visibility(audit_id: str, excluded: int) -> dict[str, str]:
    return {AUDIT_HEADER: audit_id, EXCLUDED_HEADER: str(excluded)}


class StreamWriter(Protocol):
    def start(self) -> bytes: ...

    def text(self, text: str) -> bytes: ...

    def end(self, reply: ChatResult) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one wire shape writes answers: a reply and a stream's writer (for an answer with that audit id to
    that call; a session's answer has no :class:`Prepared`), a refusal, a provider's failure, and a failure
    after a stream started (the provider's, or a refusal's ``code`` and message)."""

    answer: Callable[[ChatResult, str, ProxyCall], dict[str, Any]]
    writer: Callable[[str, ProxyCall], StreamWriter]
    service_error: Callable[[ServiceError, Mapping[str, str] | None], JSONResponse]
    provider_response: Callable[[ProviderError, Mapping[str, str]], JSONResponse]
    stream_error: Callable[[ProviderError], bytes]
    stream_refusal: Callable[[str, str], bytes]


async def read_body(request: Request) -> tuple[jsonspans.Parsed, bool]:
    """The parsed body (with each message's JSON text), and whether it is free of NUL characters.

    The body's nesting, size in values and text were checked on its bytes (``limits.check_body``); the
    number of messages is checked here, before each message is written back to its JSON.

    Raises:
        ServiceError: 400 ``INVALID_REQUEST``, the body is not JSON.
        TooManyMessages: 413 ``TOO_MANY_MESSAGES``, more than ``MAX_MESSAGES`` messages.
    """
    raw = await request.body()
    try:
        parsed = jsonspans.parse(raw, max_messages=MAX_MESSAGES)  # TooManyMessages, a 413, goes up as it is
    except (ValueError, RecursionError):
        raise invalid_request("The request body is not valid JSON.") from None
    return parsed, b"\\u0000" not in raw


async def forward(service: ProxyService, prepared: Prepared, dialect: Dialect) -> Response:
    """Send a prepared call and answer in ``dialect``: the reply, a stream, or the error."""
    if not prepared.call.stream:
        try:
            reply = await service.complete(prepared)
        except UpstreamFailed as failed:
            return dialect.provider_response(failed.error, visibility(prepared.audit_id, prepared.excluded))
        except ContextTooLong as error:  # still too long after a rejection and a refit
            return dialect.service_error(error, visibility(error.audit_id, 0))
        return JSONResponse(
            dialect.answer(reply, prepared.audit_id, prepared.call),
            headers=visibility(prepared.audit_id, prepared.excluded),
            background=BackgroundTask(service.settled, audit_id=prepared.audit_id),
        )
    events = service.stream(prepared)
    first: StreamEvent | None
    try:
        first = await anext(events)  # the provider's status is known before our own response starts
    except UpstreamFailed as failed:
        return dialect.provider_response(failed.error, visibility(prepared.audit_id, prepared.excluded))
    except ContextTooLong as error:
        return dialect.service_error(error, visibility(error.audit_id, 0))
    except StopAsyncIteration:
        first = None
    headers = visibility(prepared.audit_id, prepared.excluded)  # after a refit, if there was one
    return StreamingResponse(
        _stream(dialect, dialect.writer(prepared.audit_id, prepared.call), first, events),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache"},
    )


async def _stream(
    dialect: Dialect, writer: StreamWriter, first: StreamEvent | None, events: AsyncGenerator[StreamEvent, None]
) -> AsyncIterator[bytes]:
    yield writer.start()
    finished: ChatResult | None = None
    pending = [first] if first is not None else []
    try:
        while True:
            if pending:
                event = pending.pop()
            else:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
            if isinstance(event, TextDelta) and event.text:
                yield writer.text(event.text)
            elif isinstance(event, Finished):
                finished = event.result
    except UpstreamFailed as failed:
        yield dialect.stream_error(failed.error)  # both SDKs raise on an error event
        return
    finally:
        await events.aclose()
    if finished is not None:
        for chunk in writer.end(finished):
            yield chunk


__all__ = ["AUDIT_HEADER", "EXCLUDED_HEADER", "Dialect", "forward", "read_body", "visibility"]
