"""The export and import formats (issue 27), without a database: Markdown as written, and any text either
imports or is refused with one of the import codes (never another exception)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextshift.service.errors import ServiceError
from contextshift.service.transfer import export_document, export_markdown, parse_import

#: Keys and values of the formats read, so that the generated documents reach past the first checks.
KEYS = [
    "mapping",
    "chat",
    "mes",
    "format",
    "version",
    "messages",
    "summaries",
    "current_node",
    "history",
    "role",
    "content",
    "author",
    "parts",
    "parent",
    "parentId",
    "currentId",
    "covers",
    "workspaces",
    "swipes",
    "id",
]
LEAVES = ["contextshift.chat", 1, "user", "assistant", "a", "b"]
CODES = {"IMPORT_NOT_READABLE", "IMPORT_FORMAT_UNKNOWN", "IMPORT_INVALID", "IMPORT_EMPTY", "TEXT_NOT_STORABLE"}


def _message(n: int, role: str, content: object, **more: object) -> dict[str, object]:
    return {"id": f"m{n}", "seq": n, "role": role, "content": content, "meta": {}, **more}


def test_markdown_shows_each_message_under_its_role_with_its_marks() -> None:
    document = export_document(
        {"title": "Trip", "type": "chat"},
        [
            _message(1, "user", "Plan it", pinned=True),
            _message(2, "assistant", [{"type": "text", "text": "Sure"}], alternatives=[{}, {}], alternative=1),
            _message(3, "user", "", meta={"manualExcluded": True}, summary_id="s1"),
        ],
        [{"id": "s1", "content": "They planned.", "covers": ["m3"]}],
        "2026-12-06T00:00:00+00:00",
    )
    assert export_markdown(document) == (
        "# Trip\n\nExported from contextshift on 2026-12-06T00:00:00+00:00.\n\n"
        "## User · #1 (pinned)\n\nPlan it\n\n"
        "## Assistant · #2 (version 2 of 2)\n\nSure\n\n"
        "## User · #3 (excluded, summarized)\n\n_(no text)_\n\n"
        "## Summaries\n\n### Summary of 1 messages\n\nThey planned.\n"
    )
    assert [m["excluded"] for m in document["messages"]] == [False, False, True]


def test_a_conversation_without_current_node_follows_its_newest_leaf() -> None:
    mapping = {
        "a": {"parent": None, "children": ["b"], "message": {"author": {"role": "user"}, "content": {"parts": ["Hi"]}}},
        "b": {
            "parent": "a",
            "children": [],
            "message": {"author": {"role": "assistant"}, "content": {"parts": ["Yo"]}},
        },
    }
    (chat,) = parse_import(json.dumps({"title": "Old", "mapping": mapping}))
    assert [(m["role"], m["content"]) for m in chat.messages] == [("user", "Hi"), ("assistant", "Yo")]


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.sampled_from(LEAVES),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "mapping",
                            "chat",
                            "mes",
                            "format",
                            "messages",
                            "current_node",
                            "history",
                            "role",
                            "content",
                            "x",
                        ]
                    ),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=20,
        ).map(json.dumps),
    )
)
def test_any_text_imports_or_is_refused_with_an_import_code(text: str) -> None:
    try:
        chats = parse_import(text)
    except ServiceError as error:
        assert error.code in CODES
    else:
        assert chats and all(chat.messages for chat in chats)


OURS = {"format": "contextshift.chat", "version": 1, "chat": {}}


@pytest.mark.parametrize(
    ("document", "code"),
    [
        (
            {"mapping": {"a": {"parent": None, "message": {"author": ["x"], "content": {"parts": ["hi"]}}}}},
            "IMPORT_EMPTY",
        ),
        (
            {
                **OURS,
                "messages": [{"role": "user", "content": "x", "id": "a"}],
                "summaries": [{"content": "c", "covers": ["a"], "workspaces": 5}],
            },
            "IMPORT_INVALID",
        ),
        ({**OURS, "messages": [{"role": "user", "content": "x", "summary_id": ["s"]}]}, "IMPORT_INVALID"),
        ({**OURS, "chat": "x", "messages": []}, "IMPORT_INVALID"),
        (
            {**OURS, "messages": [{"role": "user", "content": "x", "alternatives": [{}], "alternative": 3}]},
            "IMPORT_INVALID",
        ),
        ({"mes": "x", "swipes": ["a", 5], "swipe_id": 0}, "IMPORT_INVALID"),
        (
            {**OURS, "messages": [{"role": "user", "content": "x", "alternatives": [5], "alternative": 0}]},
            "IMPORT_INVALID",
        ),
        (
            {
                **OURS,
                "messages": [{"role": "user", "id": "a"}],
                "summaries": [{"content": "c", "covers": ["a"], "model": 7}],
            },
            "IMPORT_INVALID",
        ),
    ],
)
def test_wrong_parts_of_known_formats_are_refused_with_a_code(document: dict[str, object], code: str) -> None:
    with pytest.raises(ServiceError) as refused:
        parse_import(json.dumps(document))
    assert refused.value.code == code
