"""The fake provider's own tokenizer and chat template, served in the dialects of real local servers.

Tokens are special markers, words and single punctuation marks (whitespace costs nothing), so a text costs
the same inside the template as alone: the exact count of a request is knowable. The template is ChatML:
``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message and ``<|im_start|>assistant\\n`` to prime the reply,
so a message costs 3 tokens of framing and the priming 2. ``llama-cpp-python`` adds a BOS token to every
tokenized text and prompt, as that server does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TOKEN = re.compile(r"<\|im_start\|>|<\|im_end\|>|<s>|\w+|[^\w\s]")
DIALECTS = ("llama-cpp-python", "llama.cpp", "vllm")
TOKENIZER_PATHS = ("/tokenize", "/extras/tokenize", "/extras/tokenize/count", "/apply-template")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    pieces = [_content_text(message.get("content"))] if _content_text(message.get("content")) else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            pieces.append(str(function.get("name", "")))
            if function.get("arguments"):
                pieces.append(str(function["arguments"]))
    return "\n".join(pieces)


def apply_template(messages: list[Any], system: Any = None) -> str:
    parts = []
    if isinstance(system, str) and system:
        parts.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    for m in messages:
        if isinstance(m, Mapping):
            parts.append(f"<|im_start|>{m.get('role', 'user')}\n{message_text(m)}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def prompt_tokens(dialect: str, body: Mapping[str, Any]) -> int:
    """What the server counts for a chat request body: the templated prompt (with BOS where it adds one)."""
    count = len(tokens(apply_template(list(body.get("messages") or []), body.get("system"))))
    return count + (1 if dialect == "llama-cpp-python" else 0)


def answer(dialect: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """The (status, JSON) a server of ``dialect`` gives to a tokenizer endpoint."""
    body = body if isinstance(body, Mapping) else {}
    if dialect == "llama-cpp-python" and path.startswith("/extras/tokenize"):
        text = body.get("input")
        if not isinstance(text, str):
            return 422, {"detail": [{"msg": "Field required", "loc": ["body", "input"]}]}
        ids = [0, *range(1, len(tokens(text)) + 1)]  # BOS first
        return 200, ({"count": len(ids)} if path.endswith("/count") else {"tokens": ids})
    if dialect == "llama.cpp" and path == "/tokenize":
        text = body.get("content")
        if not isinstance(text, str):
            return 400, {"error": {"message": "content is required"}}
        return 200, {"tokens": list(range(len(tokens(text))))}
    if dialect == "llama.cpp" and path == "/apply-template":
        return 200, {"prompt": apply_template(list(body.get("messages") or []))}
    if dialect == "vllm" and path == "/tokenize":
        if isinstance(body.get("messages"), list):
            count = len(tokens(apply_template(body["messages"])))
        elif isinstance(body.get("prompt"), str):
            count = len(tokens(body["prompt"]))
        else:
            return 400, {"object": "error", "message": "prompt or messages required", "code": 400}
        return 200, {"count": count, "max_model_len": 2048, "tokens": list(range(count))}
    return 404, {"detail": "Not Found"}
