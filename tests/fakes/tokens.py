"""How the fake provider counts a prompt "its own way" (T5 tests): not contextshift's count.

A :class:`Counting` is the fake model's tokenizer and window: ``chars_per_token`` characters a token (or an
exact ``count_text``), ``per_message`` tokens of framing per message and ``priming`` per prompt. A request
whose prompt plus ``max_tokens`` exceeds ``window`` is rejected the way OpenAI and Anthropic reject it,
stating the real count; a successful one reports the real count as its usage.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Counting:
    #: Characters per token of the fake model's tokenizer (2.6 is about 1.54x denser than a 4-chars estimate).
    chars_per_token: float = 4.0
    #: The context window; None accepts any length.
    window: int | None = None
    #: An exact text counter (e.g. a real encoding) instead of ``chars_per_token``.
    count_text: Callable[[str], int] | None = None
    per_message: int = 3
    priming: int = 3

    def text_tokens(self, text: str) -> int:
        if not text:
            return 0
        if self.count_text is not None:
            return self.count_text(text)
        return math.ceil(len(text) / self.chars_per_token)

    def prompt_tokens(self, body: Mapping[str, Any]) -> int:
        """The real prompt size of an OpenAI or Anthropic request body."""
        texts = [_system_text(body.get("system"))] if body.get("system") else []
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        texts += [_message_text(m) for m in messages]
        return self.priming + sum(self.per_message + self.text_tokens(t) for t in texts)

    def over_window(self, body: Mapping[str, Any]) -> tuple[int, int] | None:
        """``(prompt tokens, max_tokens)`` when the request does not fit the window, else None."""
        if self.window is None:
            return None
        tokens = self.prompt_tokens(body)
        reply = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        reply = reply if isinstance(reply, int) else 0
        return (tokens, reply) if tokens + reply > self.window else None


def _system_text(system: Any) -> str:
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
    return str(system or "")


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return ""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text") or "")
    if kind == "tool_use":
        return f"{part.get('name', '')}{json.dumps(part.get('input', {}))}"
    if kind == "tool_result":
        content = part.get("content")
        return "".join(_part_text(p) for p in content) if isinstance(content, list) else str(content or "")
    return ""


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    text = "".join(_part_text(p) for p in content) if isinstance(content, list) else str(content or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        text += f"{function.get('name', '')}{function.get('arguments', '')}"
    return text


def rejection(protocol: str, window: int, tokens: int, reply: int) -> tuple[str, str]:
    """``(message, type)`` of the 400 a real provider sends for a prompt over the window."""
    if protocol == "anthropic":
        if tokens > window:
            return f"prompt is too long: {tokens} tokens > {window} maximum", "invalid_request_error"
        return (
            f"input length and `max_tokens` exceed context limit: {tokens} + {reply} > {window}, decrease input "
            "length or `max_tokens` and try again",
            "invalid_request_error",
        )
    if reply:
        return (
            f"This model's maximum context length is {window} tokens. However, you requested {tokens + reply} "
            f"tokens ({tokens} in the messages, {reply} in the completion). Please reduce the length of the "
            "messages or completion.",
            "invalid_request_error",
        )
    return (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} "
        "tokens. Please reduce the length of the messages.",
        "invalid_request_error",
    )
