"""N6 (issue 25, points 1, 2 and 8) over a real socket, on SQLite and PostgreSQL: a JSON body's nesting, its
number of values and of ``/v1`` messages, and text that cannot be stored are refused from the raw bytes, in
the endpoint's own error shape, with nothing stored; a chat that already holds such text stays readable.

The scanner itself is checked against a reference (``json.loads`` and a walk) on generated JSON.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from contextshift.api.limits import MAX_MESSAGES, MAX_NESTING, MAX_PARTS, BodyRefused, check_body
from tests.api.conftest import Service

JSON = {"Content-Type": "application/json"}
OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _parts(value: Any) -> int:
    """The documented count: every member and element, and an empty array or object as one."""
    if isinstance(value, dict):
        return max(1, len(value)) + sum(_parts(v) for v in value.values())
    if isinstance(value, list):
        return max(1, len(value)) + sum(_parts(v) for v in value)
    return 0


def _refusal(raw: bytes) -> tuple[int, str] | None:
    try:
        check_body(raw)
    except BodyRefused as refused:
        return refused.status, refused.code
    return None


async def _audits(service: Service) -> int:
    return len((await service.http.get("/api/v2/proxy-audits")).json()["audits"])


def _openai_error(code: str, message_part: str) -> Any:
    return {"type": "invalid_request_error", "code": code, "param": None, "message": message_part}


# -- the scanner, against a reference -----------------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from(['"', "\\", "[", "]", "{", "}", ",", "a", " ", "é", "\n"]), max_size=6)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(VALUES, st.integers(0, 70), st.booleans())
def test_the_scanner_counts_nesting_and_values_as_the_parsed_json_has_them(
    value: Any, wrap: int, ascii_only: bool
) -> None:
    for _ in range(wrap):
        value = [value]
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    expected = None
    if _parts(value) > MAX_PARTS:
        expected = (413, "TOO_MANY_PARTS")
    elif _depth(value) > MAX_NESTING:
        expected = (400, "JSON_TOO_DEEP")
    assert _refusal(raw) == expected


def test_the_limits_hold_at_their_bounds_exactly() -> None:
    assert _refusal(json.dumps(_deep(MAX_NESTING)).encode()) is None
    assert _refusal(json.dumps(_deep(MAX_NESTING + 1)).encode()) == (400, "JSON_TOO_DEEP")
    at_limit = json.dumps([0] * (MAX_PARTS - 2) + [[]]).encode()  # MAX_PARTS - 1 elements, the empty one counts 1
    assert _parts(json.loads(at_limit)) == MAX_PARTS and _refusal(at_limit) is None
    assert _refusal(json.dumps([0] * (MAX_PARTS - 1) + [[]]).encode()) == (413, "TOO_MANY_PARTS")
    # brackets and commas inside strings are text, not structure
    assert _refusal(json.dumps({"t": "[" * 500 + "," * (MAX_PARTS + 1)}).encode()) is None


@pytest.mark.parametrize(
    ("raw", "refused"),
    [
        (b'{"a": "x\\ud800y"}', True),  # a lone high surrogate
        (b'{"a": "x\\udc00"}', True),  # a lone low one
        (b'{"a": "\\ud800\\ud800\\udc00"}', True),  # a high one before a pair
        (b'{"a": "\\u0000"}', True),
        (b'{"a": "\\U0000 ok"}', False),  # not an escape JSON knows
        (b'{"a": "\\\\u0000 and \\\\ud800"}', False),  # an escaped backslash, then plain text
        (b'{"a": "\\\\\\u0000"}', True),  # an escaped backslash, then NUL
        (b'{"a": "\\ud83d\\ude00 \\uD83D\\uDE00"}', False),  # pairs, in either case
        ('{"a": "\ud800"}'.encode("utf-8", "surrogatepass"), True),  # a surrogate written as bytes
        ('{"a": "\U0001f600 é"}'.encode(), False),
    ],
)
def test_text_that_cannot_be_stored_is_found_in_the_raw_bytes(raw: bytes, refused: bool) -> None:
    assert (_refusal(raw) == (400, "TEXT_NOT_STORABLE")) is refused


# -- point 1: messages and parts on /v1 ---------------------------------------------------------------------


async def test_too_many_messages_is_a_413_in_each_endpoints_shape_and_nothing_is_stored(service: Service) -> None:
    ids = await service.setup_chat()
    many = [{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1)
    openai = await service.http.post(OPENAI, json={"model": "gpt-4o", "messages": many})
    assert openai.status_code == 413
    assert openai.json() == {
        "error": {
            "type": "invalid_request_error",
            "code": "too_many_messages",
            "param": None,
            "message": f"The request holds {MAX_MESSAGES + 1} messages, more than the limit of {MAX_MESSAGES}.",
        }
    }
    anthropic = await service.http.post(ANTHROPIC, json={"model": "gpt-4o", "max_tokens": 10, "messages": many})
    assert anthropic.status_code == 413
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "request_too_large"
    assert await _audits(service) == 0 and service.fake.requests == []
    # the limit itself is served
    fitted = await service.http.post(OPENAI, json={"model": "gpt-4o", "messages": many[:MAX_MESSAGES]})
    assert fitted.status_code == 200, fitted.text
    assert int(fitted.headers["x-contextshift-excluded"]) > 0 and ids["model"]


async def test_too_many_values_are_refused_before_the_body_is_parsed(service: Service) -> None:
    # 200,000 one-character messages in 6.6 MB: the memory attack, now refused from its bytes
    body = b'{"model":"gpt-4o","messages":[' + b",".join([b'{"role":"user","content":"a"}'] * 200_000) + b"]}"
    assert len(body) < 8 * 1024 * 1024
    openai = await service.http.post(OPENAI, content=body, headers=JSON)
    assert openai.status_code == 413 and openai.json()["error"]["code"] == "too_many_parts"
    anthropic = await service.http.post(ANTHROPIC, content=body, headers=JSON)
    assert (anthropic.status_code, anthropic.json()["error"]["type"]) == (413, "request_too_large")
    bots = await service.http.post("/api/v2/bots", content=b'{"name": "b", "x": [' + b"0," * MAX_PARTS + b"0]}")
    assert (bots.status_code, bots.json()["error"]["code"]) == (413, "TOO_MANY_PARTS")
    assert bots.json()["error"]["params"] == {"limit": MAX_PARTS}
    assert await _audits(service) == 0
    assert (await service.http.get("/api/v2/bots")).json()["bots"] == []


# -- point 8: deep JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 1_000, 100_000])
async def test_deep_json_in_an_extra_field_is_a_400_on_both_endpoints(service: Service, levels: int) -> None:
    raw_deep = b'{"d":' * levels + b"1" + b"}" * levels
    messages = b'[{"role": "user", "content": "hi"}]'
    openai_body = b'{"model": "gpt-4o", "messages": ' + messages + b', "extra": ' + raw_deep + b"}"
    openai = await service.http.post(OPENAI, content=openai_body, headers=JSON)
    assert openai.status_code == 400
    assert openai.json() == {
        "error": {
            "type": "invalid_request_error",
            "code": "json_too_deep",
            "param": None,
            "message": f"The request nests arrays and objects more than {MAX_NESTING} levels deep.",
        }
    }
    anthropic_body = b'{"model": "m", "max_tokens": 5, "messages": ' + messages + b', "metadata": ' + raw_deep + b"}"
    anthropic = await service.http.post(ANTHROPIC, content=anthropic_body, headers=JSON)
    assert anthropic.status_code == 400
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert "levels deep" in anthropic.json()["error"]["message"]
    v2 = await service.http.post("/api/v2/bots", content=b'{"name": "b", "meta": ' + raw_deep + b"}", headers=JSON)
    assert (v2.status_code, v2.json()["error"]["code"]) == (400, "JSON_TOO_DEEP")
    assert await _audits(service) == 0


# -- point 2: text that cannot be stored ------------------------------------------------------------------


LONE = "a\\ud800b"


def _with(template: str, text: str = LONE) -> bytes:
    return template.replace("TEXT", text).encode()


async def test_text_that_cannot_be_stored_is_refused_on_every_route_and_nothing_changes(service: Service) -> None:
    ids = await service.setup_chat()
    chat = ids["chat"]
    before = (await service.http.get(f"/api/v2/chats/{chat}/messages")).json()
    bots_before = (await service.http.get("/api/v2/bots")).json()
    cases = [
        ("POST", "/api/v2/bots", '{"name": "TEXT"}'),
        ("PATCH", f"/api/v2/bots/{ids['bot']}", '{"system_prompt": "TEXT"}'),
        ("POST", f"/api/v2/chats/{chat}/messages", '{"role": "user", "content": "TEXT"}'),
        ("POST", f"/api/v2/chats/{chat}/generate", '{"content": "TEXT"}'),
        ("POST", "/api/v2/tokens", '{"name": "TEXT"}'),
        ("POST", "/session", '{"token": "TEXT"}'),
    ]
    for text in (LONE, "a\\u0000b", "\\udc00"):
        for method, path, template in cases:
            response = await service.http.request(method, path, content=_with(template, text), headers=JSON)
            assert response.status_code == 400, (path, text, response.text)
            assert response.json()["error"]["code"] == "TEXT_NOT_STORABLE", (path, text)
        for template in (
            '{"model": "TEXT", "messages": [{"role": "user", "content": "hi"}]}',
            '{"model": "gpt-4o", "messages": [{"role": "user", "content": "TEXT"}]}',
            '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "contextshift": {"chat_id": "TEXT"}}',
        ):
            openai = await service.http.post(OPENAI, content=_with(template, text), headers=JSON)
            assert (openai.status_code, openai.json()["error"]["code"]) == (400, "text_not_storable"), openai.text
            anthropic_body = _with(template.replace('"messages"', '"max_tokens": 5, "messages"'), text)
            anthropic = await service.http.post(ANTHROPIC, content=anthropic_body, headers=JSON)
            assert anthropic.status_code == 400
            assert anthropic.json()["error"]["type"] == "invalid_request_error"
            assert "cannot be stored" in anthropic.json()["error"]["message"]
    assert (await service.http.get(f"/api/v2/chats/{chat}/messages")).json() == before
    assert (await service.http.get("/api/v2/bots")).json() == bots_before
    assert await _audits(service) == 0 and service.fake.requests == []
    # a surrogate pair is ordinary text
    fine = await service.http.post("/api/v2/bots", content=_with('{"name": "TEXT"}', "\\ud83d\\ude00"), headers=JSON)
    assert (fine.status_code, fine.json()["bot"]["name"]) == (201, "\U0001f600")


async def test_a_chat_holding_a_lone_surrogate_from_an_older_version_stays_readable(service: Service) -> None:
    if service.backend.name != "sqlite":
        pytest.skip("PostgreSQL never stored one: its text and jsonb refuse lone surrogates")
    ids = await service.setup_chat()
    posted = await service.http.post(f"/api/v2/chats/{ids['chat']}/messages", json={"role": "user", "content": "x"})
    message_id = posted.json()["message"]["id"]
    # what a version before N6 stored: the JSON text of a lone surrogate (json.dumps escapes it)
    path = make_url(service.backend.url).database
    assert path is not None
    with sqlite3.connect(path) as connection:
        stored = json.dumps("a\ud800b \ud83d\ude00")
        connection.execute(
            "UPDATE messages SET content = ?, meta = ? WHERE id = ?", (stored, '{"k": "\\udc00"}', message_id)
        )
    listed = await service.http.get(f"/api/v2/chats/{ids['chat']}/messages")
    assert listed.status_code == 200, listed.text
    [message] = listed.json()["messages"]
    assert (message["content"], message["meta"]) == ("a\ufffdb \U0001f600", {"k": "\ufffd"})
    # and its search and a patch of another field still answer
    pinned = await service.http.patch(f"/api/v2/chats/{ids['chat']}/messages/{message_id}", json={"pinned": True})
    assert (pinned.status_code, pinned.json()["message"]["content"]) == (200, "a\ufffdb \U0001f600")


async def test_a_caller_who_is_not_signed_in_gets_401_before_the_body_is_checked(service: Service) -> None:
    deep = b'{"model": "gpt-4o", "extra": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    async with service.client() as anonymous:
        for path in (OPENAI, ANTHROPIC, "/api/v2/bots"):
            response = await anonymous.post(path, content=deep, headers=JSON)
            assert response.status_code == 401, (path, response.text)
