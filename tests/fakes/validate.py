"""The fake's protocol checks: a request a real provider would reject with 400 is rejected here too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def openai_problem(body: Any) -> str | None:
    if not isinstance(body, Mapping):
        return "body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{i}]: invalid role"
        if m["role"] == "tool" and not m.get("tool_call_id"):
            return f"messages[{i}]: tool message needs tool_call_id"
    return None


def anthropic_problem(body: Any, headers: Mapping[str, str]) -> str | None:
    if "anthropic-version" not in headers:
        return "anthropic-version header is required"
    if not isinstance(body, Mapping):
        return "body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model is required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens is required"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system must be a string or a list of blocks"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    previous = None
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: must be user or assistant"
        if i == 0 and m["role"] != "user":
            return "messages: first message must use the user role"
        if m["role"] == previous:
            return "messages: roles must alternate between user and assistant"
        previous = m["role"]
        content = m.get("content")
        if isinstance(content, str):
            if not content.strip():
                return f"messages.{i}: text content must contain non-whitespace text"
        elif not isinstance(content, list) or not content:
            return f"messages.{i}: content must be a string or a non-empty list"
        elif any(_blank_text(b) for b in content):
            return f"messages.{i}: text content blocks must contain non-whitespace text"
    last = messages[-1]
    if last["role"] == "assistant" and _final_text(last.get("content")).endswith((" ", "\n", "\t")):
        return "final assistant content cannot end with trailing whitespace"
    return _tool_pairing_problem(messages)


def _blank_text(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text" and not str(block.get("text", "")).strip()


def _final_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        return str(content[-1].get("text", "")) if content[-1].get("type") == "text" else ""
    return ""


def _tool_pairing_problem(messages: list[Any]) -> str | None:
    """Every ``tool_use`` needs a ``tool_result`` in the next message, and results need a call."""
    for i, m in enumerate(messages):
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        uses = [b.get("id") for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
        if i > 0:
            before = messages[i - 1].get("content")
            earlier = before if isinstance(before, list) else []
            called = {b.get("id") for b in earlier if isinstance(b, Mapping) and b.get("type") == "tool_use"}
            for b in blocks:
                if isinstance(b, Mapping) and b.get("type") == "tool_result" and b.get("tool_use_id") not in called:
                    return f"messages.{i}: tool_result without a matching tool_use in the previous message"
        if uses:
            following = messages[i + 1].get("content") if i + 1 < len(messages) else None
            results = {
                b.get("tool_use_id")
                for b in (following if isinstance(following, list) else [])
                if isinstance(b, Mapping) and b.get("type") == "tool_result"
            }
            if i + 1 < len(messages) and not set(uses) <= results:
                return f"messages.{i}: tool_use ids without tool_result blocks immediately after"
    return None
