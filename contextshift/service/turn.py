"""Loading one turn: everything the pipeline needs for a chat (or a bot and a draft), read once.

Generation and preview both come through :func:`load_turn`, so they see the same prompt. Only the recent
window of history is read (T4: stored per-message counts), never the whole chat.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.calibration import CalibratedProfile, Calibration, drifts
from ..core.limits import reply_reserve
from ..core.tokens import ChatFormatProfile, TokenizerProfile
from ..pipeline import AuthorNote, LoreEntry, MemoryItem, PipelineRequest, Sources
from ..pipeline.interceptors import Interceptor
from ..pipeline.run import default_serializer
from ..providers import to_anthropic_messages
from ..providers.server_context import fitting_window
from ..storage import Database, Repositories, row_to_message
from ..storage.tables import BotRow, ChatRow, MessageRow, ModelRow, ProviderRow
from ..tokenizers import get_tokenizer
from ..tokenizers.server import ServerTokenizer
from .calibration import Counting, counting_for
from .counting import ServerCounting
from .errors import Refusal, ServiceError, not_found
from .history import is_command, merge
from .provider_hosts import check_provider_url
from .recall import RECALL, recall_candidates
from .rules import NO_RULES, Rules

#: How many of a summary's covered messages the audit lists one by one (the newest ones).
AUDITED_COVERED = 100
#: The context window assumed when neither the model nor the bot declares one.
DEFAULT_CONTEXT_LIMIT = 8192


@dataclass(slots=True)
class Turn:
    bot: BotRow
    chat: ChatRow | None
    model: ModelRow | None
    provider: ProviderRow | None
    #: What the turn budgets with: the model's profile, calibrated when it is approximate (T5).
    profile: TokenizerProfile
    request: PipelineRequest
    notes: list[str] = field(default_factory=list)
    counting: Counting | None = None
    #: What the prompt's entries cannot list: history older than the loaded window (``not_loaded``, left
    #: out by any shift) and messages a summary stands for (``summarized``), counted in the database.
    history: dict[str, int] | None = None

    @property
    def base_profile(self) -> TokenizerProfile:
        """The model's own, uncalibrated profile (what stored per-message counts and ratios use)."""
        return self.counting.base if self.counting is not None else self.profile

    @property
    def calibration(self) -> Calibration:
        return self.counting.calibration if self.counting is not None else Calibration()

    #: The provider's own tokenizer, when it has one: build the prompt with ``service.counting.run_counted``.
    server: ServerTokenizer | None = None


def profile_for(model: ModelRow | None) -> TokenizerProfile:
    """T2: the model's ``tokenizer`` field overrides; otherwise the model name resolves; else approximate."""
    if model is None:
        return get_tokenizer(None)
    return get_tokenizer(model.tokenizer or model.name)


def serializer_for(kind: str) -> Any:
    def anthropic(messages: list[Any]) -> dict[str, Any]:
        system, wire = to_anthropic_messages(messages)
        return {"system": system or "", "messages": wire}

    return anthropic if kind == "anthropic" else default_serializer


async def chat_and_bot(repos: Repositories, chat_id: str) -> tuple[ChatRow, BotRow]:
    """The chat and its bot, or ``CHAT_NOT_FOUND`` / ``BOT_NOT_FOUND``."""
    chat = await repos.chats.get(chat_id)
    if chat is None:
        raise not_found("chat", chat_id)
    bot = await repos.bots.get(chat.bot_id)
    if bot is None:
        raise not_found("bot", chat.bot_id)
    return chat, bot


async def resolve_model(
    repos: Repositories, bot: BotRow, chat: ChatRow | None = None
) -> tuple[ModelRow | None, ProviderRow | None]:
    """The turn's chat model and its provider: the chat's own model when it has one, else the bot's."""
    model_id = (chat.model_id if chat is not None else None) or bot.chat_model_id
    model = await repos.models.get(model_id) if model_id else None
    provider = await repos.providers.get(model.provider_id) if model else None
    return model, provider


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What a turn reads of its chat's setting, once, in one short read session (:func:`read_context`): the
    chat, its bot, the turn's model and provider and the model's counting. The compaction decision, the count
    warm-up and the turn's own transaction take it from here instead of reading it again."""

    chat: ChatRow
    bot: BotRow
    model: ModelRow | None
    provider: ProviderRow | None
    counting: Counting


async def read_context(db: Database, chat_id: str, rules: Rules = NO_RULES) -> TurnContext:
    """The chat's :class:`TurnContext`, or ``CHAT_NOT_FOUND`` / ``BOT_NOT_FOUND``. The rows stay readable
    after the session (it does not expire them); a turn writes through repositories by id, never through them."""
    async with db.session(write=False) as session:
        repos = Repositories(session)
        chat, bot = await chat_and_bot(repos, chat_id)
        model, provider = await resolve_model(repos, bot, chat)
        counting = await counting_for(repos, model, profile_for(model), rules.estimate_margin)
    return TurnContext(chat, bot, model, provider, counting)


def require_generation_ready(
    bot: BotRow, model: ModelRow | None, provider: ProviderRow | None, provider_hosts: Sequence[str]
) -> None:
    """Generation needs an enabled chat model on an enabled provider (at one of ``provider_hosts``, the
    setting's, when it names any); preview does not."""
    if model is None:
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "MODEL_NOT_CONFIGURED",
            "The bot has no chat model; set chat_model_id.",
            bot_id=bot.id,
        )
    if model.type != "chat":
        raise ServiceError(
            Refusal.UNPROCESSABLE, "MODEL_NOT_CHAT", "The bot's model is not a chat model.", model_id=model.id
        )
    if not model.enabled:
        raise ServiceError(
            Refusal.UNPROCESSABLE, "MODEL_DISABLED", "The bot's chat model is disabled.", model_id=model.id
        )
    if provider is None or not provider.enabled:
        raise ServiceError(
            Refusal.UNPROCESSABLE, "PROVIDER_DISABLED", "The chat model's provider is disabled.", model_id=model.id
        )
    check_provider_url(provider.base_url, provider_hosts)


async def _not_loaded(repos: Repositories, chat_id: str, window: list[MessageRow], loaded: list[MessageRow]) -> int:
    """How many raw messages lie before the window's oldest unpinned row, less those recall brought back."""
    start = min((r.seq for r in window if not r.pinned), default=None)
    if start is None:
        return 0
    recalled = sum(1 for r in loaded if r.seq < start and not r.pinned and r.summary_id is None)
    return max(0, await repos.messages.count_older_raw(chat_id, start) - recalled)


async def _budget_profile(
    model: ModelRow | None,
    provider: ProviderRow | None,
    base: TokenizerProfile,
    counting: Counting,
    server_counting: ServerCounting | None,
    notes: list[str],
) -> tuple[TokenizerProfile, ServerTokenizer | None]:
    """The profile the turn budgets with (T5: the provider's own count when it tokenizes), noting a drift."""
    profile: TokenizerProfile = counting.profile
    if drifts(counting.calibration) and not base.approximate:
        notes.append(
            f'tokenizer "{base.name}" disagrees with the provider (×{counting.calibration.factor:.2f} over '
            f"{counting.calibration.calls} calls): check the model's tokenizer setting"
        )
    # T5: a provider that tokenizes counts exactly; what it has not counted yet, the calibrated estimate does.
    server = await server_counting.tokenizer_for(model, provider, base) if server_counting is not None else None
    if server is not None:
        profile = server.profile(counting.profile)
    return profile, server


async def _context_limit(
    bot: BotRow,
    model: ModelRow | None,
    provider: ProviderRow | None,
    server_counting: ServerCounting | None,
    notes: list[str],
) -> int:
    """The turn's context window: the bot's, else the model's, fitted to a local server's; else the default."""
    limit = bot.context_limit or (model.context_window if model else None)
    if server_counting is not None:  # T5: a local server's smaller context would cut the prompt silently
        limit, fitted_to_server = fitting_window(limit, await server_counting.server_context(model, provider))
        if fitted_to_server is not None:
            notes.append(fitted_to_server)
    if limit is None:
        limit = DEFAULT_CONTEXT_LIMIT
        notes.append(f"context window unknown; assuming {DEFAULT_CONTEXT_LIMIT} tokens")
    return limit


async def _lore(repos: Repositories, bot: BotRow) -> list[LoreEntry]:
    """Every entry of the bot's lorebooks, in the pipeline's shape."""
    return [
        LoreEntry(
            id=entry.id,
            content=entry.content,
            keys=tuple(entry.keys),
            secondary_keys=tuple(entry.secondary_keys),
            constant=entry.constant,
            enabled=entry.enabled,
            order=entry.order,
            position=entry.position,  # type: ignore[arg-type]
            depth=entry.depth,
        )
        for book in await repos.lorebooks.get_many(bot.lorebook_ids or [])
        for entry in book.entries
    ]


@dataclass(slots=True)
class _History:
    """The history a turn's prompt is built from, what its summaries stand for, and what it leaves out."""

    messages: list[Any] = field(default_factory=list)
    summarized: list[Any] = field(default_factory=list)
    #: Raw messages older than the window, less those recall brought back.
    not_loaded: int = 0


@dataclass(frozen=True, slots=True)
class _Window:
    """How a turn reads its history: with the model's own profile, as far as ``budget`` (in its uncalibrated
    tokens) reaches, storing new counts unless it is a preview, ending before ``before_seq``."""

    base: TokenizerProfile
    budget: int
    preview: bool
    before_seq: int | None
    #: recall finds older messages by meaning (an embedder is configured), not only by words
    by_meaning: bool


class WindowSizes:
    """How many rows each chat's last window held, for the next turn's first page (a bounded LRU, per
    process). A wrong guess costs a page more or a few rows too many, never a different window."""

    #: Chats remembered at most.
    LIMIT = 4096
    #: Rows read beyond the last window's size, for what was added since (the input and the reply).
    MARGIN = 8

    def __init__(self) -> None:
        self._sizes: OrderedDict[str, int] = OrderedDict()

    def first_page(self, chat_id: str) -> int | None:
        size = self._sizes.get(chat_id)
        if size is None:
            return None
        self._sizes.move_to_end(chat_id)
        return size + self.MARGIN

    def remember(self, chat_id: str, size: int) -> None:
        self._sizes[chat_id] = size
        self._sizes.move_to_end(chat_id)
        if len(self._sizes) > self.LIMIT:
            self._sizes.popitem(last=False)


#: This process's window sizes (:class:`WindowSizes`).
WINDOW_SIZES = WindowSizes()


async def _load_history(
    repos: Repositories, *, bot: BotRow, chat: ChatRow, draft: str | None, window: _Window, notes: list[str]
) -> _History:
    """The recent window of ``chat``, with recalled and standing messages and the active summaries merged in."""
    base, before_seq = window.base, window.before_seq
    recent = await repos.messages.recent_window(
        chat.id,
        base.name,
        window.budget,
        base.count,
        store_counts=not window.preview,
        before_seq=before_seq,
        first_page=WINDOW_SIZES.first_page(chat.id),
    )
    WINDOW_SIZES.remember(chat.id, len(recent.rows))
    summaries = await repos.compaction.active_summaries(chat.id)
    rows = recent.rows
    if bot.context_strategy == RECALL and recent.has_more:  # G4a: older history the input asks about
        found = await recall_candidates(repos, chat.id, rows, draft, by_meaning=window.by_meaning)
        rows = sorted([*found, *rows], key=lambda r: r.seq)
    standing = await repos.messages.standing(chat.id, before_seq=before_seq)
    if standing:  # G4b: every standing instruction, however old, in its place
        rows = sorted({r.id: r for r in [*rows, *standing]}.values(), key=lambda r: r.seq)
    history = merge([r for r in rows if not is_command(r)], summaries)
    # The newest messages each summary stands for, for the audit (bounded: never the whole chat).
    recent_covered = [i for s in summaries for i in s.covers[-AUDITED_COVERED:]]
    raw = {r.id for r in rows}  # a pinned summarized message is back in the history raw, not summarized
    summarized = [row_to_message(r) for r in await repos.compaction.covered(chat.id, recent_covered) if r.id not in raw]
    if isinstance(base, ChatFormatProfile):
        for message in history:  # counts stored by an earlier turn spare the tokenizer after a restart (T4)
            stored = recent.tokens.get(message.id)
            if stored is not None:
                base.cache.put(message.text, stored)
    not_loaded = 0
    if recent.has_more:
        notes.append("older history was not loaded: it lies beyond what any shift could keep")
        not_loaded = await _not_loaded(repos, chat.id, recent.rows, rows)
    return _History(history, summarized, not_loaded)


async def _setting(
    repos: Repositories, bot: BotRow, chat: ChatRow | None, context: TurnContext | None, rules: Rules
) -> tuple[ModelRow | None, ProviderRow | None, Counting]:
    """The turn's model, provider and counting: from ``context`` when the turn has read it, else read now."""
    if context is not None:
        return context.model, context.provider, context.counting
    model, provider = await resolve_model(repos, bot, chat)
    return model, provider, await counting_for(repos, model, profile_for(model), rules.estimate_margin)


async def load_turn(
    repos: Repositories,
    *,
    bot: BotRow,
    chat: ChatRow | None,
    draft: str | None,
    max_tokens: int | None,
    preview: bool,
    server_counting: ServerCounting | None = None,
    before_seq: int | None = None,
    rules: Rules = NO_RULES,
    context: TurnContext | None = None,
) -> Turn:
    """Build the pipeline request of a turn. ``draft`` None means the input is already the last message.

    With ``server_counting``, a provider that tokenizes (T5) gives the ``server`` profile; the history window is
    still read with the offline profile (its estimates are what ``message_tokens`` stores). ``before_seq`` ends
    the history before it (a regenerated reply is not its own prompt); ``rules``: embedder, margin; ``context``:
    the model, provider and counting already read (:func:`read_context`)."""
    model, provider, counting = await _setting(repos, bot, chat, context, rules)
    base, embedder = counting.base, rules.embedder
    notes: list[str] = []
    scale = counting.profile.scale if isinstance(counting.profile, CalibratedProfile) else 1.0
    profile, server = await _budget_profile(model, provider, base, counting, server_counting, notes)
    limit = await _context_limit(bot, model, provider, server_counting, notes)
    base_reserve = reply_reserve(limit, bot.response_reserve, model.max_output_tokens if model else None)
    reserve = max(base_reserve, max_tokens or 0)
    lore = await _lore(repos, bot)
    memories = [
        MemoryItem(m.id, m.content) for m in await repos.memories.list_for_bot(bot.id, chat.id if chat else None)
    ]
    loaded = _History()
    counts: dict[str, int] | None = None
    if chat is not None:
        counts = {"not_loaded": 0, "summarized": await repos.messages.count_summarized(chat.id)}
        if limit - reserve > 0:
            # Stored counts are the model's own (uncalibrated) ones; read as far as the calibrated budget reaches.
            budget = math.ceil((limit - reserve) / scale)
            window = _Window(base, budget, preview, before_seq, by_meaning=embedder is not None)
            loaded = await _load_history(repos, bot=bot, chat=chat, draft=draft, window=window, notes=notes)
            counts["not_loaded"] = loaded.not_loaded
    interceptors: list[Interceptor] = [AuthorNote(bot.author_note, bot.author_note_depth)] if bot.author_note else []
    request = PipelineRequest(
        sources=Sources(
            system_prompt=bot.system_prompt or "",
            persona=bot.persona or "",
            lore=lore,
            memories=memories,
            history=loaded.messages,
            user_input=draft,
            summarized=loaded.summarized,
        ),
        profile=profile,
        context_limit=limit,
        response_reserve=base_reserve,
        max_tokens=max_tokens,
        strategy=bot.context_strategy or "truncate",
        template=bot.template,
        interceptors=interceptors,
        serializer=serializer_for(provider.kind if provider else "openai"),
        model=model.name if model else "",
        preview=preview,
        chat_id=chat.id if chat else None,
        bot_id=bot.id,
        notes=notes,
        embedder=embedder,
        standing="flagged",
    )
    return Turn(
        history=counts,
        bot=bot,
        chat=chat,
        model=model,
        provider=provider,
        profile=profile,
        request=request,
        notes=notes,
        counting=counting,
        server=server,
    )
