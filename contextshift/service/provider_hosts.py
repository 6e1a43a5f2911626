"""Where providers may point (N2, SSRF): an admin setting ``CONTEXTSHIFT_PROVIDER_HOSTS`` (comma-separated host
names; ``*.example.com`` matches its subdomains) restricts the hosts a provider's ``base_url`` may name, so the
service cannot be made to send requests, and a key, to an address of someone's choosing.

It is checked when a provider is saved and again before every call (a turn, the endpoint, a compaction pass), so
a provider saved before the setting was narrowed is refused too, before its key leaves."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from .errors import Refusal, ServiceError

PROVIDER_HOSTS_ENV = "CONTEXTSHIFT_PROVIDER_HOSTS"


def allowed_provider_hosts() -> list[str]:
    raw = os.environ.get(PROVIDER_HOSTS_ENV, "")
    return [part.strip().lower().rstrip(".") for part in raw.split(",") if part.strip()]


def _matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return host == pattern.strip("[]")


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:  # not even a URL: no allowed host can match it
        return ""


def provider_url_allowed(url: str) -> bool:
    """Whether the setting lets a provider point at ``url`` (always, when it is not set)."""
    allowed = allowed_provider_hosts()
    return not allowed or any(_matches(_host(url), pattern) for pattern in allowed)


def check_provider_url(url: str) -> None:
    """422 ``PROVIDER_HOST_NOT_ALLOWED`` (with the host and the allowed list) when the setting excludes its host."""
    if not provider_url_allowed(url):
        allowed, host = allowed_provider_hosts(), _host(url)
        raise ServiceError(
            Refusal.UNPROCESSABLE,
            "PROVIDER_HOST_NOT_ALLOWED",
            f"base_url: providers may only point at {', '.join(allowed)} ({PROVIDER_HOSTS_ENV}); "
            f"{host or 'this URL'!r} is not one of them.",
            field="base_url",
            host=host,
            allowed=allowed,
        )
