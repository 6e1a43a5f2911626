"""Every code contextshift's error envelope can carry, with its HTTP status and what it means (V1, N1).

The OpenAPI document is made from this table: the envelope's ``code`` is an enum of exactly these codes, and each
error response lists the codes of its status. ``tests/api/test_error_codes.py`` reads the package's source for
every code it can put in an envelope and fails when one is missing here, is here but raised nowhere, or is raised
with another status than the one written here. A new code: one line here, with the status it answers with.

The OpenAI-compatible endpoint (``/v1``) answers its own refusals in OpenAI's error shape, not in this envelope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One code: the HTTP status it answers with, and what it means (one line, for the OpenAPI document)."""

    status: int
    meaning: str


ERROR_CODES: Mapping[str, ErrorCode] = {
    # 400: the request cannot be read, or is not for this service
    "MALFORMED_REQUEST": ErrorCode(400, "Not valid HTTP/1.1: its request line, headers or framing cannot be read"),
    "MALFORMED_JSON": ErrorCode(400, "The body is not valid JSON"),
    "HOST_NOT_ALLOWED": ErrorCode(400, "The Host header names a host this service does not answer to"),
    "JSON_TOO_DEEP": ErrorCode(400, "The body nests arrays and objects deeper than the limit (params.limit)"),
    "TEXT_NOT_STORABLE": ErrorCode(400, "The body holds text no database stores: NUL or a lone surrogate"),
    "IMPORT_NOT_READABLE": ErrorCode(400, "The imported file is neither JSON nor JSON Lines, or nests too deeply"),
    # 401 and 429: who is calling
    "AUTH_REQUIRED": ErrorCode(401, "No token: send Authorization: Bearer <token>"),
    "AUTH_INVALID": ErrorCode(401, "The token is wrong, revoked, or its user is disabled"),
    "AUTH_RATE_LIMITED": ErrorCode(429, "Too many failed sign-ins from this address; Retry-After says when to retry"),
    # 403: not allowed
    "FORBIDDEN": ErrorCode(403, "Only an admin may do this"),
    "ORIGIN_NOT_ALLOWED": ErrorCode(403, "A change sent from another site (Origin)"),
    "CSRF_FAILED": ErrorCode(403, "A signed-in browser's change without its CSRF header"),
    # 404: not there (another user's object is not there either)
    "NOT_FOUND": ErrorCode(404, "No such route, or a path or query with a control character"),
    "BOT_NOT_FOUND": ErrorCode(404, "No bot with that id"),
    "CHAT_NOT_FOUND": ErrorCode(404, "No chat with that id"),
    "LOREBOOK_NOT_FOUND": ErrorCode(404, "No lorebook with that id"),
    "MEMORY_NOT_FOUND": ErrorCode(404, "No memory with that id among this bot's"),
    "MESSAGE_NOT_FOUND": ErrorCode(404, "No message with that id in this chat"),
    "MODEL_NOT_FOUND": ErrorCode(404, "No model with that id"),
    "PROVIDER_NOT_FOUND": ErrorCode(404, "No provider with that id"),
    "PROXY_AUDIT_NOT_FOUND": ErrorCode(404, "No audit of the OpenAI-compatible endpoint with that id"),
    "SESSION_NOT_FOUND": ErrorCode(404, "No browser session of yours with that id"),
    "TOKEN_NOT_FOUND": ErrorCode(404, "No token of yours with that id"),
    "USER_NOT_FOUND": ErrorCode(404, "No user with that id"),
    # 405, 413, 415, 431, 501: what the HTTP layer refuses
    "METHOD_NOT_ALLOWED": ErrorCode(405, "The path does not take that method; Allow lists those it takes"),
    "PAYLOAD_TOO_LARGE": ErrorCode(413, "The body is over the size limit (params.limit, in bytes)"),
    "TOO_MANY_PARTS": ErrorCode(413, "The body holds more values (members and elements) than the limit"),
    "TOO_MANY_MESSAGES": ErrorCode(413, "A /v1 request holds more messages than the limit (params.limit)"),
    "UNSUPPORTED_MEDIA_TYPE": ErrorCode(415, "A change whose body is not application/json"),
    "REQUEST_HEADERS_TOO_LARGE": ErrorCode(431, "The request line and headers together are over the limit"),
    "TRANSFER_ENCODING_NOT_IMPLEMENTED": ErrorCode(501, "A Transfer-Encoding other than chunked"),
    # 409: the current state forbids it
    "CHAT_BUSY": ErrorCode(409, "Another turn is still running in this chat; try again when it has finished"),
    "RETRY_NOT_POSSIBLE": ErrorCode(409, "retry_of names a message that is not the chat's newest, unanswered input"),
    "REDO_NOT_POSSIBLE": ErrorCode(409, "Only the chat's newest message, a reply, can be regenerated or continued"),
    "MESSAGE_NOT_EDITABLE": ErrorCode(409, "Only the text of the user's own messages can be edited"),
    "LAST_ADMIN": ErrorCode(409, "The change would leave no enabled admin"),
    "USER_NAME_TAKEN": ErrorCode(409, "Another user has that name"),
    # 422: well-formed, but a rule forbids it
    "VALIDATION": ErrorCode(422, "A field is missing or has a value it may not have (params.errors)"),
    "IMPORT_FORMAT_UNKNOWN": ErrorCode(422, "The imported file is JSON but no chat export contextshift reads"),
    "IMPORT_INVALID": ErrorCode(
        422,
        "The imported file is of a known format, but a part of it is wrong (params.where)",
    ),
    "IMPORT_EMPTY": ErrorCode(422, "The imported file holds no message to import"),
    "IMPORT_TOO_LARGE": ErrorCode(422, "The imported file holds more chats or messages than one import takes"),
    "ALTERNATIVE_NOT_FOUND": ErrorCode(422, "The message has no version with that number (params.alternatives)"),
    "TOKEN_BUDGET_EXCEEDED": ErrorCode(422, "The protected context alone does not fit the prompt budget"),
    "RESPONSE_RESERVE_TOO_LARGE": ErrorCode(422, "The reply reserve alone takes the whole context window"),
    "MODEL_NOT_CONFIGURED": ErrorCode(422, "The bot has no chat model"),
    "MODEL_NOT_CHAT": ErrorCode(422, "The bot's model is not a chat model"),
    "MODEL_DISABLED": ErrorCode(422, "The bot's chat model is disabled"),
    "PROVIDER_DISABLED": ErrorCode(422, "The chat model's provider is disabled"),
    "PROVIDER_HOST_NOT_ALLOWED": ErrorCode(422, "The provider's host is not in CONTEXTSHIFT_PROVIDER_HOSTS"),
    "compaction.model_unavailable": ErrorCode(422, "No summarizer can run compaction; params.reason says why"),
    # 500 and 503: the service
    "INTERNAL_ERROR": ErrorCode(500, "Something went wrong inside contextshift"),
    "DATABASE_BUSY": ErrorCode(503, "The database stayed busy past its timeout; Retry-After says when to retry"),
    # 502 and 504: the provider (never its own words)
    "PROVIDER_AUTH": ErrorCode(502, "The provider refused the API key"),
    "PROVIDER_RATE_LIMITED": ErrorCode(502, "The provider's rate limit"),
    "PROVIDER_UNAVAILABLE": ErrorCode(502, "The connection to the provider failed or broke off, or it is overloaded"),
    "PROVIDER_CONNECTION_REFUSED": ErrorCode(502, "The provider's address refused the connection (nothing listens)"),
    "PROVIDER_DNS_FAILED": ErrorCode(502, "The provider's host name could not be resolved (DNS)"),
    "PROVIDER_TLS_FAILED": ErrorCode(502, "The TLS handshake with the provider failed (its certificate or protocol)"),
    "PROVIDER_SERVER_ERROR": ErrorCode(502, "The provider answered with a server error (HTTP 5xx)"),
    "PROVIDER_CONTEXT_LENGTH": ErrorCode(502, "The provider refused the prompt as too long for the model"),
    "PROVIDER_BAD_REQUEST": ErrorCode(502, "The provider refused the request"),
    "EMPTY_RESPONSE": ErrorCode(502, "The provider returned an empty reply"),
    "GENERATION_FAILED": ErrorCode(502, "The provider's answer could not be used"),
    "PROVIDER_TIMEOUT": ErrorCode(504, "The provider did not answer in time"),
}


def codes_of(status: int) -> list[str]:
    """The codes that answer with ``status``, in the table's order."""
    return [code for code, entry in ERROR_CODES.items() if entry.status == status]


def reason_phrase(status: int) -> str:
    """The standard name of a status (``404`` -> ``Not Found``)."""
    return HTTPStatus(status).phrase
