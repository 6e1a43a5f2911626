"""Users (admins manage them), the caller (``/me``), the caller's own API tokens and browser sessions (N2).

A token's secret is in the response that makes it, and never again: only its hash is stored. A browser session
belongs to the API token that opened it: revoking that token ends its sessions at once; ``GET /sessions``
lists the caller's unexpired sessions and ``DELETE /sessions/{id}`` ends one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ...service.errors import Refusal, ServiceError, not_found
from ...storage import NameTaken, Repositories
from ...storage.tables import ApiTokenRow, UserRow
from ...storage.types import utcnow
from ..auth import Admin, Caller
from ..created import locate, located
from ..deps import Repos, SessionLength
from ..envelopes import Deleted
from ..errors import error_responses
from ..schemas import Required, TokenStrategy

router = APIRouter(tags=["users and tokens"], responses=error_responses(400, 422, 500))

#: At least one non-space character (the same pattern as every other name: JSON Schema's and Python's spaces differ).
UserName = Annotated[Required, Field(min_length=1, max_length=100)]
TokenName = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00]*$")]
Role = Literal["admin", "user"]


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: UserName
    role: Role = "user"


class UserPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: UserName | None = None
    role: Role | None = None
    disabled: bool | None = None


class UserOut(BaseModel):
    id: str
    name: str
    role: Role
    disabled: bool
    created_at: datetime


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: TokenName = Field(default="", description="What the token is for, e.g. the script that uses it")
    context_strategy: TokenStrategy | None = None


class TokenPatch(BaseModel):
    """Fields to change; ``context_strategy: null`` clears it (the model's setting, else truncate, applies)."""

    model_config = ConfigDict(extra="forbid")
    name: TokenName | None = None
    context_strategy: TokenStrategy | None = None


class TokenOut(BaseModel):
    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    context_strategy: str | None


class TokenEnvelope(BaseModel):
    token: TokenOut


class UserEnvelope(BaseModel):
    user: UserOut


class UserList(BaseModel):
    users: list[UserOut]


class NewUser(BaseModel):
    user: UserOut
    token: str = Field(description="The new user's first token; shown this once")


class NewToken(BaseModel):
    token: TokenOut
    secret: str = Field(description="The token itself; shown this once")


class TokenList(BaseModel):
    tokens: list[TokenOut]


class BrowserSessionOut(BaseModel):
    id: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime = Field(description="When the session ends unless it is ended sooner")
    opened_by: str | None = Field(description="The id of the API token the session was opened with")
    opened_by_name: str | None = Field(description="That token's name")
    current: bool = Field(description="This request came with this session's cookie")


class BrowserSessionList(BaseModel):
    sessions: list[BrowserSessionOut]


def user_view(row: UserRow) -> UserOut:
    return UserOut(id=row.id, name=row.name, role=row.role, disabled=row.disabled, created_at=row.created_at)  # type: ignore[arg-type]


def token_view(row: ApiTokenRow) -> TokenOut:
    return TokenOut(
        id=row.id,
        name=row.name,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        context_strategy=row.context_strategy,
    )


def _name_taken(error: NameTaken) -> ServiceError:
    return ServiceError(Refusal.CONFLICT, error.code, error.message, field="name")


async def _keep_an_admin(repos: Repositories, row: UserRow, changes: dict[str, Any] | None) -> None:
    """409 ``LAST_ADMIN`` when the change (or deletion, ``changes`` None) would leave no enabled admin."""
    if row.role != "admin" or row.disabled:
        return
    leaves = changes is None or changes.get("role") == "user" or changes.get("disabled") is True
    if leaves and await repos.users.active_admins() <= 1:
        raise ServiceError(Refusal.CONFLICT, "LAST_ADMIN", "This is the only enabled admin; make another admin first.")


@router.get("/me", response_model=UserEnvelope)
async def me(principal: Caller, repos: Repos) -> dict[str, Any]:
    row = await repos.users.get(principal.user_id)
    if row is None:  # deleted while this request ran
        raise not_found("user", principal.user_id)
    return {"user": user_view(row)}


@router.post(
    "/users",
    status_code=status.HTTP_201_CREATED,
    response_model=NewUser,
    responses={**error_responses(403, 409), **located("get_user")},
)
async def create_user(
    body: UserCreate, _admin: Admin, repos: Repos, request: Request, response: Response
) -> dict[str, Any]:
    try:
        row = await repos.users.create(name=body.name, role=body.role)
    except NameTaken as error:
        raise _name_taken(error) from error
    issued = await repos.tokens.issue(row.id, name="first token")
    locate(request, response, "get_user", user_id=row.id)
    return {"user": user_view(row), "token": issued.secret}


@router.get("/users", response_model=UserList, responses=error_responses(403))
async def list_users(_admin: Admin, repos: Repos) -> dict[str, Any]:
    return {"users": [user_view(r) for r in await repos.users.list_all()]}


@router.get("/users/{user_id}", response_model=UserEnvelope, responses=error_responses(403, 404))
async def get_user(user_id: str, _admin: Admin, repos: Repos) -> dict[str, Any]:
    row = await repos.users.get(user_id)
    if row is None:
        raise not_found("user", user_id)
    return {"user": user_view(row)}


@router.patch("/users/{user_id}", response_model=UserEnvelope, responses=error_responses(403, 404, 409))
async def patch_user(user_id: str, body: UserPatch, _admin: Admin, repos: Repos) -> dict[str, Any]:
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    row = await repos.users.get(user_id)
    if row is None:
        raise not_found("user", user_id)
    await _keep_an_admin(repos, row, changes)
    try:
        updated = await repos.users.update(user_id, changes)
    except NameTaken as error:
        raise _name_taken(error) from error
    if updated is None:
        raise not_found("user", user_id)
    return {"user": user_view(updated)}


@router.delete("/users/{user_id}", response_model=Deleted, responses=error_responses(403, 404, 409))
async def delete_user(user_id: str, _admin: Admin, repos: Repos) -> dict[str, Any]:
    row = await repos.users.get(user_id)
    if row is None:
        raise not_found("user", user_id)
    await _keep_an_admin(repos, row, None)
    await repos.users.delete(user_id)
    return {"deleted": True}


@router.post("/tokens", status_code=status.HTTP_201_CREATED, response_model=NewToken)
async def create_token(body: TokenCreate, principal: Caller, repos: Repos) -> dict[str, Any]:
    issued = await repos.tokens.issue(principal.user_id, name=body.name, context_strategy=body.context_strategy)
    return {"token": token_view(issued.token), "secret": issued.secret}


@router.patch("/tokens/{token_id}", response_model=TokenEnvelope, responses=error_responses(404))
async def update_token(token_id: str, body: TokenPatch, principal: Caller, repos: Repos) -> dict[str, Any]:
    """Rename one of the caller's API tokens or set its context strategy for ``/v1``."""
    changes = body.model_dump(exclude_unset=True)
    if changes.get("name", "") is None:
        del changes["name"]
    row = await repos.tokens.update(principal.user_id, token_id, changes)
    if row is None:
        raise not_found("token", token_id)
    return {"token": token_view(row)}


@router.get("/tokens", response_model=TokenList)
async def list_tokens(principal: Caller, repos: Repos) -> dict[str, Any]:
    return {"tokens": [token_view(r) for r in await repos.tokens.list_for(principal.user_id)]}


@router.delete("/tokens/{token_id}", response_model=Deleted, responses=error_responses(404))
async def revoke_token(token_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    if not await repos.tokens.revoke(principal.user_id, token_id):
        raise not_found("token", token_id)
    return {"deleted": True}


@router.get("/sessions", response_model=BrowserSessionList)
async def list_sessions(principal: Caller, repos: Repos, lifetime: SessionLength) -> dict[str, Any]:
    """The caller's browser sessions that have not expired, newest first (never their secrets)."""
    rows = await repos.tokens.sessions_for(principal.user_id, utcnow() - lifetime)
    return {
        "sessions": [
            BrowserSessionOut(
                id=row.id,
                created_at=row.created_at,
                last_used_at=row.last_used_at,
                expires_at=row.created_at + lifetime,
                opened_by=row.opened_by,
                opened_by_name=opener,
                current=row.id == principal.token_id,
            )
            for row, opener in rows
        ]
    }


@router.delete("/sessions/{session_id}", response_model=Deleted, responses=error_responses(404))
async def end_session(session_id: str, principal: Caller, repos: Repos) -> dict[str, Any]:
    """End one of the caller's browser sessions at once (its cookie signs no one in any more)."""
    if not await repos.tokens.revoke(principal.user_id, session_id, kind="session"):
        raise not_found("session", session_id)
    return {"deleted": True}
