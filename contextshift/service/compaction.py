"""Compaction runs (C2, C6, C8-C12): triggers, the lease, passes, validation, commit and the log.

A run holds the chat's lease (one run per chat, across processes), then makes passes: select the oldest
whole exchanges that fit the summarizer, ask the summarizer, validate the reply (empty, cut off, or not
smaller is rejected), and commit the summary only if the history did not change meanwhile. A failed or
rejected pass leaves every message as it was and arms the cooldown of automatic runs. Each run writes one
log entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from ..core.compaction import (
    FAILURE_COOLDOWN_SECONDS,
    MAX_BACKGROUND_PASSES,
    OVER_SYNC_REACH,
    CompactionSettings,
    accept_summary,
    compactable_tokens,
    cooldown_active,
    decide,
    input_budget,
    sync_reach,
)
from ..core.messages import Message
from ..core.tokens import TokenizerProfile
from ..core.vocabulary import COMPACTION_OUTCOMES, COMPLETED, FAILED, RUNNING, SKIPPED, CompactionOutcome
from ..providers import ProviderClient, ProviderError, make_client
from ..storage import Database, Repositories
from ..storage.repositories import token_counts
from ..storage.tables import BotRow, ChatRow, CompactionLogRow, MessageRow
from ..storage.types import new_id, utcnow
from .calibration import counting_for
from .calls import Calls, CallTarget, SharedClient
from .compaction_call import FoldCall, PassResult
from .history import is_command, merge
from .rules import NO_RULES, Rules
from .summarizer import CompactionUnavailable, Summarizer, resolve
from .turn import TurnContext, chat_and_bot, profile_for, resolve_model

log = logging.getLogger("contextshift.compaction")

#: Raw messages a pass reads of a long history in one query, oldest first.
HISTORY_PAGE = 500
#: A pass reads the oldest history until its text is this many times the summarizer's input budget.
READ_AHEAD = 2

#: A pass runs at most this many times in a manual run ("as much as possible", but never unbounded).
MAX_MANUAL_PASSES = 20
HISTORY_CHANGED = "COMPACTION_HISTORY_CHANGED"
#: N5: how long a synchronous caller waits for another request's running pass before going on without it.
DEFAULT_SYNC_WAIT_SECONDS = 20.0
REJECTED = {
    "empty": "COMPACTION_SUMMARY_EMPTY",
    "truncated": "COMPACTION_SUMMARY_TRUNCATED",
    "not-smaller": "COMPACTION_SUMMARY_NOT_SMALLER",
    "unfaithful": "COMPACTION_SUMMARY_UNFAITHFUL",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    status: CompactionOutcome
    summary: str | None = None
    message_count: int = 0
    log_id: str | None = None
    error_code: str | None = None
    reason: str | None = None
    passes_committed: int = 0
    passes_failed: int = 0
    #: For the audit's diagnostics, when the turn goes on without the pass it asked for.
    diagnostic: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary,
            "message_count": self.message_count,
            "log_id": self.log_id,
            "error_code": self.error_code,
            "reason": self.reason,
            "passes_committed": self.passes_committed,
            "passes_failed": self.passes_failed,
        }


def settings_of(bot: BotRow) -> CompactionSettings:
    return CompactionSettings(
        enabled=bot.compaction_enabled, threshold=bot.compaction_threshold, ratio=bot.compaction_ratio
    )


def window_of(bot: BotRow, chat_model_window: int | None) -> int | None:
    """C1: the chat model's window (a bot's own context limit, when set, is the tighter bound)."""
    return bot.context_limit or chat_model_window


class Compactor:
    def __init__(
        self,
        db: Database,
        *,
        client_factory: Callable[..., ProviderClient] = make_client,
        client_options: dict[str, Any] | None = None,
        shared_client: SharedClient | None = None,
        rules: Rules = NO_RULES,
        lease: timedelta | None = None,
        cooldown: float = FAILURE_COOLDOWN_SECONDS,
        wait_poll: float = 0.05,
        sync_wait: float | None = None,
        queue: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self.db = db
        #: The summarizer's calls (on the app's shared HTTP connection pool, while it is open).
        self.calls = Calls(client_factory, client_options, shared_client)
        #: What the settings decide for every pass (provider hosts, estimate margin).
        self.rules = rules
        #: The lease is the instance's: its heartbeat renews it, and it expires when the instance dies (N5).
        self.owner = db.instance_id
        self.lease = lease if lease is not None else db.heartbeat.expiry
        self.cooldown = cooldown
        self.wait_poll = wait_poll
        self.sync_wait = sync_wait if sync_wait is not None else DEFAULT_SYNC_WAIT_SECONDS
        #: Queues a background pass of a chat; False when one waits already (the job runner's, given by the
        #: app; None: a library user runs passes itself).
        self.queue = queue

    @property
    def client_factory(self) -> Callable[..., ProviderClient]:
        return self.calls.factory

    @property
    def client_options(self) -> Mapping[str, Any]:
        return self.calls.current_options()

    # -- triggers (C2) ------------------------------------------------------------------------------------

    async def _pressure(self, repos: Repositories, chat: ChatRow, profile: TokenizerProfile, limit: int) -> int:
        """Compactable raw tokens, read newest-first only until ``limit`` is passed (bounded by the window).

        The current turn does not count, so the read widens (a few times at most) until the compactable part
        alone passes ``limit`` or the history ends.
        """
        summaries = await repos.compaction.active_summaries(chat.id)
        reach = limit
        for _ in range(4):
            window = await repos.messages.recent_window(chat.id, profile.name, reach, profile.count, store_counts=False)
            pressure = compactable_tokens(merge([r for r in window.rows if not is_command(r)], summaries), profile)
            if pressure >= limit or not window.has_more:
                return pressure
            reach *= 2
        return pressure

    async def decision(self, chat_id: str, phase: str, context: TurnContext | None = None) -> tuple[str, int | None]:
        """``(action, target)`` for the chat now: ``none``, ``background`` or ``sync``. ``context``: the chat,
        bot and model a turn has read already (:func:`~contextshift.service.turn.read_context`), not read again."""
        async with self.db.session(write=False) as session:  # reads only: no turn at SQLite's write lock
            repos = Repositories(session)
            if context is not None:
                chat, bot, model = context.chat, context.bot, context.model
                if not bot.compaction_enabled:
                    return "none", None
            else:
                stored = await repos.chats.get(chat_id)
                found = await repos.bots.get(stored.bot_id) if stored is not None else None
                if stored is None or found is None or not found.compaction_enabled:
                    return "none", None
                chat, bot = stored, found
                model, _ = await resolve_model(repos, bot, chat)
            window = window_of(bot, model.context_window if model else None)
            settings = settings_of(bot)
            if window is None:
                return "none", None
            if chat.compaction_failed_at is not None and cooldown_active(
                chat.compaction_failed_at.timestamp(), utcnow().timestamp(), self.cooldown
            ):
                return "none", None
            # Enough history to tell whether the highest trigger is reached; never the whole chat.
            profile = profile_for(model)
            ceiling = max(int(window * 0.76), settings.threshold) + 1
            pressure = await self._pressure(repos, chat, profile, ceiling)
            verdict = decide(window, pressure, settings, phase=phase)  # type: ignore[arg-type]
            if verdict.action == "sync":  # read on (still bounded by the window) to tell one too far over
                pressure = await self._pressure(repos, chat, profile, sync_reach(window) + 1)
                verdict = decide(window, pressure, settings, phase=phase)  # type: ignore[arg-type]
        return verdict.action, verdict.target_tokens

    async def before_send(self, chat_id: str, context: TurnContext | None = None) -> Outcome | None:
        """C2: at 75% a synchronous pass runs before the turn is sent (it never fails the turn); a history
        too far over the window for that is compacted in the background instead (``policy.SYNC_REACH_PERCENT``).
        ``context``: what the turn has read of its chat (:meth:`decision`). None: nothing ran, nothing changed.
        """
        action, _target = await self.decision(chat_id, "before_send", context)
        if action == "background":  # after_turn queues the run once this turn is stored, not before it
            return Outcome(
                SKIPPED,
                reason=OVER_SYNC_REACH,
                diagnostic="compaction: the history is more than twice the context window, so it is compacted "
                "in the background; this turn is fitted by shifting",
            )
        if action != "sync":
            return None
        return await self.run(chat_id, "sync")

    async def after_turn(self, chat_id: str) -> bool:
        """C2: at 50% a background pass is scheduled; the reply is never delayed by it."""
        action, _target = await self.decision(chat_id, "after_turn")
        if action != "background":
            return False
        if self.queue is None:  # no job runner: a library user runs passes itself
            return False
        return await self.queue(chat_id)

    # -- a run --------------------------------------------------------------------------------------------

    async def run(self, chat_id: str, trigger: str) -> Outcome:
        """One run of ``background``, ``sync`` or ``manual`` compaction; manual raises when unavailable."""
        async with self.db.session() as session:
            repos = Repositories(session)
            chat, bot = await chat_and_bot(repos, chat_id)
            try:
                summarizer = await resolve(repos, bot, self.rules.provider_hosts)
            except CompactionUnavailable:
                if trigger == "manual":
                    raise
                return Outcome(SKIPPED, reason="model-unavailable")
            chat_model, _ = await resolve_model(repos, bot, chat)
            failed_at = chat.compaction_failed_at
            if (
                trigger != "manual"
                and failed_at is not None
                and cooldown_active(failed_at.timestamp(), utcnow().timestamp(), self.cooldown)
            ):
                return Outcome(SKIPPED, reason="cooldown")
            acquired = await repos.compaction.acquire_lease(chat_id, self.owner, self.lease)
        if not acquired:
            if trigger == "background":
                return Outcome(SKIPPED, reason=RUNNING)
            return await self._wait_for_running(chat_id)
        try:
            chat_window = window_of(bot, chat_model.context_window if chat_model else None)
            return await self._passes(chat_id, bot, summarizer, profile_for(chat_model), trigger, chat_window)
        finally:
            async with self.db.session() as session:
                await Repositories(session).compaction.release_lease(chat_id, self.owner)

    async def _wait_for_running(self, chat_id: str) -> Outcome:
        """C10: a synchronous caller waits for the running pass and uses its result; N5: for ``sync_wait``
        seconds at most, then it goes on without (the lease of a dead instance expires on its own)."""
        deadline = time.monotonic() + self.sync_wait
        while True:
            async with self.db.session(write=False) as session:
                repos = Repositories(session)
                if not await repos.compaction.lease_busy(chat_id):
                    last = await repos.compaction.last_finished_log(chat_id)
                    break
            if time.monotonic() >= deadline:
                log.info("chat %s: a compaction pass still runs after %.0f s; not waiting", chat_id, self.sync_wait)
                return Outcome(
                    SKIPPED,
                    reason="busy",
                    diagnostic=f"compaction: another pass of this chat was still running after {self.sync_wait:g} s; "
                    "this turn is fitted by shifting alone",
                )
            await asyncio.sleep(self.wait_poll)
        if last is None:
            return Outcome(SKIPPED, reason=RUNNING)
        return _outcome_of(last)

    async def _passes(
        self,
        chat_id: str,
        bot: BotRow,
        summarizer: Summarizer,
        profile: TokenizerProfile,
        trigger: str,
        chat_window: int | None,
    ) -> Outcome:
        async with self.db.session() as session:
            entry = await Repositories(session).compaction.start_log(
                bot_id=bot.id, chat_id=chat_id, trigger=trigger, model=summarizer.model.name
            )
        settings = settings_of(bot)
        limit = MAX_MANUAL_PASSES if trigger == "manual" else MAX_BACKGROUND_PASSES
        folded = passes = failed = input_tokens = output_tokens = 0
        summary_text: str | None = None
        error_code: str | None = None
        reason: str | None = None
        # What a pass reads: the oldest history up to twice what the summarizer takes, and the newest up to
        # what the triggers need; a legacy threshold needs the exact pressure, so it reads the whole history.
        bounded = trigger == "manual" or (chat_window is not None and settings.automatic)
        reach = READ_AHEAD * max(1, input_budget(summarizer.window, count=profile.count)) if bounded else None
        tail = sync_reach(chat_window) + 1 if chat_window is not None else 1
        counts = TextCounts()  # the run's passes read the same oldest rows: each is counted once
        for _ in range(limit):
            history = await read_pass_history(self.db, chat_id, profile, reach=reach, tail=tail, counts=counts)
            if history.version is None:
                break
            target: int | None = None
            if trigger != "manual":
                phase = "before_send" if trigger == "sync" else "after_turn"
                pressure = await asyncio.to_thread(compactable_tokens, history.messages, profile)
                pressure += history.beyond
                verdict = decide(chat_window, pressure, settings, phase=phase)  # type: ignore[arg-type]
                if verdict.action == "none" and passes:
                    break
                target = verdict.target_tokens
            result = await self._one_pass(chat_id, history, summarizer, profile, target)
            if result is None:  # nothing (more) to fold
                break
            passes += 1
            input_tokens += result.input_tokens  # every pass's usage, a rejected one's too (C12)
            output_tokens += result.output_tokens
            if result.error_code is not None:
                failed += 1
                error_code, reason = result.error_code, result.reason
                break
            summary_text, folded = result.summary, folded + result.folded
        committed = passes - failed
        # A run that committed some passes succeeded (the log keeps the later pass's error code beside it).
        status: CompactionOutcome = COMPLETED if committed else (FAILED if error_code else SKIPPED)
        async with self.db.session() as session:
            repos = Repositories(session)
            await repos.compaction.finish_log(
                entry.id,
                status=status,
                summary=summary_text,
                message_count=folded,
                passes=passes,
                input_tokens=input_tokens or None,
                output_tokens=output_tokens or None,
                error_code=error_code,
            )
            # The cooldown is for a summarizer that failed; history that moved on is no reason to wait.
            if error_code != HISTORY_CHANGED:
                await repos.compaction.set_failed_at(chat_id, utcnow() if error_code else None)
        if error_code:
            detail = f", {reason}" if reason else ""
            log.info("compaction of chat %s: a pass failed (%s%s)", chat_id, error_code, detail)
        return Outcome(status, summary_text, folded, entry.id, error_code, reason, committed, failed)

    async def _one_pass(
        self,
        chat_id: str,
        history: PassHistory,
        summarizer: Summarizer,
        profile: TokenizerProfile,
        target: int | None,
    ) -> PassResult | None:
        """A pass's result, or None when there is nothing to fold.

        T5: the summarizer's input is counted with the summarizer model's calibrated counts; a context-length
        rejection teaches the factor and shrinks the pass once, instead of failing it.
        """
        base = profile_for(summarizer.model)
        async with self.db.session(write=False) as session:
            counting = await counting_for(Repositories(session), summarizer.model, base, self.rules.estimate_margin)
        fold = FoldCall(self.db, history.messages, summarizer, profile, target, counting, beyond=history.beyond)
        if not await fold.select():
            return fold.outcome
        call = CallTarget(summarizer.model.name, summarizer.provider, summarizer.window)
        try:
            reply = await self.calls.complete(call, fold, fold)  # N5: both attempts share one deadline
        except ProviderError:
            return fold.outcome  # the pass's failure, for the run's log
        assert fold.selection is not None
        selection = fold.selection
        used_in = reply.usage.input_tokens if reply.usage else 0
        used_out = reply.usage.output_tokens if reply.usage else 0
        verdict, record = await asyncio.to_thread(
            accept_summary, reply.text, reply.finish_reason, selection, message_id=new_id(), counter=profile
        )
        if not verdict.ok or record is None:
            code = REJECTED.get(verdict.reason or "", "COMPACTION_SUMMARY_REJECTED")
            return PassResult(error_code=code, reason=verdict.detail, input_tokens=used_in, output_tokens=used_out)
        async with self.db.session() as session:
            assert history.version is not None
            committed = await Repositories(session).compaction.commit_summary(
                chat_id,
                history.version,
                content=record.text,
                covers=list(selection.covers),
                supersedes=list(selection.supersedes),
                workspaces=list(selection.workspaces),
                model=summarizer.model.name,
                raw=history.raw_seqs(m.id for m in selection.fold if m.source != "summary"),
            )
        if committed is None:  # C10: an edit during the pass; nothing is committed
            return PassResult(error_code=HISTORY_CHANGED, input_tokens=used_in, output_tokens=used_out)
        raw_folded = len([m for m in selection.fold if m.source != "summary"])
        return PassResult(summary=record.text, folded=raw_folded, input_tokens=used_in, output_tokens=used_out)


@dataclass(frozen=True, slots=True)
class PassHistory:
    """What one pass reads of a chat: its history version and its history (summaries in place), whole, or
    its oldest part when ``beyond`` > 0: at least that many compactable raw tokens follow, not read."""

    version: int | None
    messages: list[Message]
    beyond: int = 0
    #: The seq of every raw message read (by id).
    seqs: dict[str, int] = field(default_factory=dict)

    def raw_seqs(self, ids: Iterable[str]) -> dict[str, int] | None:
        """``ids`` (raw messages of the history) with their seqs; None when one was not read here."""
        found: dict[str, int] = {}
        for message_id in ids:
            seq = self.seqs.get(message_id)
            if seq is None:
                return None
            found[message_id] = seq
        return found


@dataclass(slots=True)
class TextCounts:
    """The text token counts of the rows a run read, by message id, for the history version they were read
    at (an edit of the history makes them unknown again)."""

    version: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)

    def at(self, version: int | None) -> dict[str, int]:
        """The counts known at ``version`` (forgotten when the history changed since)."""
        if version != self.version:
            self.version, self.tokens = version, {}
        return self.tokens


async def read_pass_history(
    db: Database,
    chat_id: str,
    profile: TokenizerProfile,
    *,
    reach: int | None,
    tail: int,
    counts: TextCounts | None = None,
) -> PassHistory:
    """The chat's history version and its raw messages with summaries in place, read once per pass.

    With ``reach``, a long history is not read in full: only its oldest raw messages until their text
    passes ``reach`` tokens (a pass folds no more than the summarizer takes), and its newest ones until
    their compactable tokens pass ``tail`` (what the triggers and the target need), which give
    ``beyond``. When the two meet, the history is read whole and ``beyond`` is 0. The oldest rows' text is
    priced with the counts ``counts`` knows, then the stored ones, and counted only when neither has it.

    A read-only session: on SQLite a write session holds the process's write lock for the whole read,
    and every other chat's turn would wait for a long history to load (the commit checks the version).
    """
    async with db.session(write=False) as session:
        repos = Repositories(session)
        version = await repos.compaction.history_version(chat_id)
        summaries = await repos.compaction.active_summaries(chat_id)
        known = (counts or TextCounts()).at(version)
        rows, more = await _oldest(repos, chat_id, profile, reach, known)
        beyond = 0
        if more:
            window = await repos.messages.recent_window(chat_id, profile.name, tail, profile.count, store_counts=False)
            newest = [r for r in window.rows if r.seq > rows[-1].seq and not is_command(r)]
            oldest_newest = min((r.seq for r in window.rows if not r.pinned), default=0)
            if window.has_more and oldest_newest > rows[-1].seq:
                # At least 1: the pass must know the history goes on (and fold no current turn of it).
                beyond = max(1, await asyncio.to_thread(compactable_tokens, merge(newest, []), profile))
                summaries = [s for s in summaries if s.anchor_seq <= rows[-1].seq]  # the rest's stay out
            else:  # the newest reach back into the oldest part: the rest is short, read it all
                rows += (await _oldest(repos, chat_id, profile, None, known, after=rows[-1].seq))[0]
    seqs = {r.id: r.seq for r in rows}
    return PassHistory(version, await asyncio.to_thread(merge, rows, summaries), beyond, seqs)


async def _oldest(
    repos: Repositories,
    chat_id: str,
    profile: TokenizerProfile,
    reach: int | None,
    known: dict[str, int],
    *,
    after: int | None = None,
) -> tuple[list[MessageRow], bool]:
    """The chat's raw messages oldest first (after seq ``after``), page by page until their text passes
    ``reach`` tokens (None: all of them); True when more follow. ``known`` holds (and learns) text counts."""
    rows: list[MessageRow] = []
    read = 0
    while True:
        page = await repos.compaction.unsummarized(chat_id, after_seq=after, limit=HISTORY_PAGE)
        rows += page
        if len(page) < HISTORY_PAGE:
            return rows, False
        after = page[-1].seq
        if reach is not None:
            missing = [r for r in page if r.id not in known and not is_command(r)]
            if missing:  # stored counts first; what has none is counted (and not stored: a read-only session)
                found, _ = await token_counts(repos.session, missing, profile.name, profile.count, store=False)
                known.update(found)
            read += sum(known[r.id] for r in page if not is_command(r))
            if read > reach:
                return rows, True


def _outcome_of(row: CompactionLogRow) -> Outcome:
    status = cast(CompactionOutcome, row.status) if row.status in COMPACTION_OUTCOMES else SKIPPED
    failed = 1 if row.error_code else 0  # a run stops at its first failed pass
    return Outcome(
        status,
        row.summary,
        row.message_count,
        row.id,
        row.error_code,
        passes_committed=max(0, row.passes - failed),
        passes_failed=failed,
    )
