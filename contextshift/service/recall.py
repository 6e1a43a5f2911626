"""History for the ``recall`` strategy beyond the recent window (G4a), found with the database's index.

A turn loads only the recent window. When the bot's strategy is ``recall`` and older history exists:

* at most ``FULL_HISTORY`` older messages: all of them are handed to the pipeline as the oldest part of the
  history, so the strategy sees what the library's ``shift_with_strategy`` sees on the same chat and gives
  the same prompt;
* more: the words of the current input are searched in the chat's full-text index (SQLite FTS5 /
  PostgreSQL tsvector) and the older messages that match, each with its whole tool group and the turns
  beside it (the one it answers, the one answering it), are handed over instead. For a question about
  time, so is the turn with a date nearest before each match (the library brings it beside a match it
  recalls).

The candidates are a superset of what the library can recall: every older message that holds a word of
the input *in the library's own analysis* (its Snowball stems: the index is also searched for each stem's
beginning, since SQLite's Porter stems some forms apart, and no word is left out for being common), up to
``CANDIDATES`` of them; the library's scoring then decides. On LoCoMo's five development conversations at
1/10, every message the library keeps was among them (756 of 756 questions; 563 before, the index's best
128 in Porter's analysis). The prompt itself still differs from the library's on some inputs (147 of 756):
BM25 weighs a word by how many of the *whole* history's sentences hold it and by their mean length, and
the library counts the sentences it is handed. Past ``CANDIDATES`` matching messages the index's best
ones are handed over; the library could then keep one it did not see.

The strategy then shifts them out like any old history and brings back what is relevant, so a turn on a
100k-message chat reads the messages that match the input, not the chat.
"""

from __future__ import annotations

from bisect import bisect_right

from ..core.messages import Message
from ..core.recall import (  # the library's own patterns: the service must find what it finds
    DATE,
    DATE_LOOKBACK,
    TEMPORAL,
    query_words,
    search_words,
    whole_groups,
)
from ..storage import Repositories, row_to_message
from ..storage.repositories.search import month_rows, search_history
from ..storage.tables import MessageRow
from .history import is_command

RECALL = "recall"
#: At most this many matching messages are candidates (every one while no more match; past that the index's
#: best): see the module docstring.
CANDIDATES = 2000
#: With embeddings: how many messages just before the window are candidates by meaning (each embedded once
#: per process, then cached).
MEANING_CANDIDATES = 128
MANUAL_EXCLUDED = "manualExcluded"
#: The turns either side of a matching one that come with it (what it answers, what answers it).
BESIDE = 1
#: A chat with at most this many messages before the window hands them all to the strategy.
FULL_HISTORY = 1000


async def recall_candidates(
    repos: Repositories,
    chat_id: str,
    window: list[MessageRow],
    draft: str | None,
    *,
    by_meaning: bool = False,
    full_history: int = FULL_HISTORY,
) -> list[MessageRow]:
    """Older rows (before the window) that match the current input, in whole tool groups; oldest first.

    All of them (in whole tool groups) when there are at most ``full_history``: see the module docstring.

    ``by_meaning`` (an embedder is configured): the ``MEANING_CANDIDATES`` rows just before the window come
    too, whatever their words, so the strategy can find what the input asks in other words among them. The
    index cannot search by meaning, so that look-back is bounded; further back, recall finds words only.
    """
    if not window:
        return []
    query = draft
    if query is None:
        last = window[-1]
        query = row_to_message(last).text if last.role == "user" else ""
    words = search_words(query or "")
    if not words and not (by_meaning and (query or "").strip()):
        return []
    oldest = min(r.seq for r in window if not r.pinned) if any(not r.pinned for r in window) else window[0].seq
    loaded = {r.id for r in window}
    if full_history > 0:
        page = await repos.messages.list_page(chat_id, before_seq=oldest, limit=full_history)
        if not page.has_more:
            every = [r for r in reversed(page.rows) if r.summary_id is None]
            return _usable(every, {r.id for r in every}, loaded)
    rows, matching = await search_history(
        repos.session,
        chat_id,
        words,
        before_seq=oldest,
        limit=CANDIDATES,
        beside=BESIDE,
        every_word=True,
        stems=query_words(query or ""),
    )
    hits = {r.seq for r in rows if r.id in set(matching)}
    matching = [*matching, *(r.id for r in rows if any(r.seq + d in hits for d in range(-BESIDE, BESIDE + 1)))]
    if hits and TEMPORAL.search(query or ""):
        dated = await _dated_before(repos, chat_id, hits, oldest)
        seen = {r.id for r in rows}
        rows = sorted([*rows, *(r for r in dated if r.id not in seen)], key=lambda r: r.seq)
        matching = [*matching, *(r.id for r in dated)]
    if by_meaning:
        page = await repos.messages.list_page(chat_id, before_seq=oldest, limit=MEANING_CANDIDATES)
        near = [r for r in page.rows if r.summary_id is None]
        seen = {r.id for r in rows}
        rows = sorted([*rows, *(r for r in near if r.id not in seen)], key=lambda r: r.seq)
        matching = [*matching, *(r.id for r in near)]
    return _usable(rows, set(matching), loaded)


async def _dated_before(repos: Repositories, chat_id: str, hits: set[int], before_seq: int) -> list[MessageRow]:
    """For a question about time: the turn with a date nearest before (or at) each hit, at most
    ``DATE_LOOKBACK`` back, the turn the library brings beside a hit it recalls."""
    low = min(hits) - DATE_LOOKBACK
    named = await month_rows(repos.session, chat_id, from_seq=low, before_seq=before_seq, limit=CANDIDATES)
    dated = sorted((r for r in named if DATE.search(row_to_message(r).text)), key=lambda r: r.seq)
    seqs = [r.seq for r in dated]
    out: dict[str, MessageRow] = {}
    for hit in hits:
        at = bisect_right(seqs, hit) - 1
        if at >= 0 and seqs[at] < hit and hit - seqs[at] < DATE_LOOKBACK:
            out[dated[at].id] = dated[at]
    return list(out.values())


def _usable(rows: list[MessageRow], wanted: set[str], loaded: set[str]) -> list[MessageRow]:
    """The rows not loaded already, no command or manually excluded one, in the complete tool groups that
    hold a ``wanted`` row; oldest first."""
    rows = [r for r in rows if r.id not in loaded and not is_command(r) and not (r.meta or {}).get(MANUAL_EXCLUDED)]
    if not rows:
        return []
    messages: list[Message] = [row_to_message(r) for r in rows]
    complete = {m.id for m in whole_groups(messages, wanted)}
    return [r for r in rows if r.id in complete]
