"""Optional sessions of the compatible endpoints (V7): ``extra_body={"contextshift": {"chat_id": ...}}`` on
``POST /v1/chat/completions`` and ``POST /v1/messages`` alike, each answering in its own wire shape (a
:class:`~.compat_forward.Dialect`).

The request's last user message becomes the new user turn of the stored chat, and the answer comes from that
chat's own pipeline (its bot's system prompt and persona, lorebook, memory, compaction and stored history),
exactly as ``POST /api/v2/chats/{id}/generate`` would give it. The request's other messages are not used: the
chat's stored history is the conversation (an app that resends its whole history gets no duplicates). The chat's
bot decides the model; the request's ``model`` must still name an enabled model. ``tools`` are refused (the
chat pipeline sends none). The audit is the chat's (``GET /api/v2/chats/{id}/context-audit``), copied into a
proxy audit with the generation's id when the answer is complete.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..core.errors import TokenBudgetExceeded
from ..core.messages import text_parts
from ..pipeline import ReplyReserveTooLarge
from ..providers import ProviderError
from ..providers.base import ChatResult, Usage
from ..service.errors import Refusal, ServiceError
from ..service.generation import Done, Failed, Generations, Token
from ..service.proxy import ProxyCall, ProxyService, invalid_request
from .auth import Principal
from .compat_forward import EXCLUDED_HEADER, Dialect, visibility
from .ownership import check_chat


def new_turn(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the request's last user message: the chat's new user turn."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):  # its text parts: a tool result is no turn of a chat (it sends no tools)
                texts = [p for p in content if isinstance(p, Mapping) and p.get("type") in ("text", "input_text")]
                text = "\n".join(text_parts(texts))
            else:
                text = ""
            if text.strip():
                return text
            break
    raise invalid_request("With contextshift.chat_id the request needs a last user message with text.", "messages")


def _reply(done: Done) -> ChatResult:
    meta = done.message.meta or {}
    used = done.usage or None
    usage = (
        Usage(
            input_tokens=int(used.get("input_tokens") or 0),
            output_tokens=int(used.get("output_tokens") or 0),
            cached_input_tokens=int(used.get("cached_input_tokens") or 0),
        )
        if used
        else None
    )
    finish = meta.get("finish_reason")
    return ChatResult(
        text=str(done.message.content or ""), finish_reason=finish if isinstance(finish, str) else "stop", usage=usage
    )


def _failure(code: str, message: str) -> ProviderError | None:
    if code.startswith("PROVIDER_") or code in ("EMPTY_RESPONSE", "GENERATION_FAILED"):
        return ProviderError(code, message)
    return None


async def answer(
    proxy: ProxyService,
    generations: Generations,
    call: ProxyCall,
    chat_id: Any,
    principal: Principal,
    dialect: Dialect,
) -> Response:
    """Answer ``call`` from the pipeline of chat ``chat_id``, in ``dialect``'s shape (a reply or a stream)."""
    await proxy.resolve(call.model)  # 404 before anything else, as without a session
    if not isinstance(chat_id, str) or not chat_id:
        raise invalid_request("contextshift.chat_id must be a chat id.", "contextshift.chat_id")
    if call.tools:
        raise invalid_request(
            "tools cannot be sent with contextshift.chat_id (the chat's pipeline sends none).", "tools"
        )
    content = new_turn(call.messages)
    await check_chat(generations.db, principal, chat_id)  # another user's chat is CHAT_NOT_FOUND (N2)
    try:
        generation_id, turn, result = await generations.start(chat_id, content, call.max_tokens)
    except ReplyReserveTooLarge as error:  # the request's max_tokens (or the bot's reserve), not its messages
        refusal = ServiceError(Refusal.UNPROCESSABLE, error.code, error.message, param=call.max_tokens_field)
        return dialect.service_error(refusal, {EXCLUDED_HEADER: "0"})
    except TokenBudgetExceeded as error:
        return dialect.service_error(
            ServiceError(Refusal.INVALID, "CONTEXT_LENGTH_EXCEEDED", error.message, param="messages"),
            {EXCLUDED_HEADER: "0"},
        )
    headers = visibility(generation_id, result.excluded_count)
    events = generations.stream(chat_id, generation_id, turn, result)
    if not call.stream:
        async for event in events:
            if isinstance(event, Done):
                await proxy.copy_chat_audit(chat_id, generation_id, call.user_id)
                return JSONResponse(dialect.answer(_reply(event), generation_id, call), headers=headers)
            if isinstance(event, Failed):
                await proxy.copy_chat_audit(chat_id, generation_id, call.user_id)
                upstream = _failure(event.code, event.message)
                if isinstance(upstream, ProviderError):
                    return dialect.provider_response(upstream, headers)
                return dialect.service_error(ServiceError(Refusal.INVALID, event.code, event.message), headers)
        raise ServiceError(Refusal.UPSTREAM_FAILED, "GENERATION_FAILED", "The generation ended without an answer.")

    writer = dialect.writer(generation_id, call)

    async def body() -> AsyncIterator[bytes]:
        yield writer.start()
        async for event in events:
            if isinstance(event, Token):
                yield writer.text(event.text)
            elif isinstance(event, Done):
                for chunk in writer.end(_reply(event)):
                    yield chunk
            elif isinstance(event, Failed):
                upstream = _failure(event.code, event.message)
                if isinstance(upstream, ProviderError):
                    yield dialect.stream_error(upstream)
                else:
                    yield dialect.stream_refusal(event.code, event.message)
        await proxy.copy_chat_audit(chat_id, generation_id, call.user_id)

    return StreamingResponse(body(), media_type="text/event-stream", headers={**headers, "cache-control": "no-cache"})


__all__ = ["answer", "new_turn"]
