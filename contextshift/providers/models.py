"""A provider's own model list (``GET /models``), read into :class:`ListedModel`s without keeping upstream text.

Both protocols answer ``{"data": [{"id": ...}, ...]}``. Only ids that could be a model's name are kept (no
control characters, at most :data:`MAX_ID_LENGTH` long, the first :data:`MAX_MODELS`), and only the numbers
some servers add: the window (OpenRouter and Together ``context_length``, vLLM ``max_model_len``, Groq
``context_window``, LM Studio ``max_context_length``, Anthropic ``max_input_tokens``) and the longest reply
(OpenRouter ``top_provider.max_completion_tokens``, Groq ``max_completion_tokens``, Anthropic ``max_tokens``).
A model that states neither gets the published limits of :mod:`contextshift.core.known_models`, if any.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contextshift.core.known_models import known_limits

from .base import ListedModel
from .errors import malformed

#: A model's name in the service is at most this long (the API's model ``name``).
MAX_ID_LENGTH = 200
#: At most this many models are read from one list (OpenRouter lists a few hundred).
MAX_MODELS = 2000
#: The largest window or output a listed number may state (the API's own bound on a model's limits).
MAX_TOKENS = 10_000_000
_PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]+$")
_WINDOW_FIELDS = ("context_length", "max_model_len", "context_window", "max_context_length", "max_input_tokens")
_OUTPUT_FIELDS = ("max_completion_tokens", "max_output_tokens", "max_tokens")


def _tokens(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= MAX_TOKENS else None


def _first(entry: Mapping[str, Any], fields: tuple[str, ...]) -> int | None:
    top = entry.get("top_provider")
    for source in (entry, top if isinstance(top, Mapping) else {}):
        for name in fields:
            found = _tokens(source.get(name))
            if found is not None:
                return found
    return None


def parse_model_list(payload: Any) -> list[ListedModel]:
    """The models of a ``GET /models`` answer, sorted by id, each once.

    Raises:
        ProviderError: ``GENERATION_FAILED`` when the answer is not a model list.
    """
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        raise malformed("model list")
    found: dict[str, ListedModel] = {}
    for entry in data[:MAX_MODELS]:
        if not isinstance(entry, Mapping):
            continue
        model_id = entry.get("id")
        if not isinstance(model_id, str) or len(model_id) > MAX_ID_LENGTH or not _PRINTABLE.match(model_id):
            continue
        model_id = model_id.strip()
        window, output = _first(entry, _WINDOW_FIELDS), _first(entry, _OUTPUT_FIELDS)
        known = known_limits(model_id)
        if window is None and output is None and known is not None:
            window, output = known.context_window, known.max_output_tokens
        if model_id:
            found.setdefault(model_id, ListedModel(model_id, window, output))
    return sorted(found.values(), key=lambda m: m.id)
