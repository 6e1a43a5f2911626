"""A Hugging Face model's chat template, measured (T1, T2): what it adds per message and to prime the reply.

``tokenizer_config.json`` beside a ``tokenizer.json`` carries the model's ``chat_template`` (Jinja). It is
rendered the way ``transformers`` renders it (a sandboxed Jinja environment, ``bos_token`` / ``eos_token``,
``add_generation_prompt``, ``raise_exception``, ``strftime_now``) for two small conversations, and the
difference between the rendered prompts' token counts and their texts' counts gives the framing. Nothing is
downloaded; a missing or broken template leaves the profile's default framing in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core.errors import ContextShiftError
from ..core.fetched import ChatFraming

_ONE_TURN = [{"role": "user", "content": "Hello"}]
_THREE_TURNS = [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there"},
    {"role": "user", "content": "How are you?"},
]


class TemplateError(ContextShiftError):
    """The chat template could not be read or rendered."""

    code = "TOKENIZER_TEMPLATE_INVALID"


def _special(config: dict[str, Any], key: str) -> str:
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def load_config(tokenizer_json: Path) -> dict[str, Any] | None:
    """``tokenizer_config.json`` beside ``tokenizer_json``, or None when there is none."""
    path = tokenizer_json.with_name("tokenizer_config.json")
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TemplateError(f"cannot read {path.name}: {type(error).__name__}") from None
    return config if isinstance(config, dict) else None


def chat_template_of(config: dict[str, Any]) -> str | None:
    """The default template: a string, or the entry named ``default`` of a list of named templates."""
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template if isinstance(template, str) and template.strip() else None


def renderer(config: dict[str, Any]) -> Callable[[list[dict[str, Any]], bool], str]:
    """``render(messages, add_generation_prompt)`` for the config's chat template."""
    template_text = chat_template_of(config)
    if template_text is None:
        raise TemplateError("no chat_template")
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(f"the template raised: {message}")

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        template = environment.from_string(template_text)
    except JinjaError as error:
        raise TemplateError(f"the template does not compile: {type(error).__name__}") from None
    bos, eos = _special(config, "bos_token"), _special(config, "eos_token")

    def render(messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        try:
            return template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=bos,
                eos_token=eos,
                tools=None,
            )
        except JinjaError as error:
            raise TemplateError(f"the template does not render: {type(error).__name__}") from None

    return render


def measure(
    config: dict[str, Any], count: Callable[[str], int], count_with_specials: Callable[[str], int]
) -> ChatFraming:
    """The template's framing: ``count`` counts message texts, ``count_with_specials`` a rendered prompt."""
    render = renderer(config)
    one = count_with_specials(render(list(_ONE_TURN), True))
    three = count_with_specials(render(list(_THREE_TURNS), True))
    texts_one = sum(count(str(m["content"])) for m in _ONE_TURN)
    texts_three = sum(count(str(m["content"])) for m in _THREE_TURNS)
    return ChatFraming.measured(one_turn=one, three_turns=three, texts_one=texts_one, texts_three=texts_three)


__all__ = ["TemplateError", "chat_template_of", "load_config", "measure", "renderer"]
