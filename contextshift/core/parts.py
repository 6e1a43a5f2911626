"""Content-part conversion between the OpenAI and Anthropic shapes (pure, no I/O).

Parts already in the target shape pass through unchanged; parts of the other shape are converted; a part
that cannot be expressed at all becomes a short text label (never raw data).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[^;,]*)*;base64,(?P<data>.*)$", re.DOTALL)

TEXT_TYPES = frozenset({"text", "input_text", "output_text"})


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:`` URL, or ``None``."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match.group("mime") or "application/octet-stream", match.group("data")


def _image_url_of(part: Mapping[str, Any]) -> str | None:
    value = part.get("image_url")
    if isinstance(value, Mapping):
        value = value.get("url")
    return value if isinstance(value, str) else None


# -- OpenAI parts -> Anthropic blocks --------------------------------------------------------------------


def to_anthropic_block(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """One Anthropic content block for a part; ``None`` for an empty text part."""
    kind = part.get("type")
    if kind in TEXT_TYPES:
        text = part.get("text")
        if not isinstance(text, str) or not text.strip():  # Anthropic rejects blank text blocks
            return None
        block: dict[str, Any] = {"type": "text", "text": text}
        if "cache_control" in part:
            block["cache_control"] = part["cache_control"]
        return block
    if kind in ("image_url", "input_image"):
        url = _image_url_of(part)
        if url is None:
            return {"type": "text", "text": "[image]"}
        data = split_data_url(url)
        if data is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind in ("file", "input_file"):
        inner = part.get("file")
        file: Mapping[str, Any] = inner if isinstance(inner, Mapping) else part
        raw = file.get("file_data")
        data = split_data_url(raw) if isinstance(raw, str) else None
        if data is not None:
            return {"type": "document", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
        name = file.get("filename")
        return {"type": "text", "text": f"[file: {name}]" if isinstance(name, str) and name else "[file]"}
    return dict(part)


def to_anthropic_blocks(content: str | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    return [b for b in (to_anthropic_block(p) for p in content) if b is not None]


# -- Anthropic blocks -> OpenAI parts --------------------------------------------------------------------


def to_openai_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """One OpenAI content part for a part (Anthropic image/document blocks converted)."""
    kind = part.get("type")
    source = part.get("source")
    if kind == "image" and isinstance(source, Mapping):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "document" and isinstance(source, Mapping):
        if source.get("type") == "base64":
            data = f"data:{source.get('media_type', 'application/pdf')};base64,{source.get('data', '')}"
            return {"type": "file", "file": {"file_data": data}}
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return {"type": "text", "text": source["data"]}
        return {"type": "text", "text": "[file]"}
    return dict(part)


def tool_result_text(content: Any) -> str | list[dict[str, Any]]:
    """The content of an Anthropic ``tool_result`` block as OpenAI tool-message content."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return [to_openai_part(p) for p in content if isinstance(p, Mapping)]
    return str(content)
