"""Fixtures of the provider tests: the fake provider and a factory of real clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import pytest

from contextshift.providers import ProviderClient, RetryPolicy, Timeouts, make_client
from tests.fakes.fixtures import fake_provider, fake_provider_server
from tests.fakes.server import FakeProvider

API_KEY = "sk-test-CLIENT-KEY-456"

__all__ = ["API_KEY", "ClientFactory", "fake_provider", "fake_provider_server"]


class ClientFactory(Protocol):
    def __call__(
        self,
        kind: str,
        *,
        api_key: str | None = ...,
        retries: int = ...,
        read_timeout: float = ...,
        base_url: str | None = ...,
        retry_after_cap: float = ...,
    ) -> ProviderClient: ...


@pytest.fixture
async def client_for(fake_provider: FakeProvider) -> AsyncIterator[ClientFactory]:
    """``client_for(kind, ...)``: a real client on the fake, fast backoff, closed after the test."""
    clients: list[ProviderClient] = []

    def factory(
        kind: str,
        *,
        api_key: str | None = API_KEY,
        retries: int = 2,
        read_timeout: float = 5.0,
        base_url: str | None = None,
        retry_after_cap: float = 30.0,
    ) -> ProviderClient:
        client = make_client(
            kind,
            base_url or fake_provider.base_url,
            api_key,
            timeouts=Timeouts(connect=2.0, read=read_timeout),
            retry=RetryPolicy(retries=retries, backoff_base=0.01, backoff_max=0.05, retry_after_cap=retry_after_cap),
        )
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.aclose()
