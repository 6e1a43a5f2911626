"""Testing a provider's connection and reading its model list, for the provider and model forms (V3).

Both make the one call every kind supports and that costs nothing: ``GET`` of the provider's model list. It
proves the address (DNS, a listening port), TLS, the key and a working server at once, and each way it can
fail has its own code (``PROVIDER_CONNECTION_REFUSED``, ``PROVIDER_DNS_FAILED``, ``PROVIDER_TLS_FAILED``,
``PROVIDER_TIMEOUT``, ``PROVIDER_SERVER_ERROR``, ``PROVIDER_AUTH``...) and contextshift's own words: nothing the
provider said, and never the key, reaches the answer or a log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ..providers import ListedModel, ProviderClient, ProviderError
from ..providers.base import PROVIDER_BAD_REQUEST
from .calls import Calls, Deadline
from .provider_hosts import check_provider_url

log = logging.getLogger("contextshift.service")

#: Seconds a connection test waits at most, whatever the provider's own ``timeout_seconds``: a form's answer.
CHECK_TIMEOUT_MAX = 15


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to call a provider: saved, or the values of a form not yet saved."""

    kind: str
    base_url: str
    api_key: str | None
    timeout_seconds: int


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What a connection test met: ``ok`` with how many models the provider lists, or the failure's code, the
    provider's HTTP status when it answered one, and contextshift's message."""

    ok: bool
    code: str | None = None
    message: str = "Connected: the provider answered."
    status: int | None = None
    models: int | None = None


async def list_models(
    endpoint: Endpoint,
    factory: Callable[..., ProviderClient],
    options: Mapping[str, Any],
    provider_hosts: Sequence[str],
) -> list[ListedModel]:
    """The provider's models, one call without retries (``provider_hosts``: the setting's allowed hosts).

    Raises:
        ProviderError: why the provider could not be asked (its code names the cause).
        ServiceError: 422 ``PROVIDER_HOST_NOT_ALLOWED`` when the base URL's host is not allowed.
    """
    check_provider_url(endpoint.base_url, provider_hosts)
    deadline = Deadline(min(endpoint.timeout_seconds, CHECK_TIMEOUT_MAX))  # N5: one try, within this
    try:
        return await Calls(factory, dict(options)).list_models(endpoint, deadline)
    except ProviderError:
        raise
    except (ValueError, TypeError, httpx.HTTPError):  # a URL or key httpx cannot send (e.g. a non-ASCII key)
        raise ProviderError(
            PROVIDER_BAD_REQUEST, "The provider could not be asked: its base URL or API key cannot be sent as given."
        ) from None


async def check(
    endpoint: Endpoint,
    factory: Callable[..., ProviderClient],
    options: Mapping[str, Any],
    provider_hosts: Sequence[str],
) -> CheckResult:
    """A connection test: the model list asked for once, its failure reported, not raised.

    Raises:
        ServiceError: 422 ``PROVIDER_HOST_NOT_ALLOWED`` (the call is not made).
    """
    try:
        models = await list_models(endpoint, factory, options, provider_hosts)
    except ProviderError as error:
        log.info("provider test (%s): %s, status %s", endpoint.kind, error.code, error.status)
        return CheckResult(False, error.code, error.message, error.status)
    return CheckResult(True, models=len(models))
