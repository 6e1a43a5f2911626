"""What a turn leaves behind (N5): the reply, kept whatever happens once the provider has answered.

- A reply is stored in the same transaction as the audit's completion (:func:`persist`), and storing it
  is retried on database errors, shielded from cancellation: a reply the provider produced is never
  dropped because the database was briefly busy or the client went away.
- A reply cut off mid-stream (the provider dropped, stalled or sent garbage) or stopped by the user
  (client disconnect) is stored with what was streamed: ``meta.partial`` is true and ``meta.partial_reason``
  says why (``provider_error`` with ``meta.error_code``, or ``cancelled``). It counts as history.
- A turn that failed before any text keeps its input: the user message gets ``meta.failed`` (the error
  code) and is left out of later prompts (:func:`is_failed_input`) until it is retried.
- A reply that outgrows its cap (``max_tokens`` with headroom, and a hard byte limit: see
  :func:`contextshift.providers.http.reply_cap`) is stopped there and kept: ``finish_reason`` ``length`` and
  ``meta.cut`` ``reply_too_large``.
- While a reply streams, what came so far is stored as a partial reply (``partial_reason`` ``interrupted``)
  at least every second (:mod:`.checkpoints`), so a crash keeps what the client saw; the turn's outcome
  replaces it. An input whose turn died before any text is marked ``meta.failed``
  (``GENERATION_INTERRUPTED``) when the next input comes.
- Every assistant message records the user message it answers in ``meta.reply_to``.
- A turn can redo the chat's newest reply (:class:`Redo`): ``regenerate`` builds the prompt from the history
  before it and stores the new reply as another version of it (the earlier ones stay, to page through);
  ``continue`` sends the history with the reply last and adds what comes to it. A redo that fails before
  any text leaves the reply as it was and records the error on it (``meta.error``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
from sqlalchemy.exc import DBAPIError, IntegrityError

from ..core.vocabulary import INTERRUPTED as INTERRUPTED
from ..providers import ChatResult
from ..storage import Database, Repositories
from ..storage.tables import MessageRow
from .errors import Refusal, ServiceError
from .history import FAILED_KEY, is_failed_input

log = logging.getLogger("contextshift.generation")

T = TypeVar("T")

#: The meta keys a turn writes.
REPLY_TO = "reply_to"
PARTIAL = "partial"
PARTIAL_REASON = "partial_reason"
FAILED = FAILED_KEY
#: :data:`INTERRUPTED` is the ``partial_reason`` (and ``finish_reason``) of a reply stored while it streamed: what
#: it says if the process dies before the turn ends (:mod:`.checkpoints`); this is the ``meta.failed`` code of an
#: input whose turn died so.
INTERRUPTED_CODE = "GENERATION_INTERRUPTED"
#: The meta key of a reply contextshift stopped at its size cap (``reply_too_large``; ``finish_reason`` is
#: ``length``): the text that came before the cap is the reply.
CUT = "cut"
#: The meta key of a reply whose regenerate or continue failed before any text: ``{"code", "action"}``.
REDO_ERROR = "error"

#: How often storing a turn's outcome is tried, and the longest pause between attempts (seconds).
STORE_ATTEMPTS = 8
STORE_BACKOFF_MAX = 2.0


async def persist(db: Database, write: Callable[[Repositories], Awaitable[T]], *, what: str) -> T:
    """Run ``write`` in one transaction, retried on database errors (bounded), shielded from cancellation."""
    pause = 0.05
    with anyio.CancelScope(shield=True):
        for attempt in range(1, STORE_ATTEMPTS + 1):
            try:
                async with db.session() as session:
                    return await write(Repositories(session))
            except IntegrityError:
                raise  # the same write would fail again
            except DBAPIError as error:
                if attempt == STORE_ATTEMPTS:
                    log.error("storing %s failed %d times (%s); giving up", what, attempt, type(error.orig).__name__)
                    raise
                log.warning("storing %s failed (%s); retry %d", what, type(error.orig).__name__, attempt)
                await asyncio.sleep(pause)
                pause = min(STORE_BACKOFF_MAX, pause * 2)
    raise AssertionError("unreachable")  # pragma: no cover


def reply_meta(
    generation_id: str, reply_to: str | None, finish_reason: str, usage: dict[str, Any] | None, result: Any
) -> dict[str, Any]:
    return {
        "generation_id": generation_id,
        REPLY_TO: reply_to,
        "finish_reason": finish_reason,
        "usage": usage,
        "token_budget": result.budget,
        "context_strategy": result.context_strategy,
        "excluded_context_count": result.excluded_count,
    }


def reply_message(meta: dict[str, Any], reply: ChatResult) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "meta": meta}
    if reply.tool_calls:
        message["tool_calls"] = [c.to_dict() for c in reply.tool_calls]
    return message


def partial_message(meta: dict[str, Any], text: str, reason: str, error_code: str | None) -> dict[str, Any]:
    marks: dict[str, Any] = {PARTIAL: True, PARTIAL_REASON: reason, "finish_reason": INTERRUPTED}
    if error_code is not None:
        marks["error_code"] = error_code
    return {"role": "assistant", "content": text, "meta": {**meta, **marks}}


class TurnFailed(ServiceError):
    """A provider failure of a turn whose input was stored: the error says the input is kept (and where)."""

    def __init__(self, kind: Refusal, code: str, message: str, *, input_message_id: str | None) -> None:
        params: dict[str, Any] = {}
        if input_message_id is not None:
            params = {"input_message_id": input_message_id, "input_kept": True, "retry_with": "retry_of"}
        super().__init__(kind, code, message, **params)


async def retry_input(repos: Repositories, chat_id: str, message_id: str) -> MessageRow:
    """The input ``message_id`` made current again (``meta.failed`` cleared, if set) for a turn that answers it.

    Only the chat's newest message can be answered this way, and only a user message: one whose turn failed, or
    one left without a reply (after the chat was rewound to it, or posted without generating). Anything else is
    409 ``RETRY_NOT_POSSIBLE``.
    """
    row = await repos.messages.get(message_id, chat_id)
    if row is None:
        raise ServiceError(
            Refusal.NOT_FOUND, "MESSAGE_NOT_FOUND", f"No message with id {message_id!r}.", message_id=message_id
        )
    newest = await repos.messages.list_page(chat_id, limit=1)
    answerable = row.role == "user" and not (row.meta or {}).get("command")
    if not answerable or not newest.rows or newest.rows[0].id != row.id:
        raise ServiceError(
            Refusal.CONFLICT,
            "RETRY_NOT_POSSIBLE",
            "Only the newest message of the chat, a user message without a reply, can be answered again.",
            message_id=message_id,
        )
    if not is_failed_input(row):
        return row
    patched = await repos.messages.patch(chat_id, message_id, {"meta": {FAILED: None}})
    assert patched is not None
    return patched


@dataclass(frozen=True, slots=True)
class Redo:
    """A turn that redoes the chat's newest reply instead of answering new input."""

    action: Literal["regenerate", "continue"]
    message_id: str


async def redo_target(repos: Repositories, chat_id: str, redo: Redo) -> MessageRow:
    """The reply ``redo`` works on: the chat's newest message, an assistant reply (409 ``REDO_NOT_POSSIBLE``);
    ``continue`` also needs a text reply without tool calls."""
    row = await repos.messages.get(redo.message_id, chat_id)
    if row is None:
        raise ServiceError(
            Refusal.NOT_FOUND,
            "MESSAGE_NOT_FOUND",
            f"No message with id {redo.message_id!r}.",
            message_id=redo.message_id,
        )
    newest = await repos.messages.list_page(chat_id, limit=1)
    usable = row.role == "assistant" and bool(newest.rows) and newest.rows[0].id == row.id
    if redo.action == "continue" and (row.tool_calls or not isinstance(row.content, str)):
        usable = False
    if not usable or (row.meta or {}).get("command"):
        raise ServiceError(
            Refusal.CONFLICT,
            "REDO_NOT_POSSIBLE",
            f"Only the chat's newest message, a reply of the model, can be used to {redo.action}"
            + (" (a text reply without tool calls)." if redo.action == "continue" else "."),
            message_id=redo.message_id,
            action=redo.action,
        )
    return row
