"""A chat's automatic title (V5): the first user message, on one line, cut at a word near 60 characters.

A chat created without a title gets one when its first user message is stored (through ``/generate`` or
``POST /chats/{id}/messages``); a title the user set or renamed is never replaced.
"""

from __future__ import annotations

from ..storage import Repositories
from ..storage.tables import ChatRow
from .commands import command_of

#: The longest automatic title, in characters, the ellipsis included.
TITLE_LENGTH = 60


def auto_title(content: str) -> str:
    """The title a first message gives a chat: whitespace collapsed, cut at a word with "…" past ``TITLE_LENGTH``;
    empty for a message with no words."""
    text = " ".join(content.split())
    if len(text) <= TITLE_LENGTH:
        return text
    cut = text[: TITLE_LENGTH - 1]
    space = cut.rfind(" ")
    if space >= TITLE_LENGTH // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


async def title_untitled(repos: Repositories, chat: ChatRow, content: object) -> None:
    """Give an untitled chat the title of this user message (a slash command gives none)."""
    if chat.title or not isinstance(content, str) or command_of(content) is not None:
        return
    title = auto_title(content)
    if title:
        await repos.chats.update(chat.id, {"title": title})


__all__ = ["TITLE_LENGTH", "auto_title", "title_untitled"]
