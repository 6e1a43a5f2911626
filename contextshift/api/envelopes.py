"""Response envelopes: every object is wrapped, ``{"provider": {...}}``, ``{"providers": [...]}``."""

from __future__ import annotations

from pydantic import BaseModel, create_model

from . import schemas as s


def one(key: str, model: type[BaseModel]) -> type[BaseModel]:
    return create_model(f"{model.__name__.removesuffix('Out')}Envelope", **{key: (model, ...)})  # type: ignore[call-overload,no-any-return]


def many(key: str, model: type[BaseModel]) -> type[BaseModel]:
    return create_model(f"{model.__name__.removesuffix('Out')}ListEnvelope", **{key: (list[model], ...)})  # type: ignore[call-overload,no-any-return,valid-type]


ProviderEnvelope = one("provider", s.ProviderOut)
ProviderList = many("providers", s.ProviderOut)
ProviderTestEnvelope = one("test", s.ProviderTestOut)
ProviderModelList = many("models", s.ProviderModelOut)
ModelEnvelope = one("model", s.ModelOut)
ModelList = many("models", s.ModelOut)
BotEnvelope = one("bot", s.BotOut)
BotList = many("bots", s.BotOut)
LorebookEnvelope = one("lorebook", s.LorebookOut)
LorebookList = many("lorebooks", s.LorebookOut)
MemoryEnvelope = one("memory", s.MemoryOut)
MemoryList = many("memories", s.MemoryOut)
ChatEnvelope = one("chat", s.ChatOut)
ChatList = many("chats", s.ChatOut)
MessageEnvelope = one("message", s.MessageOut)
MessageList = many("messages", s.MessageOut)
PreviewEnvelope = one("preview", s.PreviewOut)


class AuditEnvelope(BaseModel):
    audit: s.AuditOut | None


class Deleted(BaseModel):
    deleted: bool


class Rewound(BaseModel):
    """A chat rewound to one of its messages: how many later messages were deleted."""

    deleted: int
