"""The prompt template (P5): the order of blocks is data, configurable per bot.

A template is a list whose items are block names (below) or custom text blocks
``{"id": "...", "content": "...", "role": "system"}`` (source ``template``, not protected).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.vocabulary import BLOCK_KINDS

BLOCKS: tuple[str, ...] = BLOCK_KINDS
DEFAULT_TEMPLATE: tuple[str, ...] = BLOCKS
REQUIRED_BLOCKS = frozenset({"history", "input"})


@dataclass(frozen=True, slots=True)
class CustomBlock:
    id: str
    content: str
    role: str = "system"


TemplateItem = str | CustomBlock


def parse_template(raw: Sequence[str | Mapping[str, Any]] | None) -> list[TemplateItem]:
    """A validated template; ``ValueError`` names the first problem."""
    if raw is None:
        return list(DEFAULT_TEMPLATE)
    items: list[TemplateItem] = []
    seen: set[str] = set()
    for position, item in enumerate(raw):
        if isinstance(item, str):
            if item not in BLOCKS:
                raise ValueError(f"template[{position}]: unknown block {item!r}; known: {', '.join(BLOCKS)}")
            key = item
            items.append(item)
        elif isinstance(item, Mapping):
            ident, content, role = item.get("id"), item.get("content"), item.get("role", "system")
            if not isinstance(ident, str) or not ident or not isinstance(content, str):
                raise ValueError(f"template[{position}]: a custom block needs a string id and content")
            if role not in ("system", "user", "assistant"):
                raise ValueError(f"template[{position}]: role must be system, user or assistant")
            key = f"template.{ident}"
            items.append(CustomBlock(ident, content, str(role)))
        else:
            raise ValueError(f"template[{position}]: must be a block name or a custom block object")
        if key in seen:
            raise ValueError(f"template[{position}]: {key!r} appears twice")
        seen.add(key)
    missing = REQUIRED_BLOCKS - seen
    if missing:
        raise ValueError(f"template must contain the blocks {', '.join(sorted(missing))}")
    return items
