"""Failed sign-ins slow down (N2): a client (by address) whose tokens keep failing is refused for a while.

Every wrong token (bearer, cookie, login URL or sign-in page) counts against its client in a moving window
(the ``limits`` library, in memory: per process). Over the limit, the client's next attempts are refused with
429 ``AUTH_RATE_LIMITED`` and ``Retry-After`` before any token is looked at. The log says so, with the client's
address and never the token.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import Request

from ..service.errors import Refusal, ServiceError

log = logging.getLogger("contextshift.auth")

#: How many failed sign-ins a client may make before it is refused for the rest of the window.
DEFAULT_LIMIT = "20/minute"


class LoginLimiter:
    """Counts failed sign-ins per client and refuses a client over ``limit`` (e.g. ``"20/minute"``)."""

    def __init__(self, limit: str = DEFAULT_LIMIT) -> None:
        self.item: RateLimitItem = parse(limit)
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    @staticmethod
    def client(request: Request) -> str:
        return request.client.host if request.client is not None else "unknown"

    def check(self, request: Request) -> None:
        """Raise 429 ``AUTH_RATE_LIMITED`` when this client has failed too often lately."""
        client = self.client(request)
        if self.limiter.test(self.item, client):
            return
        stats = self.limiter.get_window_stats(self.item, client)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        log.warning("too many failed sign-ins from %s: its attempts are refused for %d s", client, wait)
        raise ServiceError(
            Refusal.RATE_LIMITED,
            "AUTH_RATE_LIMITED",
            f"Too many failed sign-ins from this address; try again in {wait} s.",
            retry_after=wait,
        )

    def failed(self, request: Request) -> None:
        """Count one failed sign-in of this client and log it (its address, never the token)."""
        client = self.client(request)
        self.limiter.hit(self.item, client)
        log.info("failed sign-in from %s", client)
