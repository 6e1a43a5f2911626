"""Export and import of chats (issue 27): a chat as our JSON document or as Markdown; files of contextshift,
SillyTavern, ChatGPT and Open WebUI as new chats (``service.transfer`` reads and writes the formats).

An import is one request and one transaction: every chat the file holds is made, or none (a refused file makes
nothing). The file's text travels inside a JSON body, so the API's body limits (size, nesting, parts, NUL)
apply to it as to every other request.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ...service.transfer import export_document, export_markdown, parse_import
from ...storage.repositories.transfer import add_chat_contents, chat_contents
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..deps import Repos
from ..errors import error_responses
from ..ownership import own_bot, own_chat

router = APIRouter(tags=["chats"], responses=error_responses(400, 422, 500))


class ChatImport(s.Strict):
    bot_id: s.Ident = Field(description="The bot the imported chats talk to")
    content: str = Field(
        min_length=1,
        description="The file's text: a contextshift JSON export, a SillyTavern chat (.jsonl), or a ChatGPT or "
        "Open WebUI export (conversations.json, which may hold several conversations)",
    )
    filename: s.Text | None = Field(default=None, max_length=500, description="The file's name (not needed)")


class ChatsImported(BaseModel):
    chats: list[s.ChatOut]
    messages: int = Field(description="How many messages were imported in all")
    source: str = Field(description="The format read: contextshift, sillytavern, chatgpt or openwebui")


@router.get(
    "/chats/{chat_id}/export",
    response_model=None,
    responses={
        **error_responses(404),
        200: {
            "description": "The chat as our JSON document (format contextshift.chat) or as Markdown",
            "content": {"application/json": {}, "text/markdown": {}},
        },
    },
)
async def export_chat(
    chat_id: str,
    principal: Caller,
    repos: Repos,
    format: Annotated[Literal["json", "markdown"], Query(description="json (lossless) or markdown")] = "json",
) -> Response:
    """The whole chat, to keep or to import again: every message with its versions, pins, exclusions and
    standing marks, and every summary's text (JSON); or the chat for people to read (Markdown)."""
    chat = await own_chat(repos, principal, chat_id)
    messages, summaries = await chat_contents(repos.session, chat.id)
    chat_fields = {"title": chat.title, "type": chat.type, "created_at": chat.created_at.isoformat()}
    document = export_document(chat_fields, messages, summaries, datetime.now(UTC).isoformat())
    name = f"contextshift-chat-{chat.id}"
    if format == "markdown":
        return Response(
            export_markdown(document),
            media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}.md"'},
        )
    return JSONResponse(document, headers={"Content-Disposition": f'attachment; filename="{name}.json"'})


@router.post(
    "/chat-imports",
    status_code=status.HTTP_201_CREATED,
    response_model=ChatsImported,
    responses=error_responses(404),
)
async def import_chats(body: ChatImport, principal: Caller, repos: Repos) -> dict[str, Any]:
    """New chats from a file: all of them, or none when the file cannot be imported (``IMPORT_*`` codes)."""
    await own_bot(repos, principal, body.bot_id)
    imported = parse_import(body.content)
    chats = []
    for item in imported:
        row = await repos.chats.create(bot_id=body.bot_id, type=item.type, title=item.title)
        await add_chat_contents(repos.session, row.id, item.messages, item.summaries)
        chats.append(views.chat(row))
    return {
        "chats": chats,
        "messages": sum(len(c.messages) for c in imported),
        "source": imported[0].source,
    }
