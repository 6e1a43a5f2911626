"""History for the ``recall`` strategy beyond the recent window (G4a), found with the database's index.

A turn loads only the recent window. When the bot's strategy is ``recall`` and older history exists:

* at most ``FULL_HISTORY`` older messages: all of them are handed to the pipeline as the oldest part of the
  history, so the strategy sees what the library's ``shift_with_strategy`` sees on the same chat and gives
  the same prompt (BM25 weighs a word by how many of the history's sentences hold it: a sample of the
  history would weigh it differently);
* more: the words of the current input are searched in the chat's full-text index (SQLite FTS5 /
  PostgreSQL tsvector), and the best-matching older messages, each with its whole tool group and the turns
  beside it (the one it answers, the one answering it), are handed over instead.

The strategy then shifts them out like any old history and brings back what is relevant, so a turn on a
100k-message chat reads a bounded number of rows, as on a 100-message one.
"""

from __future__ import annotations

from ..core.messages import Message
from ..core.recall import search_words, whole_groups
from ..storage import Repositories, row_to_message
from ..storage.repositories.search import search_history
from ..storage.tables import MessageRow
from .history import is_command

RECALL = "recall"
#: How many matching messages the index is asked for.
CANDIDATES = 128
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
        repos.session, chat_id, words, before_seq=oldest, limit=CANDIDATES, beside=BESIDE
    )
    hits = {r.seq for r in rows if r.id in set(matching)}
    matching = [*matching, *(r.id for r in rows if any(r.seq + d in hits for d in range(-BESIDE, BESIDE + 1)))]
    if by_meaning:
        page = await repos.messages.list_page(chat_id, before_seq=oldest, limit=MEANING_CANDIDATES)
        near = [r for r in page.rows if r.summary_id is None]
        seen = {r.id for r in rows}
        rows = sorted([*rows, *(r for r in near if r.id not in seen)], key=lambda r: r.seq)
        matching = [*matching, *(r.id for r in near)]
    return _usable(rows, set(matching), loaded)


def _usable(rows: list[MessageRow], wanted: set[str], loaded: set[str]) -> list[MessageRow]:
    """The rows not loaded already, no command or manually excluded one, in the complete tool groups that
    hold a ``wanted`` row; oldest first."""
    rows = [r for r in rows if r.id not in loaded and not is_command(r) and not (r.meta or {}).get(MANUAL_EXCLUDED)]
    if not rows:
        return []
    messages: list[Message] = [row_to_message(r) for r in rows]
    complete = {m.id for m in whole_groups(messages, wanted)}
    return [r for r in rows if r.id in complete]
