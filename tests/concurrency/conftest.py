from tests.api.conftest import fake, service
from tests.databases import backend, pg_database
from tests.fakes.fixtures import fake_provider, fake_provider_server

__all__ = ["backend", "fake", "fake_provider", "fake_provider_server", "pg_database", "service"]
