"""pytest fixtures for the fake provider (register them from a conftest, see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import FakeProvider


@pytest.fixture(scope="session")
def fake_provider_server() -> Iterator[FakeProvider]:
    """One fake provider server for the whole session (started on first use)."""
    with FakeProvider() as server:
        yield server


@pytest.fixture
def fake_provider(fake_provider_server: FakeProvider) -> Iterator[FakeProvider]:
    """The session's fake provider with an empty script, no recorded requests and no expected key."""
    fake_provider_server.reset()
    yield fake_provider_server
    fake_provider_server.reset()
