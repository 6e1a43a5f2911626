"""The fake provider (an OpenAI-compatible server on a local socket) for the Agents SDK's end-to-end run."""

from tests.fakes.fixtures import fake_provider, fake_provider_server  # noqa: F401
