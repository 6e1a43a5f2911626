"""Full-text search over a chat's messages (G4a), through the index migration 0007 made.

SQLite searches the FTS5 table ``messages_fts`` (BM25 order), PostgreSQL the GIN-indexed ``english``
tsvector column ``search_vector`` (``ts_rank`` order). Only messages no compaction summary covers, older
than a given ``seq``, come back: the ``recall`` strategy's candidates from history beyond the recent
window. Words are matched after the database's own stemming (Porter on SQLite, Snowball on PostgreSQL);
any one of them matches. By default a word more than ``COMMON_WORD`` of the chat's messages hold is left out
first (each count stops there); ``every_word`` (what ``recall`` asks for) keeps them all, and the library's
own stems are searched too, so every message holding a word of the input in the library's analysis comes
back (up to the limit).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from ...core.search_keys import search_keys
from ..tables import ChatRow, MessageRow

#: The tables, triggers, column and index the search uses (not in ``tables.py``: the schema diff skips them).
SEARCH_OBJECTS = ("messages_fts", "ix_messages_search", "search_vector", "messages_trigram", "ix_messages_trigram")
MAX_WORDS = 12
#: A word more than this many of the chat's messages hold says little about which ones to recall; it is
#: left out of the search, so a search reads at most about ``MAX_WORDS`` × this many index entries however
#: long the chat is.
COMMON_WORD = 500
#: On SQLite a stem is searched as a prefix of its first ``len - PREFIX`` letters, at least ``PREFIX``: on
#: LoCoMo's 4,253 words, every word with a given Snowball stem is then found (a shorter cut misses some).
PREFIX = 3
_WORD = re.compile(r"[^\W_]+")
_CHAT_ID = re.compile(r"[A-Za-z0-9]+")


def is_search_object(name: str | None) -> bool:
    """Whether a schema object belongs to the full-text search (FTS5 shadow tables included)."""
    return bool(name) and any(str(name).startswith(prefix) for prefix in SEARCH_OBJECTS)


def _words(words: Sequence[str], most: int | None = MAX_WORDS) -> list[str]:
    out: list[str] = []
    for word in words:
        for piece in _WORD.findall(word.lower()):
            if piece not in out:
                out.append(piece)
    return out[:most]


async def search_message_ids(
    session: AsyncSession,
    chat_id: str,
    words: Sequence[str],
    *,
    before_seq: int,
    limit: int,
    every_word: bool = False,
    stems: Sequence[str] = (),
) -> list[str]:
    """Ids of the chat's best-matching messages older than ``before_seq``, best first (at most ``limit``).

    ``every_word``: every one of ``words`` is searched (not only the first ``MAX_WORDS``, and a common one
    is not left out), so every message holding one of them comes back while at most ``limit`` do.
    ``stems`` (the library's own stems of the words, ``core.recall.query_words``): a word of another form
    with the same stem is found too, though the index stems it otherwise (SQLite's Porter leaves
    "enjoyable" whole where Snowball gives "enjoy"): on SQLite each stem's beginning (``_prefix``) is
    searched as a prefix, on PostgreSQL (whose index holds Snowball stems) each stem.
    """
    terms = _words(words, None if every_word else MAX_WORDS)
    if not terms or limit <= 0:
        return []
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite" and not _CHAT_ID.fullmatch(chat_id):
        return []
    if dialect not in ("sqlite", "postgresql"):
        return []
    params = {"chat": chat_id, "before": before_seq}
    distinctive = terms if every_word else await _distinctive(session, dialect, chat_id, terms, params)
    if not distinctive:
        return []
    if dialect == "sqlite":
        statement = text(
            "SELECT m.id FROM messages_fts JOIN messages AS m ON m.rowid = messages_fts.rowid "
            "WHERE messages_fts MATCH :match AND m.chat_id = :chat AND m.summary_id IS NULL AND m.seq < :before "
            "ORDER BY bm25(messages_fts), m.seq DESC LIMIT :limit"
        )
        prefixes = sorted({f'"{_prefix(s)}"*' for s in _words(stems, None)})
        match = _fts_match(chat_id, [f'"{t}"' for t in distinctive] + prefixes)
        rows = await session.execute(statement, {**params, "match": match, "limit": limit})
    else:
        found = " | ".join(f"{s}:*" for s in _words(stems, None))
        query = (
            "(to_tsquery('english', :query) || to_tsquery('simple', :stems))"
            if found
            else "to_tsquery('english', :query)"
        )
        statement = text(
            "SELECT id FROM messages WHERE chat_id = :chat AND summary_id IS NULL AND seq < :before "
            f"AND search_vector @@ {query} ORDER BY ts_rank(search_vector, {query}) DESC, seq DESC LIMIT :limit"
        )
        extra = {"stems": found} if found else {}
        rows = await session.execute(statement, {**params, "query": " | ".join(distinctive), **extra, "limit": limit})
    return [str(r[0]) for r in rows]


async def _distinctive(
    session: AsyncSession, dialect: str, chat_id: str, terms: list[str], params: dict[str, object]
) -> list[str]:
    """The terms at most ``COMMON_WORD`` of the chat's messages hold (and at least one)."""
    # How many messages hold each word, every count stopping at COMMON_WORD + 1 rows: one statement, one
    # column a word, so a turn makes one round trip for them, not one a word.
    counts: list[str] = []
    match: dict[str, object] = {"cap": COMMON_WORD + 1}
    for k, term in enumerate(terms):
        if dialect == "sqlite":  # the whole chat's messages, from the index alone
            counts.append(
                f"(SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH :m{k} LIMIT :cap))"
            )
            match[f"m{k}"] = _fts_match(chat_id, [f'"{term}"'])
        else:
            counts.append(
                f"(SELECT count(*) FROM (SELECT 1 FROM messages WHERE chat_id = :chat AND summary_id IS NULL "
                f"AND seq < :before AND search_vector @@ to_tsquery('english', :m{k}) LIMIT :cap) AS hits{k})"
            )
            match[f"m{k}"] = term
    row = (await session.execute(text("SELECT " + ", ".join(counts)), {**params, **match})).one()
    return [term for term, hits in zip(terms, row, strict=True) if 0 < int(hits) <= COMMON_WORD]


def _prefix(stem: str) -> str:
    """What a stem is searched as on SQLite: its first ``len - PREFIX`` letters, at least ``PREFIX``; a stem
    of at most ``PREFIX`` letters, its first two (Porter makes "ad" of "added", whose Snowball stem is
    "add")."""
    return stem[: max(PREFIX, len(stem) - PREFIX)] if len(stem) > PREFIX else stem[:2]


def _fts_match(chat_id: str, terms: Sequence[str]) -> str:
    """An FTS5 query: the chat's messages whose body holds one of ``terms`` (quoted, a prefix with ``*``)."""
    return f'chat_id : "{chat_id}" AND body : (' + " OR ".join(terms) + ")"


def _tool_like(row: MessageRow) -> bool:
    if row.role == "tool" or row.tool_calls:
        return True
    content = row.content
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result") for p in content
    )


async def search_history(
    session: AsyncSession,
    chat_id: str,
    words: Sequence[str],
    *,
    before_seq: int,
    limit: int,
    neighbours: int = 8,
    beside: int = 0,
    every_word: bool = False,
    stems: Sequence[str] = (),
) -> tuple[list[MessageRow], list[str]]:
    """The best-matching messages older than ``before_seq`` with the messages around each tool call or
    result (``neighbours`` either side, so its whole tool group can be found) and around each other one
    (``beside`` either side: the turn it answers, the one answering it), oldest first; and the ids of the
    matching ones, best first. ``every_word`` and ``stems``: see :func:`search_message_ids`."""
    ids = await search_message_ids(
        session, chat_id, words, before_seq=before_seq, limit=limit, every_word=every_word, stems=stems
    )
    if not ids:
        return [], []
    found = list(await session.scalars(select(MessageRow).where(MessageRow.id.in_(ids))))
    spans: list[tuple[int, int]] = []
    for row in sorted(found, key=lambda r: r.seq):
        reach = neighbours if _tool_like(row) else beside
        if reach > 0:
            low, high = row.seq - reach, min(row.seq + reach, before_seq - 1)
            if spans and low <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], max(spans[-1][1], high))
            else:
                spans.append((low, high))
    rows = {r.id: r for r in found}
    if spans:
        nearby = select(MessageRow).where(
            MessageRow.chat_id == chat_id,
            MessageRow.summary_id.is_(None),
            or_(*[MessageRow.seq.between(low, high) for low, high in spans]),
        )
        for row in await session.scalars(nearby):
            rows.setdefault(row.id, row)
    return sorted(rows.values(), key=lambda r: r.seq), ids


#: The words of a date (``core.recall``'s pattern: "8 May 2023", "May 8, 2023"), as the index finds them.
MONTH_WORDS = (
    "jan",
    "january",
    "feb",
    "february",
    "mar",
    "march",
    "apr",
    "april",
    "may",
    "jun",
    "june",
    "jul",
    "july",
    "aug",
    "august",
    "sep",
    "sept",
    "september",
    "oct",
    "october",
    "nov",
    "november",
    "dec",
    "december",
)


async def month_rows(
    session: AsyncSession, chat_id: str, *, from_seq: int, before_seq: int, limit: int
) -> list[MessageRow]:
    """The chat's messages from ``from_seq`` to before ``before_seq`` (no compaction summary covers them)
    that name a month, newest first (at most ``limit``): where a date can be (the caller reads it)."""
    dialect = session.get_bind().dialect.name
    if limit <= 0 or dialect not in ("sqlite", "postgresql") or not _CHAT_ID.fullmatch(chat_id):
        return []
    params: dict[str, object] = {"chat": chat_id, "low": from_seq, "before": before_seq, "limit": limit}
    if dialect == "sqlite":
        statement = (
            "SELECT m.id FROM messages_fts JOIN messages AS m ON m.rowid = messages_fts.rowid "
            "WHERE messages_fts MATCH :match AND m.chat_id = :chat AND m.summary_id IS NULL "
            "AND m.seq >= :low AND m.seq < :before ORDER BY m.seq DESC LIMIT :limit"
        )
        params["match"] = _fts_match(chat_id, [f'"{w}"' for w in MONTH_WORDS])
    else:
        statement = (
            "SELECT id FROM messages WHERE chat_id = :chat AND summary_id IS NULL AND seq >= :low "
            "AND seq < :before AND search_vector @@ to_tsquery('english', :query) ORDER BY seq DESC LIMIT :limit"
        )
        params["query"] = " | ".join(MONTH_WORDS)
    ids = [str(r[0]) for r in await session.execute(text(statement), params)]
    if not ids:
        return []
    found = await session.scalars(select(MessageRow).where(MessageRow.id.in_(ids)))
    return sorted(found, key=lambda r: r.seq, reverse=True)


#: At most this many matching messages are read to find the chats a search hits (the newest match each).
CHAT_SEARCH_SCAN = 500
#: A key this long or longer is matched through the SQLite trigram index; a shorter one by ``LIKE``.
TRIGRAM = 3
#: The message's text on PostgreSQL, exactly as migration 0022's trigram index reads it.
_PG_TEXT = "(coalesce(content #>> '{}', '') || ' ' || coalesce(tool_calls::text, ''))"


def _like(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _substring_ids(dialect: str, keys: Sequence[str]) -> tuple[str, dict[str, object]]:
    """A statement giving the ids of the newest messages holding every key as a substring (case-folded)."""
    params: dict[str, object] = {"scan": CHAT_SEARCH_SCAN}
    if dialect == "sqlite":
        conditions: list[str] = []
        long = [k for k in keys if len(k) >= TRIGRAM]
        if long:  # through the trigram index: each quoted key is a substring match
            conditions.append("messages_trigram MATCH :match")
            params["match"] = " AND ".join('"' + k.replace('"', '""') + '"' for k in long)
        for n, key in enumerate(k for k in keys if len(k) < TRIGRAM):
            conditions.append(f"t.body LIKE :like{n} ESCAPE '\\'")
            params[f"like{n}"] = _like(key)
        return (
            "SELECT m.id FROM messages_trigram AS t JOIN messages AS m ON m.rowid = t.rowid "
            f"WHERE {' AND '.join(conditions)} ORDER BY m.created_at DESC LIMIT :scan",
            params,
        )
    conditions = []
    for n, key in enumerate(keys):
        conditions.append(f"{_PG_TEXT} ILIKE :like{n} ESCAPE '\\'")
        params[f"like{n}"] = _like(key)
    return f"SELECT id FROM messages WHERE {' AND '.join(conditions)} ORDER BY created_at DESC LIMIT :scan", params


async def search_chats(
    session: AsyncSession, query: str, *, owner_id: str | None, limit: int
) -> list[tuple[str, MessageRow | None]]:
    """Chats whose title holds ``query`` or one of whose messages holds all its words, most recently updated
    first: ``(chat id, the newest matching message or None for a title hit)``. ``owner_id`` limits it to one
    user's chats. Titles match by substring; messages hold each word's key (``core.search_keys``: its stem
    where a stemmer knows its script, else the word) as a case-folded substring, so CJK words inside a
    sentence, other word forms and emoji are found, through migration 0022's trigram index."""
    keys = search_keys(query)
    needle = query.strip().lower()
    if not needle:
        return []
    owned = [ChatRow.owner_id == owner_id] if owner_id is not None else []
    titled = select(ChatRow.id).where(*owned, func.lower(ChatRow.title).contains(needle, autoescape=True))
    hits: dict[str, MessageRow | None] = {str(i): None for i in await session.scalars(titled.limit(limit))}
    dialect = session.get_bind().dialect.name
    if keys and dialect in ("sqlite", "postgresql"):
        statement, params = _substring_ids(dialect, keys)
        found = [str(r[0]) for r in await session.execute(text(statement), params)]
        if found:
            rows = (
                select(MessageRow)
                .join(ChatRow, ChatRow.id == MessageRow.chat_id)
                .where(*owned, MessageRow.id.in_(found))
            )
            for row in sorted(await session.scalars(rows), key=lambda r: r.seq, reverse=True):
                hits.setdefault(row.chat_id, row)  # a title hit stays a title hit; else the newest message
    if not hits:
        return []
    order = select(ChatRow.id).where(ChatRow.id.in_(list(hits))).order_by(ChatRow.updated_at.desc(), ChatRow.id)
    return [(str(i), hits[str(i)]) for i in (await session.scalars(order.limit(limit)))]


__all__ = [
    "CHAT_SEARCH_SCAN",
    "COMMON_WORD",
    "MAX_WORDS",
    "MONTH_WORDS",
    "SEARCH_OBJECTS",
    "is_search_object",
    "month_rows",
    "search_chats",
    "search_history",
    "search_message_ids",
]
