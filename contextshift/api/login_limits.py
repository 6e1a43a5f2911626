"""Failed sign-ins slow down (N2): a client (by address) whose tokens keep failing is refused for a while.

Every wrong token (bearer, cookie, login URL or sign-in page) counts against its client in a moving window
(the ``limits`` library). The counts live in memory, per process, unless ``CONTEXTSHIFT_LOGIN_LIMIT_STORAGE``
names a shared store (``redis://host:6379/0``, needs the ``redis`` package: the ``redis`` extra), so that
instances behind one proxy count together. Over the limit, the client's next wrong tokens are refused with
429 ``AUTH_RATE_LIMITED`` and ``Retry-After``, while a valid token is still accepted: a token has 256 random
bits, so the limit only has to slow guessing, and one noisy client behind a shared address must not lock
everyone else out (docs/limits.md). The client is the peer address; forwarded headers count only from the
proxies ``serve --forwarded-allow-ips`` names. The log says so, with the client's address and never the token.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from starlette.requests import Request

from ..service.errors import Refusal, ServiceError

log = logging.getLogger("contextshift.auth")

#: How many failed sign-ins a client may make before it is refused for the rest of the window.
DEFAULT_LIMIT = "20/minute"
#: Where the counts live: ``memory://`` (this process) or a ``redis://`` URL shared by every instance.
STORAGE_ENV = "CONTEXTSHIFT_LOGIN_LIMIT_STORAGE"
DEFAULT_STORAGE = "memory://"


def async_storage_uri(uri: str) -> str:
    """The ``limits`` async storage URI for a plain one (``redis://…`` -> ``async+redis://…``)."""
    return uri if uri.startswith("async+") else f"async+{uri}"


class LoginLimiter:
    """Counts failed sign-ins per client and refuses a client over ``limit`` (e.g. ``"20/minute"``)."""

    def __init__(self, limit: str = DEFAULT_LIMIT, storage: str = DEFAULT_STORAGE, namespace: str = "login") -> None:
        self.item: RateLimitItem = parse(limit)
        self.namespace = namespace  # the instances that count together share it
        options = {"implementation": "redispy"} if "redis" in storage.split("://", 1)[0] else {}
        self.limiter = MovingWindowRateLimiter(storage_from_string(async_storage_uri(storage), **options))

    @staticmethod
    def client(request: Request) -> str:
        return request.client.host if request.client is not None else "unknown"

    async def check(self, request: Request) -> None:
        """Raise 429 ``AUTH_RATE_LIMITED`` when this client has failed too often lately."""
        client = self.client(request)
        if await self.limiter.test(self.item, self.namespace, client):
            return
        stats = await self.limiter.get_window_stats(self.item, self.namespace, client)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        log.warning("too many failed sign-ins from %s: its attempts are refused for %d s", client, wait)
        raise ServiceError(
            Refusal.RATE_LIMITED,
            "AUTH_RATE_LIMITED",
            f"Too many failed sign-ins from this address; try again in {wait} s.",
            retry_after=wait,
        )

    async def failed(self, request: Request) -> None:
        """Count one failed sign-in of this client and log it (its address, never the token)."""
        client = self.client(request)
        await self.limiter.hit(self.item, self.namespace, client)
        log.info("failed sign-in from %s", client)
