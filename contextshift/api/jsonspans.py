"""A request body parsed once, with the JSON text of each element of its ``messages`` array (V7 speed).

The endpoint forwards the messages it keeps exactly as the caller wrote them; with their own JSON text in
hand it need not serialize them again (at 1,000 messages that was about a fifth of the endpoint's time).
The parse is :func:`json.loads`'s own C scanner, run value by value, so it costs what ``json.loads`` costs.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: JSON's whitespace; a tuple, so that the empty string past the end is not in it.
_BLANKS = (" ", "\t", "\n", "\r")
#: The json module's own (C) scanners: a value at an index, and a string's body after its quote.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class Parsed:
    """A JSON body: its value, and for an object with a ``messages`` array the JSON text of each element."""

    __slots__ = ("messages_json", "value")

    def __init__(self, value: Any, messages_json: list[str] | None) -> None:
        self.value = value
        self.messages_json = messages_json


def _skip(text: str, index: int) -> int:
    if text[index : index + 1] not in _BLANKS:  # most often: no whitespace at all, or one space
        return index
    if text[index + 1 : index + 2] not in _BLANKS:
        return index + 1
    match = _WHITESPACE.match(text, index)
    return match.end() if match is not None else index


def _value(text: str, index: int) -> tuple[Any, int]:
    try:
        return _scan(text, index)
    except StopIteration:
        raise ValueError(f"no JSON value at {index}") from None


def _array(text: str, index: int) -> tuple[list[Any], list[str], int]:
    """The array starting at ``text[index] == "["``: its values, their JSON texts, and the index after it."""
    values: list[Any] = []
    texts: list[str] = []
    index = _skip(text, index + 1)
    if text[index : index + 1] == "]":
        return values, texts, index + 1
    while True:
        start = index
        value, index = _value(text, index)
        values.append(value)
        texts.append(text[start:index])
        index = _skip(text, index)
        mark = text[index : index + 1]
        if mark == "]":
            return values, texts, index + 1
        if mark != ",":
            raise ValueError(f"expected ',' or ']' at {index}")
        index = _skip(text, index + 1)


def parse(raw: bytes) -> Parsed:
    """``json.loads(raw)``, plus the JSON text of each ``messages`` element when the body is an object.

    Raises:
        ValueError: ``raw`` is not one JSON value (``UnicodeDecodeError`` included).
    """
    text = raw.decode(json.detect_encoding(raw), "surrogatepass")
    index = _skip(text, 0)
    if text[index : index + 1] != "{":
        return Parsed(json.loads(text), None)
    body: dict[str, Any] = {}
    messages_json: list[str] | None = None
    index = _skip(text, index + 1)
    if text[index : index + 1] == "}":
        index += 1
    else:
        while True:
            if text[index : index + 1] != '"':
                raise ValueError(f"expected a key at {index}")
            key, index = scanstring(text, index + 1)
            index = _skip(text, index)
            if text[index : index + 1] != ":":
                raise ValueError(f"expected ':' at {index}")
            index = _skip(text, index + 1)
            if key == "messages" and text[index : index + 1] == "[":
                body[key], messages_json, index = _array(text, index)
            else:
                body[key], index = _value(text, index)
                if key == "messages":
                    messages_json = None
            index = _skip(text, index)
            mark = text[index : index + 1]
            if mark == "}":
                index += 1
                break
            if mark != ",":
                raise ValueError(f"expected ',' or '}}' at {index}")
            index = _skip(text, index + 1)
    if _skip(text, index) != len(text):
        raise ValueError("extra data after the JSON value")
    return Parsed(body, messages_json)


__all__ = ["Parsed", "parse"]
