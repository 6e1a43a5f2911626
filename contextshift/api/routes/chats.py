"""Chats and their messages (V1): pinning and ``meta.manualExcluded`` are set with PATCH."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, Field

from ...core.vocabulary import Role
from ...service.errors import Refusal, ServiceError, not_found
from ...service.titles import title_untitled
from ...service.turns import between_turns
from ...storage import row_to_message
from ...storage.repositories.branches import branch_from, is_branch_point, show_branch
from ...storage.repositories.search import search_chats as search_chats_in
from ...storage.repositories.window import count_before
from .. import schemas as s
from .. import views
from ..auth import Caller, Principal
from ..created import locate, located
from ..deps import Repos
from ..envelopes import ChatEnvelope, ChatList, Deleted, MessageEnvelope, Rewound
from ..errors import error_responses
from ..ownership import own_bot, own_chat

router = APIRouter(tags=["chats"], responses=error_responses(400, 422, 500))


class PagedMessageOut(s.MessageOut):
    position: int = Field(
        description="Its place among the chat's shown messages, from 1 with no gaps (seqs are never reused, so "
        "they have gaps after a rewind, a delete or a branch): the number the web UI shows"
    )


class MessagePageOut(BaseModel):
    messages: list[PagedMessageOut]
    has_more: bool


async def _chat(repos: Repos, chat_id: str, principal: Principal) -> Any:
    return await own_chat(repos, principal, chat_id)


@router.post(
    "/chats",
    status_code=status.HTTP_201_CREATED,
    response_model=ChatEnvelope,
    responses={**error_responses(404), **located("get_chat")},
)
async def create_chat(
    body: s.ChatCreate, principal: Caller, repos: Repos, request: Request, response: Response
) -> dict[str, Any]:
    await own_bot(repos, principal, body.bot_id)
    row = await repos.chats.create(bot_id=body.bot_id, type=body.type, title=body.title or "")
    locate(request, response, "get_chat", chat_id=row.id)
    return {"chat": views.chat(row)}


@router.get("/chats", response_model=ChatList)
async def list_chats(
    principal: Caller,
    repos: Repos,
    bot_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    rows = await repos.chats.list_all(bot_id=bot_id, limit=limit, offset=offset, owner_id=principal.user_id)
    return {"chats": [views.chat(r) for r in rows]}


class ChatHitMessage(BaseModel):
    id: str
    seq: int
    role: Role
    excerpt: str = Field(description="The matching message's text, cut around the first word searched for")


class ChatHit(BaseModel):
    chat: s.ChatOut
    message: ChatHitMessage | None = Field(description="The newest matching message; null when the title matched")


class ChatSearchOut(BaseModel):
    results: list[ChatHit]


#: Characters of a matching message shown around the first word found.
EXCERPT_CHARS = 160


def _excerpt(row: Any, query: str) -> str:
    text = " ".join(str(row_to_message(row).text).split())
    words = [w for w in query.lower().split() if w]
    at = min((i for i in (text.lower().find(w[:5]) for w in words) if i >= 0), default=0)
    start = max(0, at - EXCERPT_CHARS // 3)
    cut = text[start : start + EXCERPT_CHARS]
    return ("…" if start else "") + cut + ("…" if start + EXCERPT_CHARS < len(text) else "")


@router.get("/search/chats", response_model=ChatSearchOut)
async def search_chats(
    principal: Caller,
    repos: Repos,
    q: Annotated[str, Query(min_length=1, max_length=200, description="Words of a title or a message")],
    limit: Annotated[int, Query(ge=1, le=100)] = 30,
) -> dict[str, Any]:
    """Your chats whose title holds ``q``, or one of whose messages holds all its words (stemmed, through the
    full-text index), most recently updated first, each with its newest matching message."""
    hits = await search_chats_in(repos.session, q, owner_id=principal.user_id, limit=limit)
    results = []
    for chat_id, row in hits:
        chat = await repos.chats.get(chat_id)
        if chat is None:
            continue
        message = None
        if row is not None:
            message = ChatHitMessage(id=row.id, seq=row.seq, role=row.role, excerpt=_excerpt(row, q))  # type: ignore[arg-type]
        results.append(ChatHit(chat=views.chat(chat), message=message))
    return {"results": results}


@router.get("/chats/{chat_id}", response_model=ChatEnvelope, responses=error_responses(404))
async def get_chat(chat_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    return {"chat": views.chat(await _chat(repos, chat_id, principal))}


@router.patch("/chats/{chat_id}", response_model=ChatEnvelope, responses=error_responses(404))
async def patch_chat(chat_id: str, body: s.ChatPatch, principal: Caller, repos: Repos) -> dict[str, Any]:
    """Rename a chat (a renamed chat keeps its title: the automatic title fills only an empty one), and/or choose
    its own chat model (``model_id``; null: the bot's again). 404 ``MODEL_NOT_FOUND`` for no such model."""
    await _chat(repos, chat_id, principal)
    changes: dict[str, Any] = {}
    if body.title is not None:
        changes["title"] = body.title.strip()
    if "model_id" in body.model_fields_set:
        changes["model_id"] = body.model_id
    row = await repos.chats.update(chat_id, changes)
    if row is None:
        raise not_found("chat", chat_id)
    return {"chat": views.chat(row)}


@router.delete("/chats/{chat_id}", response_model=Deleted, responses=error_responses(404, 409))
async def delete_chat(chat_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    """Delete the chat and everything in it; 409 ``CHAT_BUSY`` while a turn runs in it."""
    await _chat(repos, chat_id, principal)
    async with between_turns(repos, chat_id):
        if not await repos.chats.delete(chat_id):
            raise not_found("chat", chat_id)
    return {"deleted": True}


@router.post(
    "/chats/{chat_id}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=MessageEnvelope,
    responses=error_responses(404),
)
async def create_message(chat_id: str, body: s.MessageCreate, principal: Caller, repos: Repos) -> dict[str, Any]:
    chat = await _chat(repos, chat_id, principal)
    data = body.model_dump(exclude_none=True)
    row = await repos.messages.append(chat_id, data)
    if body.role == "user":
        await title_untitled(repos, chat, body.content)
    return {"message": views.message(row)}


@router.get("/chats/{chat_id}/messages", response_model=MessagePageOut, responses=error_responses(404))
async def list_messages(
    chat_id: str,
    principal: Caller,
    repos: Repos,
    before_seq: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> dict[str, Any]:
    """The newest ``limit`` messages before ``before_seq``, oldest first; ``has_more`` when older ones exist.
    Each has its ``position`` among the chat's messages (1, 2, 3… with no gaps)."""
    await _chat(repos, chat_id, principal)
    page = await repos.messages.list_page(chat_id, before_seq=before_seq, limit=limit)
    rows = list(reversed(page.rows))
    older = await count_before(repos.messages.session, chat_id, rows[0].seq) if page.has_more else 0
    messages = [PagedMessageOut(**dict(views.message(r)), position=older + n) for n, r in enumerate(rows, 1)]
    return {"messages": messages, "has_more": page.has_more}


@router.patch(
    "/chats/{chat_id}/messages/{message_id}", response_model=MessageEnvelope, responses=error_responses(404, 409)
)
async def patch_message(
    chat_id: str, message_id: str, body: s.MessagePatch, principal: Caller, repos: Repos
) -> dict[str, Any]:
    """Pin, exclude (``meta.manualExcluded``), dismiss a standing instruction (``standing: false``), edit the
    text of a user message (``content``), or choose which version of a regenerated reply is shown and sent
    (``alternative``). Every check runs before any change."""
    await _chat(repos, chat_id, principal)
    current = await repos.messages.get(message_id, chat_id)
    if current is None:
        raise not_found("message", message_id)
    if body.content is not None and (current.role != "user" or (current.meta or {}).get("command")):
        raise ServiceError(
            Refusal.CONFLICT,
            "MESSAGE_NOT_EDITABLE",
            "Only the text of your own messages can be edited (not replies, tool results or commands).",
            message_id=message_id,
        )
    if body.alternative is not None and body.alternative >= len(current.alternatives or []) + (
        0 if current.alternatives else 1
    ):
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "ALTERNATIVE_NOT_FOUND",
            f"This message has no version {body.alternative}.",
            message_id=message_id,
            alternatives=len(current.alternatives or []) or 1,
        )
    row = await repos.messages.patch(
        chat_id, message_id, body.model_dump(exclude_none=True, include={"pinned", "meta", "standing"})
    )
    if row is not None and body.content is not None:
        row = await repos.messages.edit_content(chat_id, message_id, body.content)
    if row is not None and body.alternative is not None:
        if is_branch_point(row):
            async with between_turns(repos, chat_id):  # the shown continuation changes: not under a turn
                row = await show_branch(repos.messages, chat_id, message_id, body.alternative)
        else:
            row = await repos.messages.choose_alternative(chat_id, message_id, body.alternative)
    if row is None:
        raise not_found("message", message_id)
    return {"message": views.message(row)}


@router.post(
    "/chats/{chat_id}/messages/{message_id}/branch",
    response_model=MessageEnvelope,
    responses=error_responses(404, 409),
)
async def branch_chat(
    chat_id: str, message_id: str, body: s.MessageBranch, principal: Caller, repos: Repos
) -> dict[str, Any]:
    """Edit a user message into a new branch: ``content`` becomes its new version (shown and sent), and every
    later message stays with the version it had, reachable by choosing that version again (PATCH
    ``alternative``). Answer the new version with ``retry_of`` on a turn. 409 ``MESSAGE_NOT_EDITABLE`` for
    replies, tool results and commands; 409 ``CHAT_BUSY`` while a turn runs in the chat."""
    await _chat(repos, chat_id, principal)
    async with between_turns(repos, chat_id):
        current = await repos.messages.get(message_id, chat_id)
        if current is None:
            raise not_found("message", message_id)
        if current.role != "user" or (current.meta or {}).get("command") or not isinstance(current.content, str):
            raise ServiceError(
                Refusal.CONFLICT,
                "MESSAGE_NOT_EDITABLE",
                "Only the text of your own messages can be edited (not replies, tool results or commands).",
                message_id=message_id,
            )
        row = await branch_from(repos.messages, chat_id, message_id, body.content)
    if row is None:
        raise not_found("message", message_id)
    return {"message": views.message(row)}


@router.post(
    "/chats/{chat_id}/messages/{message_id}/rewind", response_model=Rewound, responses=error_responses(404, 409)
)
async def rewind_chat(chat_id: str, message_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    """Rewind the chat to this message: every later message is deleted (to answer an edited message again, with
    ``retry_of`` on a turn). The message itself stays. 409 ``CHAT_BUSY`` while a turn runs in the chat."""
    await _chat(repos, chat_id, principal)
    async with between_turns(repos, chat_id):
        current = await repos.messages.get(message_id, chat_id)
        if current is None:
            raise not_found("message", message_id)
        deleted = await repos.messages.delete_after(chat_id, current.seq)
    return {"deleted": deleted}


@router.delete("/chats/{chat_id}/messages/{message_id}", response_model=Deleted, responses=error_responses(404, 409))
async def delete_message(chat_id: str, message_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    """Delete one message; 409 ``CHAT_BUSY`` while a turn runs in the chat."""
    await _chat(repos, chat_id, principal)
    async with between_turns(repos, chat_id):
        if not await repos.messages.delete(chat_id, message_id):
            raise not_found("message", message_id)
    return {"deleted": True}
