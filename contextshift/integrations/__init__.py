"""Framework adapters: fit an agent framework's own message history into a token budget with contextshift.

One module per framework, each an optional extra and imported only when used (``import contextshift``
imports none of them):

- :mod:`contextshift.integrations.langchain` (``contextshift[langchain]``): ``shift_messages`` for LangChain
  messages, ``ContextShiftMiddleware`` for LangChain v1's ``create_agent`` and a LangGraph ``pre_model_hook``.
- :mod:`contextshift.integrations.pydantic_ai` (``contextshift[pydantic-ai]``): a history processor.
- :mod:`contextshift.integrations.openai_agents` (``contextshift[openai-agents]``): ``FittedSession``.

Each converts the framework's objects to contextshift messages, runs :func:`contextshift.shift_with_strategy`
and maps the kept messages back to the very objects it was given, so a tool call always stays with its result.
"""

from __future__ import annotations

from ..core.errors import ContextShiftError


class IntegrationUnavailable(ContextShiftError, ImportError):
    """The framework an integration module adapts is not installed (also an ``ImportError``).

    Args:
        framework: the framework's name, as its users know it.
        extra: the contextshift extra that installs it.
    """

    code = "INTEGRATION_NOT_INSTALLED"

    def __init__(self, framework: str, extra: str) -> None:
        super().__init__(
            f"{framework} is not installed: install it with  pip install 'contextshift[{extra}]'",
            framework=framework,
            extra=extra,
        )


__all__ = ["IntegrationUnavailable"]
