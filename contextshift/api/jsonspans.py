"""A request body parsed once, with the JSON of each element of its ``messages`` array (V7 speed).

The endpoint forwards the messages it keeps as the caller sent them, and knows a message it has read before
by its JSON (``MessageCache``); with each message's JSON in hand it need not serialize them again (at 1,000
messages that was about a fifth of the endpoint's time).

A body is parsed by ``orjson`` (about a quarter of :func:`json.loads`' time on a 0.5 MB body) and each message
written back to its compact JSON by it: the same JSON values, key order kept, as UTF-8 bytes. A body orjson
refuses but :func:`json.loads` takes (``NaN``, a lone surrogate escape, UTF-16), or that holds a run of 20
digits (an integer that may be past 64 bits, which orjson would read as a float), is parsed by ``json``'s own
C scanner, value by value, and each message keeps the text the caller wrote.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

import orjson

from .limits import TOO_MANY_MESSAGES, BodyRefused

_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: JSON's whitespace; a tuple, so that the empty string past the end is not in it.
_BLANKS = (" ", "\t", "\n", "\r")
#: The json module's own (C) scanners: a value at an index, and a string's body after its quote.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


#: Every digit as ``0``, every other byte as a space: a run of 20 digits is then one ``bytes.find`` away.
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
#: 20 digits: the shortest integer that may be past 64 bits (2**64 has 20 digits).
_LONG_NUMBER = b"0" * 20


class TooManyMessages(BodyRefused):
    """413 ``TOO_MANY_MESSAGES``: the body's ``messages`` array is longer than the caller allows.

    Args:
        count: how many messages it has.
        limit: the most it may have.
    """

    code = TOO_MANY_MESSAGES

    def __init__(self, count: int, limit: int) -> None:
        message = f"The request holds {count} messages, more than the limit of {limit}."
        super().__init__(TOO_MANY_MESSAGES, message, limit=limit, count=count)
        self.count = count


class Parsed:
    """A JSON body: its value, and for an object with a ``messages`` array the JSON of each element (UTF-8)."""

    __slots__ = ("messages_json", "value")

    def __init__(self, value: Any, messages_json: list[bytes] | None) -> None:
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


def parse(raw: bytes, max_messages: int | None = None) -> Parsed:
    """``json.loads(raw)``, plus the JSON of each ``messages`` element when the body is an object.

    Args:
        raw: the body.
        max_messages: the most elements ``messages`` may have (checked before they are written back).

    Raises:
        TooManyMessages: ``messages`` has more than ``max_messages`` elements.
        ValueError: ``raw`` is not one JSON value (``UnicodeDecodeError`` included).
    """
    if _LONG_NUMBER in raw.translate(_DIGITS):  # orjson reads an integer past 64 bits as a float; json does not
        parsed = _scanned(raw)
    else:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = _scanned(raw)
        else:
            messages = value.get("messages") if type(value) is dict else None
            if type(messages) is not list:
                return Parsed(value, None)
            if max_messages is not None and len(messages) > max_messages:
                raise TooManyMessages(len(messages), max_messages)
            # Each message's JSON is copied to a bytes object of its own size: orjson's result keeps the
            # buffer it wrote into (about 8 KiB for a message of 800 bytes), and these are kept across requests
            # (MessageCache, bounded by their length): ten times over that bound in memory before this copy.
            dumps, join = orjson.dumps, b"".join
            return Parsed(value, [join((dumps(item), b"")) for item in messages])
    messages = parsed.value.get("messages") if type(parsed.value) is dict else None
    if max_messages is not None and type(messages) is list and len(messages) > max_messages:
        raise TooManyMessages(len(messages), max_messages)
    return parsed


def _scanned(raw: bytes) -> Parsed:
    """What :func:`parse` does with a body orjson refuses: ``json``'s scanner, each message's text as written."""
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
    texts = [t.encode("utf-8", "surrogatepass") for t in messages_json] if messages_json is not None else None
    return Parsed(body, texts)


__all__ = ["Parsed", "TooManyMessages", "parse"]
