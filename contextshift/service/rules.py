"""What the settings decide for every chat turn, endpoint call and compaction pass, handed down by constructor.

``create_app`` makes one :class:`Rules` from its :class:`~contextshift.settings.Settings` and gives it to the
services (``Generations``, ``ProxyService``, ``Compactor``) and, through a dependency, to the routes that check
the same things. ``Rules()`` is "none set": any provider host, the default margin, no embedder.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.calibration import DEFAULT_MARGIN
from ..core.embedding import Embedder
from ..embeddings import NONE, load_embedder
from ..settings import Settings
from .provider_hosts import host_patterns


@dataclass(frozen=True, slots=True)
class Rules:
    """``provider_hosts``: the hosts a provider's ``base_url`` may name (``CONTEXTSHIFT_PROVIDER_HOSTS``; empty:
    any); ``estimate_margin``: the margin of an uncalibrated estimate (``CONTEXTSHIFT_ESTIMATE_MARGIN``);
    ``embedder``: recall by meaning (``CONTEXTSHIFT_EMBEDDINGS``; None: by words only)."""

    provider_hosts: tuple[str, ...] = ()
    estimate_margin: float = DEFAULT_MARGIN
    embedder: Embedder | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, embeddings: bool = True) -> Rules:
        """The rules of ``settings``; loads the embedder they name (unless not ``embeddings``: a job worker
        builds no prompt and needs none).

        Raises:
            UnknownEmbeddings, EmbeddingsNotInstalled, EmbeddingsCorrupt: as ``load_embedder``.
        """
        margin = settings.estimate_margin
        return cls(
            provider_hosts=host_patterns(settings.provider_hosts),
            estimate_margin=DEFAULT_MARGIN if margin is None else margin,
            embedder=load_embedder(settings.embeddings or NONE) if embeddings else None,
        )


#: No setting: the defaults.
NO_RULES = Rules()

__all__ = ["NO_RULES", "Rules"]
