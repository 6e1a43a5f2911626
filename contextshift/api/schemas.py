"""The API's request and response models (Pydantic v2). Requests forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..core.strategies import STRATEGY_NAME
from ..pipeline.template import parse_template

ProviderKind = Literal["openai", "anthropic", "openai-codex"]
ModelType = Literal["chat", "embedding", "image"]
ChatType = Literal["chat", "discuss", "pipeline"]
Role = Literal["system", "user", "assistant", "tool"]
Position = Literal["before", "after", "depth"]

Name = Field(min_length=1, max_length=200)
Tokens = Field(default=None, ge=1, le=10_000_000)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- providers and models ---------------------------------------------------------------------------------


class ProviderCreate(Strict):
    name: str = Name
    kind: ProviderKind
    base_url: str = Field(min_length=1, max_length=2000, pattern=r"^https?://\S+$")
    api_key: str | None = Field(default=None, max_length=4000)
    enabled: bool = True


class ProviderPatch(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    base_url: str | None = Field(default=None, min_length=1, max_length=2000, pattern=r"^https?://\S+$")
    api_key: str | None = Field(default=None, max_length=4000, description="A new key; an empty string removes it")
    enabled: bool | None = None


class ProviderOut(BaseModel):
    id: str
    name: str
    kind: ProviderKind
    base_url: str
    enabled: bool
    has_api_key: bool
    enforces_output_limit: bool
    created_at: datetime


class ModelCreate(Strict):
    provider_id: str = Field(min_length=1, max_length=64)
    name: str = Name
    type: ModelType = "chat"
    context_window: int | None = Tokens
    max_output_tokens: int | None = Tokens
    enabled: bool = True
    tokenizer: str | None = Field(default=None, max_length=500)


class ModelPatch(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    type: ModelType | None = None
    context_window: int | None = Tokens
    max_output_tokens: int | None = Tokens
    enabled: bool | None = None
    tokenizer: str | None = Field(default=None, max_length=500)


class ModelOut(BaseModel):
    id: str
    provider_id: str
    name: str
    type: ModelType
    context_window: int | None
    max_output_tokens: int | None
    enabled: bool
    tokenizer: str | None
    tokenizer_profile: str
    tokenizer_approximate: bool
    created_at: datetime


# -- bots -------------------------------------------------------------------------------------------------

TemplateItem = str | dict[str, Any]


def _check_strategy(value: str | None) -> str | None:
    if value is not None and not STRATEGY_NAME.match(value):
        raise ValueError("must be 1-128 characters of a-z, 0-9, '.', '_' or '-'")
    return value


def _check_template(value: list[TemplateItem] | None) -> list[TemplateItem] | None:
    if value is not None:
        parse_template(value)
    return value


class BotFields(Strict):
    system_prompt: str | None = Field(default=None, max_length=200_000)
    persona: str | None = Field(default=None, max_length=200_000)
    context_strategy: str | None = Field(default=None, max_length=128)
    response_reserve: int | None = Field(default=None, ge=1, le=1_000_000)
    context_limit: int | None = Field(default=None, ge=1, le=10_000_000)
    lorebook_ids: list[str] | None = Field(default=None, max_length=100)
    template: list[TemplateItem] | None = Field(default=None, max_length=100)
    author_note: str | None = Field(default=None, max_length=20_000)
    author_note_depth: int | None = Field(default=None, ge=0, le=1000)

    @field_validator("context_strategy")
    @classmethod
    def _strategy(cls, value: str | None) -> str | None:
        return _check_strategy(value)

    @field_validator("template")
    @classmethod
    def _template(cls, value: list[TemplateItem] | None) -> list[TemplateItem] | None:
        return _check_template(value)


class BotCreate(BotFields):
    name: str = Name
    chat_model_id: str | None = Field(default=None, max_length=64)


class BotPatch(BotFields):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    chat_model_id: str | None = Field(default=None, max_length=64)


class BotOut(BaseModel):
    id: str
    name: str
    chat_model_id: str | None
    system_prompt: str
    persona: str
    context_strategy: str
    response_reserve: int
    context_limit: int | None
    lorebook_ids: list[str]
    template: list[TemplateItem] | None
    author_note: str | None
    author_note_depth: int
    created_at: datetime
    updated_at: datetime


# -- lorebooks and memories -------------------------------------------------------------------------------


class LoreEntryIn(Strict):
    keys: list[str] = Field(default_factory=list, max_length=100)
    secondary_keys: list[str] = Field(default_factory=list, max_length=100)
    content: str = Field(max_length=200_000)
    constant: bool = False
    enabled: bool = True
    order: int = Field(default=100, ge=-1_000_000, le=1_000_000)
    position: Position = "before"
    depth: int | None = Field(default=None, ge=0, le=10_000)


class LoreEntryOut(BaseModel):
    id: str
    keys: list[str]
    secondary_keys: list[str]
    content: str
    constant: bool
    enabled: bool
    order: int
    position: Position
    depth: int | None


class LorebookCreate(Strict):
    name: str = Name
    entries: list[LoreEntryIn] = Field(default_factory=list, max_length=1000)


class LorebookPatch(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    entries: list[LoreEntryIn] | None = Field(default=None, max_length=1000)


class LorebookOut(BaseModel):
    id: str
    name: str
    entries: list[LoreEntryOut]
    created_at: datetime


class MemoryCreate(Strict):
    content: str = Field(min_length=1, max_length=100_000)
    chat_id: str | None = Field(default=None, max_length=64)


class MemoryOut(BaseModel):
    id: str
    bot_id: str
    chat_id: str | None
    content: str
    created_at: datetime


# -- chats and messages -----------------------------------------------------------------------------------


class ChatCreate(Strict):
    bot_id: str = Field(min_length=1, max_length=64)
    type: ChatType = "chat"
    title: str | None = Field(default=None, max_length=500)


class ChatOut(BaseModel):
    id: str
    bot_id: str
    type: ChatType
    title: str
    created_at: datetime
    updated_at: datetime


class ToolCallIn(Strict):
    id: str = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: dict[str, Any]

    @field_validator("function")
    @classmethod
    def _function(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("name"), str) or not value["name"]:
            raise ValueError("function.name must be a non-empty string")
        arguments = value.get("arguments", "")
        if not isinstance(arguments, str):
            raise ValueError("function.arguments must be a string")
        return {"name": value["name"], "arguments": arguments}


class MessageCreate(Strict):
    role: Role
    content: str | list[dict[str, Any]] | None = Field(default="", max_length=2_000_000)
    name: str | None = Field(default=None, max_length=200)
    tool_calls: list[ToolCallIn] | None = Field(default=None, max_length=128)
    tool_call_id: str | None = Field(default=None, max_length=200)
    pinned: bool = False
    meta: dict[str, Any] = Field(default_factory=dict)
    workspace: str | None = Field(default=None, max_length=200)


class MessagePatch(Strict):
    pinned: bool | None = None
    meta: dict[str, Any] | None = None


class MessageOut(BaseModel):
    id: str
    chat_id: str
    seq: int
    role: Role
    content: str | list[dict[str, Any]] | None
    name: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    pinned: bool
    meta: dict[str, Any]
    workspace: str | None
    created_at: datetime


# -- generation, audit, preview ---------------------------------------------------------------------------


class GenerateRequest(Strict):
    content: str = Field(min_length=1, max_length=2_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stream: bool = True


class UsageOut(BaseModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None


class GenerateOut(BaseModel):
    message: MessageOut
    usage: UsageOut | None


class TokenizerOut(BaseModel):
    profile: str
    approximate: bool


class BudgetOut(BaseModel):
    context_limit: int
    response_reserve: int
    prompt_tokens: int


class EntryOut(BaseModel):
    identifier: str
    role: str
    source: str
    content: str
    tokens: int
    included: bool
    reason: str
    order: int
    name: str | None = None
    relevance: float | None = None
    stands_for: list[str] = Field(default_factory=list)


class PreviewOut(BaseModel):
    provider_id: str | None
    provider_kind: str | None
    model: str | None
    tokenizer: TokenizerOut
    budget: BudgetOut
    context_strategy: str
    entries: list[EntryOut]
    provider_messages: list[dict[str, Any]]
    diagnostics: list[str]
    excluded_count: int


class AuditOut(PreviewOut):
    generation_id: str
    chat_id: str
    status: Literal["prepared", "completed", "failed", "cancelled"]
    error_code: str | None
    usage: UsageOut | None
    created_at: datetime
    finished_at: datetime | None


class PreviewRequest(Strict):
    chat_id: str | None = Field(default=None, max_length=64)
    bot_id: str | None = Field(default=None, max_length=64)
    user_message: str = Field(default="", max_length=2_000_000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
