"""Where providers may point (N2, SSRF): an admin setting ``CONTEXTSHIFT_PROVIDER_HOSTS`` (comma-separated host
names; ``*.example.com`` matches its subdomains) restricts the hosts a provider's ``base_url`` may name, so the
service cannot be made to send requests, and a key, to an address of someone's choosing.

It is checked when a provider is saved and again before every call (a turn, the endpoint, a compaction pass), so
a provider saved before the setting was narrowed is refused too, before its key leaves."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from .errors import Refusal, ServiceError

PROVIDER_HOSTS_ENV = "CONTEXTSHIFT_PROVIDER_HOSTS"


def host_patterns(names: Iterable[str]) -> tuple[str, ...]:
    """The setting's host names as matched: stripped, lower case, without a trailing dot; blanks dropped."""
    return tuple(name.strip().lower().rstrip(".") for name in names if name.strip())


def _matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return host == pattern.strip("[]")


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:  # not even a URL: no allowed host can match it
        return ""


def provider_url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether the setting's ``allowed`` hosts (:func:`host_patterns`) let a provider point at ``url`` (always,
    when it is empty: not set)."""
    return not allowed or any(_matches(_host(url), pattern) for pattern in allowed)


def check_provider_url(url: str, allowed: Sequence[str]) -> None:
    """422 ``PROVIDER_HOST_NOT_ALLOWED`` (with the host and the allowed list) when the setting's ``allowed``
    hosts exclude its host."""
    if not provider_url_allowed(url, allowed):
        host = _host(url)
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "PROVIDER_HOST_NOT_ALLOWED",
            f"base_url: providers may only point at {', '.join(allowed)} ({PROVIDER_HOSTS_ENV}); "
            f"{host or 'this URL'!r} is not one of them.",
            field="base_url",
            host=host,
            allowed=list(allowed),
        )
