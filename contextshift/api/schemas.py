"""The API's request and response models (Pydantic v2). Requests forbid unknown fields."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    computed_field,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypeAliasType

from ..core.host import default_registry
from ..core.limits import RATIO_ABOVE, RATIO_BELOW, RESPONSE_RESERVE_MAX, RESPONSE_RESERVE_MIN
from ..core.strategies import STRATEGY_NAME
from ..core.vocabulary import (
    AuditReason,
    AuditStatus,
    BlockKind,
    CompactionOffReason,
    CompactionOutcome,
    CompactionStatus,
    CompactionTrigger,
    ProviderKind,
    Role,
    Source,
)
from ..pipeline.template import parse_template

#: Strings never hold NUL: PostgreSQL cannot store it, so the schema says so and no valid request is refused.
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, StringConstraints(pattern=NO_NUL)]
#: Text with at least one non-space character (names, URLs, memories).
#: "Space" spelled out: Python's ``str.strip`` (which storage uses) and JSON Schema's ``\s`` disagree.
_SPACE = "\\x00\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
Required = Annotated[str, StringConstraints(pattern=f"^[^\\x00]*[^{_SPACE}][^\\x00]*$")]
Ident = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=NO_NUL)]
if TYPE_CHECKING:
    JsonValue = Any
else:
    _Keys = Field(json_schema_extra={"additionalProperties": False})  # keys must match the no-NUL pattern
    JsonValue = TypeAliasType(
        "JsonValue",
        Union[  # noqa: UP007
            Text, int, float, bool, list["JsonValue"], Annotated[dict[Text, "JsonValue"], _Keys], None
        ],
    )
JsonObject = Annotated[dict[Text, JsonValue], Field(json_schema_extra={"additionalProperties": False})]

#: Bounds of a message's ``meta`` (N5): nesting depth, keys at every level together, and JSON size.
META_MAX_DEPTH = 8
META_MAX_KEYS = 1000
META_MAX_BYTES = 64 * 1024


def _meta_shape(value: Any, depth: int) -> tuple[int, int]:
    """(deepest nesting, keys) of a JSON value; an object or a list is one level."""
    if isinstance(value, dict):
        inner = [_meta_shape(v, depth + 1) for v in value.values()]
        return max([depth, *(d for d, _ in inner)]), len(value) + sum(k for _, k in inner)
    if isinstance(value, list):
        inner = [_meta_shape(v, depth + 1) for v in value]
        return max([depth, *(d for d, _ in inner)]), sum(k for _, k in inner)
    return depth - 1, 0


def _bounded_meta(value: dict[str, Any]) -> dict[str, Any]:
    depth, keys = _meta_shape(value, 1)
    if depth > META_MAX_DEPTH:
        raise ValueError(f"meta nests {depth} levels deep; at most {META_MAX_DEPTH}")
    if keys > META_MAX_KEYS:
        raise ValueError(f"meta has {keys} keys; at most {META_MAX_KEYS}")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > META_MAX_BYTES:
        raise ValueError(f"meta is {size} bytes of JSON; at most {META_MAX_BYTES}")
    return value


Meta = Annotated[
    dict[Text, JsonValue],
    Field(
        description=f"Free-form JSON: at most {META_MAX_DEPTH} levels deep, {META_MAX_KEYS} keys in all and "
        f"{META_MAX_BYTES} bytes",
        json_schema_extra={"additionalProperties": False, "maxProperties": META_MAX_KEYS},
    ),
    AfterValidator(_bounded_meta),
]


def _integral(value: Any) -> Any:
    """JSON has one number type: ``8000.0`` is the integer 8000 (JSON Schema agrees); ``8000.5`` stays a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _integer(low: int, high: int) -> Any:
    """An integer of a request body in ``[low, high]``: no string, no boolean, no fraction (``1.0`` is 1).
    The bounds come before the validator, so the OpenAPI document states them as ``minimum``/``maximum``."""
    return Annotated[int, Field(ge=low, le=high), BeforeValidator(_integral)]


if TYPE_CHECKING:
    TokenCount = int
    Reserve = int
    ResponseReserve = int
    Depth = int
    Threshold = int
    Order = int
    LoreDepth = int
    TimeoutSeconds = int
else:
    TokenCount = _integer(1, 10_000_000)
    Reserve = _integer(1, 1_000_000)  # also max_tokens
    ResponseReserve = _integer(RESPONSE_RESERVE_MIN, RESPONSE_RESERVE_MAX)  # 0: the default (core.limits)
    Depth = _integer(0, 1000)
    Threshold = _integer(0, 10_000_000)
    Order = _integer(-1_000_000, 1_000_000)
    LoreDepth = _integer(0, 10_000)
    TimeoutSeconds = _integer(1, 600)

ModelType = Literal["chat", "embedding", "image"]
ChatType = Literal["chat", "discuss", "pipeline"]
Position = Literal["before", "after", "depth"]

Name = Field(min_length=1, max_length=200)
TIMEOUT_SECONDS = (
    "N5: seconds, the longest wait for the provider (first byte, between stream chunks); the whole turn gets "
    "5 times this"
)


class Strict(BaseModel):
    """A request body: unknown fields are refused, and no value is coerced (``"8000"`` is no integer,
    ``"yes"`` and ``1`` are no booleans, ``true`` is no integer), as the OpenAPI document says."""

    model_config = ConfigDict(extra="forbid", strict=True)


# -- providers and models ---------------------------------------------------------------------------------


COUNT_TOKENS = (
    "Anthropic only: near the budget, ask the provider's free count_tokens endpoint for the exact prompt size "
    "(short timeout; the estimate is used when it does not answer)"
)


class ProviderCreate(Strict):
    name: Required = Name
    kind: ProviderKind
    base_url: str = Field(min_length=1, max_length=2000, pattern=r"^https?://[!-~]+$")
    api_key: Text | None = Field(default=None, max_length=4000)
    enabled: bool = True
    count_tokens: bool = Field(default=False, description=COUNT_TOKENS)
    timeout_seconds: TimeoutSeconds = Field(default=60, description=TIMEOUT_SECONDS)


class ProviderPatch(Strict):
    """Fields to change. ``null`` leaves name, kind, base_url, enabled and count_tokens unchanged; a null api_key
    removes the key. A new ``kind`` or ``base_url`` without a new ``api_key`` clears the key (N2)."""

    name: Required | None = Field(default=None, min_length=1, max_length=200)
    kind: ProviderKind | None = Field(default=None, description="Changing it clears the key unless a new one comes")
    base_url: str | None = Field(default=None, min_length=1, max_length=2000, pattern=r"^https?://[!-~]+$")
    api_key: Text | None = Field(default=None, max_length=4000, description="A new key; an empty string removes it")
    enabled: bool | None = None
    count_tokens: bool | None = Field(default=None, description=COUNT_TOKENS)
    timeout_seconds: TimeoutSeconds | None = Field(default=None, description=TIMEOUT_SECONDS)


class ProviderOut(BaseModel):
    id: str
    name: str
    kind: ProviderKind
    base_url: str
    enabled: bool
    has_api_key: bool
    enforces_output_limit: bool
    count_tokens: bool
    timeout_seconds: int
    created_at: datetime


class ProviderTestIn(Strict):
    """A connection test of a provider's form, before it is saved. With ``provider_id`` and no ``api_key``, the
    saved provider's key is used, but only while ``kind`` and ``base_url`` are still the saved ones (a key never
    follows a provider to another address)."""

    kind: ProviderKind
    base_url: str = Field(min_length=1, max_length=2000, pattern=r"^https?://[!-~]+$")
    api_key: Text | None = Field(default=None, max_length=4000)
    provider_id: Ident | None = None
    timeout_seconds: TimeoutSeconds = Field(default=60, description=TIMEOUT_SECONDS)


class ProviderTestOut(BaseModel):
    """What a connection test met (``GET`` of the provider's model list, once). Failure is an answer here, not
    an error: ``code`` names its cause (``PROVIDER_CONNECTION_REFUSED``, ``PROVIDER_DNS_FAILED``,
    ``PROVIDER_TLS_FAILED``, ``PROVIDER_TIMEOUT``, ``PROVIDER_SERVER_ERROR``, ``PROVIDER_AUTH``...)."""

    ok: bool
    code: str | None = Field(description="The failure's error code (see ErrorBody.code); null when ok")
    message: str = Field(description="contextshift's own words; never what the provider said")
    status: int | None = Field(description="The provider's HTTP status, when it answered with an error")
    models: int | None = Field(description="How many models the provider lists, when ok")


class ProviderModelOut(BaseModel):
    """A model in the provider's own list, with its window and longest reply when the provider states them or
    contextshift knows the model (to prefill the model form)."""

    id: str
    context_window: int | None
    max_output_tokens: int | None


def _registered_strategy(value: str) -> str:
    if value not in default_registry:
        raise ValueError(f"{value!r} is not a registered strategy ({', '.join(default_registry.names())})")
    return value


#: V7: a model's strategy for the compatible endpoints (null: truncate, unless the request names one).
ModelStrategy = Annotated[
    Text,
    Field(
        max_length=128,
        description="The strategy /v1/chat/completions and /v1/messages fit this model's requests with when a "
        "request names none (default truncate)",
        json_schema_extra={"enum": default_registry.names()},
    ),
    AfterValidator(_registered_strategy),
]
#: V7: a token's strategy for the compatible endpoints (before the model's, when a request names none).
TokenStrategy = Annotated[
    Text,
    Field(
        max_length=128,
        description="The strategy /v1/chat/completions and /v1/messages fit this token's requests with when a "
        "request names none (before the model's context_strategy; default truncate)",
        json_schema_extra={"enum": default_registry.names()},
    ),
    AfterValidator(_registered_strategy),
]


class ModelCreate(Strict):
    provider_id: Ident
    name: Required = Name
    type: ModelType = "chat"
    context_window: TokenCount | None = None
    max_output_tokens: TokenCount | None = None
    enabled: bool = True
    tokenizer: Text | None = Field(default=None, max_length=200)
    context_strategy: ModelStrategy | None = None


class ModelPatch(Strict):
    """Fields to change. ``null`` leaves name, type and enabled unchanged; on context_window, max_output_tokens,
    tokenizer and context_strategy it clears them."""

    name: Required | None = Field(default=None, min_length=1, max_length=200)
    type: ModelType | None = None
    context_window: TokenCount | None = None
    max_output_tokens: TokenCount | None = None
    enabled: bool | None = None
    tokenizer: Text | None = Field(default=None, max_length=200)
    context_strategy: ModelStrategy | None = None


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
    context_strategy: str | None = None
    calibration: CalibrationOut | None = None
    created_at: datetime


# -- bots -------------------------------------------------------------------------------------------------

TemplateItem = str | dict[str, Any]
BlockName = BlockKind


class CustomBlockIn(Strict):
    """A text block of the bot's own, placed where it stands in the template (source ``template``)."""

    id: Text = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    content: Text = Field(max_length=200_000)
    role: Literal["system", "user", "assistant"] = "system"


TemplateInput = BlockName | CustomBlockIn
#: JSON Schema of a template: each block once, ``history`` and ``input`` required (P5).
TEMPLATE_SCHEMA: dict[str, Any] = {
    "uniqueItems": True,
    "allOf": [{"contains": {"const": "history"}}, {"contains": {"const": "input"}}],
}


def _check_strategy(value: str | None) -> str | None:
    if value is not None and not STRATEGY_NAME.match(value):
        raise ValueError("must be 1-128 characters of a-z, 0-9, '.', '_' or '-'")
    return value


def _check_template(value: list[TemplateInput] | None) -> list[TemplateInput] | None:
    if value is not None:
        parse_template([v if isinstance(v, str) else v.model_dump() for v in value])
    return value


class BotFields(Strict):
    system_prompt: Text | None = Field(default=None, max_length=200_000)
    persona: Text | None = Field(default=None, max_length=200_000)
    context_strategy: Text | None = Field(
        default=None,
        max_length=128,
        description="A registered context strategy",
        json_schema_extra={"enum": [*default_registry.names(), None]},
    )
    response_reserve: ResponseReserve | None = Field(
        default=None,
        description="Tokens kept free for the reply; 0 (the default) means the smallest of 1,024, the model's "
        "output limit and a quarter of the window",
    )
    context_limit: TokenCount | None = None
    lorebook_ids: list[Ident] | None = Field(default=None, max_length=100)
    template: list[TemplateInput] | None = Field(default=None, max_length=100, json_schema_extra=TEMPLATE_SCHEMA)
    author_note: Text | None = Field(default=None, max_length=20_000)
    author_note_depth: Depth | None = None
    compaction_enabled: bool | None = None
    compaction_threshold: Threshold | None = Field(
        default=None, description="0 = automatic, relative to the chat model's window (C2)"
    )
    compaction_ratio: float | None = Field(
        default=None,
        gt=RATIO_ABOVE,
        lt=RATIO_BELOW,
        description="Legacy mode only (threshold > 0): share of history to fold",
    )

    @field_validator("context_strategy")
    @classmethod
    def _strategy(cls, value: Text | None) -> str | None:
        return _check_strategy(value)

    @field_validator("template")
    @classmethod
    def _template(cls, value: list[TemplateInput] | None) -> list[TemplateInput] | None:
        return _check_template(value)


class BotCreate(BotFields):
    name: Required = Name
    chat_model_id: Ident | None = None
    compaction_model_id: Ident | None = Field(default=None, description="null = use the chat model")


class BotPatch(BotFields):
    name: Required | None = Field(default=None, min_length=1, max_length=200)
    chat_model_id: Ident | None = None
    compaction_model_id: Ident | None = Field(default=None, description="null resets to the chat model")


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
    compaction_enabled: bool
    compaction_threshold: int
    compaction_ratio: float
    compaction_ratio_used: bool = Field(description="False while the threshold is 0 (automatic mode)")
    compaction_model_id: str | None
    created_at: datetime
    updated_at: datetime


# -- lorebooks and memories -------------------------------------------------------------------------------


class LoreEntryIn(Strict):
    keys: list[Text] = Field(default_factory=list, max_length=100)
    secondary_keys: list[Text] = Field(default_factory=list, max_length=100)
    content: Text = Field(max_length=200_000)
    constant: bool = False
    enabled: bool = True
    order: Order = 100
    position: Position = "before"
    depth: LoreDepth | None = None


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
    name: Required = Name
    entries: list[LoreEntryIn] = Field(default_factory=list, max_length=1000)


class LorebookPatch(Strict):
    name: Required | None = Field(default=None, min_length=1, max_length=200)
    entries: list[LoreEntryIn] | None = Field(default=None, max_length=1000)


class LorebookOut(BaseModel):
    id: str
    name: str
    entries: list[LoreEntryOut]
    created_at: datetime


class MemoryCreate(Strict):
    content: Required = Field(min_length=1, max_length=100_000)
    chat_id: Ident | None = None


class MemoryPatch(Strict):
    content: Required = Field(max_length=100_000, description="The memory's new text")


class MemoryOut(BaseModel):
    id: str
    bot_id: str
    chat_id: str | None
    content: str
    created_at: datetime


# -- chats and messages -----------------------------------------------------------------------------------


class ChatCreate(Strict):
    bot_id: Ident
    type: ChatType = "chat"
    title: Text | None = Field(default=None, max_length=500)


class ChatPatch(Strict):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"minProperties": 1})

    # absent: unchanged; the schema offers no null (a chat always has a title), which the validator refuses
    title: Annotated[Required, StringConstraints(max_length=500)] | SkipJsonSchema[None] = Field(
        default=None, description="The chat's new title (surrounding spaces are dropped)"
    )
    model_id: str | None = Field(
        default=None,
        max_length=32,
        description="A chat model for this chat's turns instead of the bot's (its window, tokenizer and provider"
        " come with it); null goes back to the bot's",
    )

    @model_validator(mode="after")
    def _something(self) -> ChatPatch:
        if not self.model_fields_set:
            raise ValueError("give title and/or model_id")
        if "title" in self.model_fields_set and self.title is None:
            raise ValueError("title cannot be null")
        return self


class ChatOut(BaseModel):
    id: str
    bot_id: str
    type: ChatType
    title: str
    model_id: str | None = Field(default=None, description="The chat's own chat model; null: the bot's")
    created_at: datetime
    updated_at: datetime


class FunctionIn(Strict):
    name: Text = Field(min_length=1, max_length=200)
    arguments: Text = Field(default="", max_length=1_000_000, description="The call's arguments as a JSON string")


class ToolCallIn(Strict):
    id: Text = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionIn


class MessageCreate(Strict):
    role: Role
    content: Text | list[JsonObject] | None = Field(default="", max_length=2_000_000)
    name: Text | None = Field(default=None, max_length=200)
    tool_calls: list[ToolCallIn] | None = Field(default=None, max_length=128)
    tool_call_id: Text | None = Field(default=None, max_length=200)
    pinned: bool = False
    meta: Meta = Field(default_factory=dict)
    workspace: Text | None = Field(default=None, max_length=200)


class MessagePatch(Strict):
    pinned: bool | None = None
    standing: bool | None = Field(
        default=None, description="false dismisses a standing instruction (kept in every prompt); true marks one"
    )
    meta: Meta | None = None
    content: Text | None = Field(
        default=None, min_length=1, max_length=2_000_000, description="New text of a user message (edit)"
    )
    alternative: int | None = Field(
        default=None,
        ge=0,
        le=10_000,
        description="Which version of a regenerated reply, or of a message an edit branched, to show (0 = first);"
        " a branch point shows the chosen version's continuation",
    )


class MessageBranch(Strict):
    content: Text = Field(
        min_length=1, max_length=2_000_000, description="The new text of the user message: its new version"
    )


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
    standing: bool = Field(
        default=False, description="A standing instruction of the user's: kept in every prompt, never summarized"
    )
    meta: dict[str, Any]
    workspace: str | None
    summarized_by: str | None = Field(default=None, description="The summary that stands for it in prompts")
    reply_to: str | None = Field(default=None, description="For a reply: the user message it answers")
    created_at: datetime
    alternatives: int = Field(
        default=1, description="How many versions of this message there are (regenerate, or an edit that branched)"
    )
    alternative: int = Field(default=0, description="Which version is shown and sent (0 = the first)")
    branch_point: bool = Field(
        default=False, description="Each version has its own continuation (an edit branched the chat here)"
    )


# -- generation, audit, preview ---------------------------------------------------------------------------


class GenerateRequest(Strict):
    """A turn: new input (``content``), the retry of a failed input (``retry_of``, the chat's newest message),
    or a redo of the chat's newest reply: ``regenerate_of`` (a new version of it, the earlier ones kept as
    ``alternatives``) or ``continue_of`` (more text added to it, e.g. to a partial reply)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "oneOf": [
                {"required": [name], "properties": {name: {"type": "string"}}}
                for name in ("content", "retry_of", "regenerate_of", "continue_of")
            ]
        },
    )
    content: Text | None = Field(default=None, min_length=1, max_length=2_000_000)
    retry_of: Ident | None = Field(
        default=None,
        description="The chat's newest message, a user message without a reply (a failed input, or the message the "
        "chat was rewound to), to answer without a copy",
    )
    regenerate_of: Ident | None = Field(default=None, description="The chat's newest reply, to answer again")
    continue_of: Ident | None = Field(default=None, description="The chat's newest reply, to add to")
    max_tokens: Reserve | None = None
    stream: bool = True

    @model_validator(mode="after")
    def _one_input(self) -> GenerateRequest:
        given = [v for v in (self.content, self.retry_of, self.regenerate_of, self.continue_of) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of content, retry_of, regenerate_of and continue_of")
        return self


class UsageOut(BaseModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    #: True when the provider reported no usage and these are contextshift's own counts of the turn.
    estimated: bool = False


class GenerateOut(BaseModel):
    message: MessageOut
    usage: UsageOut | None


class TokenizerOut(BaseModel):
    profile: str
    approximate: bool


class CalibrationOut(BaseModel):
    """T5: how the provider's reported usage corrects this model's counts."""

    factor: float = Field(description="real tokens ≈ factor × the profile's own count (from the provider's usage)")
    calls: int = Field(description="successful calls the factor was learned from")
    spread: float = Field(description="typical deviation of one call's ratio (log scale; 0.05 ≈ ±5%)")
    margin: float = Field(description="safety margin added to approximate counts (a share; 0 for exact profiles)")
    scale: float = Field(description="what counts are multiplied by when budgeting: factor × (1 + margin), or 1")
    applied: bool = Field(description="true for approximate profiles; for exact ones the factor is a diagnostic")
    drift: bool = Field(description="an exact profile disagrees with the provider: the tokenizer mapping is wrong")
    label: str


class AttemptOut(BaseModel):
    """One provider call of a generation that needed a retry (T5): ``context-length-retry``, then the outcome."""

    outcome: str
    error_code: str | None = None
    prompt_tokens: int | None = None
    estimated_tokens: int | None = None
    reported_tokens: int | None = None
    reported_limit: int | None = None
    ratio: float | None = None


class BudgetOut(BaseModel):
    context_limit: int = Field(
        description="The context window the prompt is fitted to (the bot's limit or the model's)"
    )
    response_reserve: int = Field(description="Tokens kept free for the reply")
    prompt_tokens: int

    @computed_field(description="The budget the prompt is fitted to: context_limit − response_reserve")  # type: ignore[prop-decorator]
    @property
    def budget(self) -> int:
        return self.context_limit - self.response_reserve


class EntryOut(BaseModel):
    identifier: str
    role: Role
    source: Source
    content: str
    tokens: int
    included: bool
    reason: AuditReason
    order: int
    name: str | None = None
    relevance: float | None = None
    stands_for: list[str] = Field(default_factory=list)


class HistoryCountsOut(BaseModel):
    """The chat's history that ``entries`` do not list one by one, counted in full."""

    not_loaded: int = Field(
        description="Messages older than the loaded window: left out (context-shift) without being read"
    )
    summarized: int = Field(
        description="Messages a summary stands for: stored compaction summaries (pinned messages are sent raw, not "
        "counted) and what this prompt's summarize strategy folded"
    )


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
    calibration: CalibrationOut | None = None
    history: HistoryCountsOut | None = Field(default=None, description="Null for a bot preview without a chat")


class AuditOut(PreviewOut):
    generation_id: str
    chat_id: str
    input_message_id: str | None = Field(default=None, description="The user message this generation answers")
    reply_message_id: str | None = Field(default=None, description="The stored reply (partial or whole)")
    status: AuditStatus
    error_code: str | None
    usage: UsageOut | None
    created_at: datetime
    finished_at: datetime | None
    attempts: list[AttemptOut] = Field(default_factory=list)


class PreviewRequest(Strict):
    """A preview of an existing chat (``chat_id``) or of a new chat with a bot (``bot_id``)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "anyOf": [
                {"required": ["chat_id"], "properties": {"chat_id": {"type": "string"}}},
                {"required": ["bot_id"], "properties": {"bot_id": {"type": "string"}}},
            ]
        },
    )
    chat_id: Ident | None = None
    bot_id: Ident | None = None
    user_message: Text = Field(default="", max_length=2_000_000)
    max_tokens: Reserve | None = None


# -- compaction (C4-C14) ----------------------------------------------------------------------------------


class CompactOut(BaseModel):
    status: CompactionOutcome
    summary: str | None
    message_count: int
    log_id: str | None
    #: The code of the pass that failed (with ``status`` ``completed`` when earlier passes were committed).
    error_code: str | None
    #: More about a failure: for ``COMPACTION_SUMMARY_UNFAITHFUL``, ``other-script``, ``other-language``,
    #: ``few-facts`` or ``refusal``; for a ``skipped`` run, why nothing ran (``model-unavailable``, ``cooldown``,
    #: ``running``, ``busy``, ``over-sync-reach``).
    reason: str | None = None
    passes_committed: int = 0
    passes_failed: int = 0


class CompactionLogOut(BaseModel):
    id: str
    bot_id: str
    chat_id: str
    status: CompactionStatus
    trigger: CompactionTrigger
    summary: str | None
    message_count: int
    passes: int
    started_at: datetime
    completed_at: datetime | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    error_code: str | None


class CompactionLogPage(BaseModel):
    logs: list[CompactionLogOut]
    has_more: bool


class ContextUsage(BaseModel):
    """The next prompt's size against its budget: the same figures as the preview's ``budget`` (one number)."""

    tokens: int = Field(description="The next prompt's tokens, as the preview counts them (prompt_tokens)")
    budget: int = Field(description="The budget the prompt is fitted to: the window less the reply's reserve")
    response_reserve: int = Field(description="Tokens kept free for the reply")
    window: int | None = Field(description="The model's context window (the bot's limit when set); null if unknown")
    percent: float | None = Field(description="tokens as a percentage of budget")
    estimated: bool
    calibration: CalibrationOut | None = None


class PromptCache(BaseModel):
    hit_rate: float | None
    cached_tokens: int
    input_tokens: int


class ToolUse(BaseModel):
    name: str
    count: int


class AutomaticCompaction(BaseModel):
    active: bool
    reason: CompactionOffReason | None


class StatusOut(BaseModel):
    context: ContextUsage
    prompt_cache: PromptCache
    tools_used: list[ToolUse]
    last_compaction: CompactionLogOut | None
    automatic: AutomaticCompaction


class StatusEnvelope(BaseModel):
    status: StatusOut


class SummaryOut(BaseModel):
    id: str
    content: str
    covers: list[str]
    workspaces: list[str]
    model: str | None
    created_at: datetime


class SummaryList(BaseModel):
    summaries: list[SummaryOut]
