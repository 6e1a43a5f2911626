"""The fake provider for the service's own tests (a real socket; see tests/fakes)."""

from tests.fakes.fixtures import fake_provider, fake_provider_server  # noqa: F401
