"""The limits of every provider call, in one place (N5): the provider's timeout and the call's total deadline.

Every caller (a chat turn, an endpoint call, a compaction pass, a provider test) sends through
:mod:`.engine`, which builds each client here, so each honours:

- the provider's ``timeout_seconds`` as the longest wait for bytes (connect at most 10 s), unless the service
  was given ``timeouts`` of its own (the tests' short ones);
- a total deadline, :data:`DEADLINE_FACTOR` times ``timeout_seconds``, that every attempt, every pause before
  a retry and the one resend after a context-length refit share: a :class:`Deadline` is made when the call
  starts and each client made for it gets only the time that is left.

A client made after the deadline has none left: its first attempt fails at once with ``PROVIDER_TIMEOUT``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from ...providers import ProviderClient, Timeouts

#: A call's total deadline, as a multiple of the provider's ``timeout_seconds``.
DEADLINE_FACTOR = 5.0


class HasTimeout(Protocol):
    """What a call needs to know of a provider: its kind, address, key and ``timeout_seconds``."""

    @property
    def kind(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    @property
    def api_key(self) -> str | None: ...

    @property
    def timeout_seconds(self) -> int: ...


class Deadline:
    """The moment by which a whole call (every attempt of it) must have ended; None: no deadline."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    @classmethod
    def for_provider(cls, timeout_seconds: float, factor: float = DEADLINE_FACTOR) -> Deadline:
        """A deadline ``factor`` times the provider's ``timeout_seconds`` from now."""
        return cls(timeout_seconds * factor)

    def remaining(self) -> float | None:
        """Seconds left (never below 0), or None without a deadline."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())


def call_timeouts(timeout_seconds: float, options: Mapping[str, Any], deadline: Deadline | None) -> Timeouts:
    """The timeouts of one client of a call: the service's own ``options["timeouts"]`` or the provider's
    ``timeout_seconds``, with a total of no more than what is left of ``deadline``.

    Args:
        timeout_seconds: the provider's ``timeout_seconds``.
        options: the service's client options (``timeouts`` there wins over the provider's).
        deadline: the call's deadline (None: only the timeouts' own total).

    Returns:
        The :class:`~contextshift.providers.Timeouts` to build the client with.
    """
    given = options.get("timeouts")
    base = given if isinstance(given, Timeouts) else Timeouts.for_provider(timeout_seconds)
    left = deadline.remaining() if deadline is not None else None
    if left is None:
        return base
    return replace(base, total=left if base.total is None else min(base.total, left))


def open_client(
    factory: Callable[..., ProviderClient],
    options: Mapping[str, Any],
    provider: HasTimeout,
    deadline: Deadline | None = None,
) -> ProviderClient:
    """A client for ``provider`` with its timeouts and what is left of ``deadline`` (see the module docstring).

    Args:
        factory: builds the client (``make_client`` or a test's).
        options: the service's client options (a shared ``http_client``, ``retry``, ``timeouts``...).
        provider: the provider row (or a form's values) to call.
        deadline: the call's deadline; None makes one from the provider's ``timeout_seconds``.

    Returns:
        The client; the caller closes it.
    """
    if deadline is None:
        deadline = Deadline.for_provider(provider.timeout_seconds)
    chosen = {**options, "timeouts": call_timeouts(provider.timeout_seconds, options, deadline)}
    return factory(provider.kind, provider.base_url, provider.api_key, **chosen)


__all__ = ["DEADLINE_FACTOR", "Deadline", "HasTimeout", "call_timeouts", "open_client"]
