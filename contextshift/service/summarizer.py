"""Which model summarizes a chat (C4, C5, C13), and why none can.

The compaction model is the bot's ``compaction_model_id`` or, when that is null ("use chat model"), its chat
model. It must be an enabled chat model of an enabled provider that enforces output limits (not
``openai-codex``) with a declared context window. Every way that fails has one reason code, reported as
``compaction.model_unavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.vocabulary import COMPACTION_UNAVAILABLE_REASONS
from ..providers import enforces_output_limit
from ..storage import Repositories
from ..storage.tables import BotRow, ModelRow, ProviderRow
from .errors import Refusal, ServiceError, not_found
from .provider_hosts import provider_url_allowed

MODEL_UNAVAILABLE = "compaction.model_unavailable"
#: Every reason ``compaction.model_unavailable`` can give (``core/vocabulary.py``'s).
REASONS = COMPACTION_UNAVAILABLE_REASONS
EXPLANATIONS = {
    "not-configured": "the bot has no chat model and no compaction model",
    "not-chat-model": "the compaction model is not a chat model",
    "model-disabled": "the compaction model is disabled",
    "provider-disabled": "the compaction model's provider is disabled",
    "provider-host-not-allowed": "the compaction model's provider points at a host CONTEXTSHIFT_PROVIDER_HOSTS "
    "does not allow",
    "output-limit-unsupported": "the model's provider does not enforce output token limits (openai-codex); "
    "choose a compaction model",
    "window-unknown": "the model does not declare its context window",
}


class CompactionUnavailable(ServiceError):
    def __init__(self, reason: str, model_id: str | None = None) -> None:
        super().__init__(
            Refusal.UNPROCESSABLE,
            MODEL_UNAVAILABLE,
            f"Compaction cannot run: {EXPLANATIONS[reason]}.",
            reason=reason,
            **({"model_id": model_id} if model_id else {}),
        )
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Summarizer:
    model: ModelRow
    provider: ProviderRow

    @property
    def window(self) -> int:
        assert self.model.context_window is not None
        return self.model.context_window


def problem_with(model: ModelRow, provider: ProviderRow | None, provider_hosts: Sequence[str]) -> str | None:
    """The reason ``model`` cannot summarize (its provider at none of ``provider_hosts``, the setting's, when it
    names any), or None when it can."""
    if model.type != "chat":
        return "not-chat-model"
    if not model.enabled:
        return "model-disabled"
    if provider is None or not provider.enabled:
        return "provider-disabled"
    if not provider_url_allowed(provider.base_url, provider_hosts):
        return "provider-host-not-allowed"
    if not enforces_output_limit(provider.kind):
        return "output-limit-unsupported"
    if not model.context_window:
        return "window-unknown"
    return None


async def resolve(repos: Repositories, bot: BotRow, provider_hosts: Sequence[str]) -> Summarizer:
    """The bot's summarizer, or :class:`CompactionUnavailable` with the reason (``provider_hosts``: as
    :func:`problem_with`)."""
    model_id = bot.compaction_model_id or bot.chat_model_id
    model = await repos.models.get(model_id) if model_id else None
    if model is None:
        raise CompactionUnavailable("not-configured")
    provider = await repos.providers.get(model.provider_id)
    problem = problem_with(model, provider, provider_hosts)
    if problem is not None:
        raise CompactionUnavailable(problem, model.id)
    assert provider is not None
    return Summarizer(model, provider)


async def check_choice(repos: Repositories, model_id: str | None, provider_hosts: Sequence[str]) -> None:
    """A bot's ``compaction_model_id`` must name an eligible model (null resets to the chat model;
    ``provider_hosts``: as :func:`problem_with`)."""
    if model_id is None:
        return
    model = await repos.models.get(model_id)
    if model is None:
        raise not_found("model", model_id)
    problem = problem_with(model, await repos.providers.get(model.provider_id), provider_hosts)
    if problem is not None:
        raise CompactionUnavailable(problem, model_id)


async def eligible_models(repos: Repositories, provider_hosts: Sequence[str]) -> list[ModelRow]:
    """Models the compaction-model picker may offer (C5: output-limit-less providers filtered out;
    ``provider_hosts``: as :func:`problem_with`)."""
    providers = {p.id: p for p in await repos.providers.list_all()}
    models = await repos.models.list_all()
    return [m for m in models if problem_with(m, providers.get(m.provider_id), provider_hosts) is None]
