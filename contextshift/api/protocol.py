"""uvicorn's HTTP/1.1 protocol (h11), with what it refuses itself answered in the error envelope (V1).

uvicorn answers a request it cannot parse (a bad ``Content-Length``, a malformed request line or header, an
unsupported ``Transfer-Encoding``, a head that passes ``limits.MAX_HEAD_BYTES`` before it is whole) with a
plain-text 400 it writes itself, before any application code runs. :class:`EnvelopeH11Protocol` answers them in
the error envelope, with the status h11 hints at: 431 ``REQUEST_HEADERS_TOO_LARGE`` for a head over the limit, 501
``TRANSFER_ENCODING_NOT_IMPLEMENTED`` for a transfer coding other than chunked, else 400 ``MALFORMED_REQUEST``;
then it closes the connection, as uvicorn does. The message is our own: h11's may quote the offending header, a
token among them. ``contextshift serve`` runs uvicorn with it (``uvicorn.Config(http=EnvelopeH11Protocol)``).
A head over the limit that arrives whole reaches the application, whose limits answer it alike (``limits.py``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from .limits import MAX_HEAD_BYTES


def refusal(status: int, code: str, message: str, **params: int) -> tuple[int, bytes]:
    """A status and the envelope of a request refused before it reached the application."""
    return status, json.dumps({"error": {"code": code, "message": message, "params": params}}).encode()


#: The answer to each status h11 hints at; any other hint answers 400.
REFUSALS = {
    400: refusal(400, "MALFORMED_REQUEST", "The request is not valid HTTP/1.1 and could not be read."),
    431: refusal(
        431,
        "REQUEST_HEADERS_TOO_LARGE",
        "The request line and headers are larger than this server reads.",
        limit=MAX_HEAD_BYTES,
    ),
    501: refusal(501, "TRANSFER_ENCODING_NOT_IMPLEMENTED", "Send a body with Content-Length, or chunked."),
}


class _Connection(h11.Connection):
    """h11's connection, keeping the protocol error it raised last (uvicorn's handler does not pass it on)."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as error:
            self.refused = error
            raise


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose own refusals carry the error envelope (see the module's doc)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limit = config.h11_max_incomplete_event_size
        self.conn = _Connection(h11.SERVER, limit if limit is not None else MAX_HEAD_BYTES)

    def send_400_response(self, msg: str) -> None:
        refused = self.conn.refused if isinstance(self.conn, _Connection) else None
        hint = refused.error_status_hint if refused is not None else 400
        status, body = REFUSALS.get(hint, REFUSALS[400])
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"x-content-type-options", b"nosniff"),
        ]
        for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()
