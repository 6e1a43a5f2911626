"""``POST /api/v2/examples/import``: the bundled example conversations as bots and chats (UI onboarding)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel

from ...service import examples as bundled
from .. import schemas as s
from .. import views
from ..auth import Caller
from ..deps import Repos
from ..errors import error_responses

router = APIRouter(tags=["web ui"], responses=error_responses(400, 422, 500))


class ImportedExample(BaseModel):
    example: str
    bot: s.BotOut
    chat: s.ChatOut
    messages: int
    draft: str | None


class ImportOut(BaseModel):
    imported: list[ImportedExample]
    skipped: list[str]


@router.post(
    "/examples/import",
    status_code=status.HTTP_201_CREATED,
    response_model=ImportOut,
    summary="Import the bundled example conversations as bots and chats (web UI onboarding)",
)
async def import_examples(principal: Caller, repos: Repos) -> dict[str, Any]:
    """The examples become the caller's own bots, lorebooks and chats."""
    imported, skipped = await bundled.import_examples(repos, principal.user_id)
    return {
        "imported": [
            {
                "example": item.example,
                "bot": views.bot(item.bot),
                "chat": views.chat(item.chat),
                "messages": item.messages,
                "draft": item.draft,
            }
            for item in imported
        ],
        "skipped": skipped,
    }
