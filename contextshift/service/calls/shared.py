"""One HTTP connection pool for every provider call of a service (no TLS set-up per turn), passed by constructor.

``create_app`` makes one :class:`SharedClient`, gives it to each service that calls providers (and to the server
tokenizers), opens it when the app starts and closes it when the app stops; a call asks for :attr:`client` when
it starts. No one writes the pool into another object's options.
"""

from __future__ import annotations

import httpx


class SharedClient:
    """The pool: None until :meth:`open` (then each call's client makes its own), and again after :meth:`aclose`.

    Args:
        given: a pool the caller owns (e.g. ``create_app(client_options={"http_client": ...})``): used while
            open, never closed here.
    """

    def __init__(self, given: httpx.AsyncClient | None = None) -> None:
        self._given = given
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient | None:
        """The pool for a call starting now, or None when not open."""
        return self._client

    def open(self) -> None:
        """Open the pool (the given one, else a new one); opening an open pool does nothing."""
        if self._client is None:
            self._client = self._given if self._given is not None else httpx.AsyncClient()

    async def aclose(self) -> None:
        """Close the pool this made (a given one is only let go)."""
        client, self._client = self._client, None
        if client is not None and client is not self._given:
            await client.aclose()


__all__ = ["SharedClient"]
