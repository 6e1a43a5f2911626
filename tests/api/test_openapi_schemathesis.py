"""Every operation, fuzzed by schemathesis against the OpenAPI document, over a real socket (V1).

Each operation gets its own Hypothesis run (schemathesis' pytest plugin does not load under pytest 9, so the
operations are driven directly); every default schemathesis check applies: no server errors, documented
status codes and content types, responses matching their schemas, invalid data rejected, and (the bearer scheme
being declared) a request without the admin's token refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from contextshift.api.app import create_app
from tests.api.conftest import ADMIN_TOKEN, Server, bearer

EXAMPLES_PER_OPERATION = 15


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    database = Path(tmp_path_factory.mktemp("schemathesis")) / "api.db"
    with Server(create_app(f"sqlite:///{database}", admin_token=ADMIN_TOKEN)) as url:
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_every_operation_conforms_to_the_openapi_document(api_schema: schemathesis.BaseSchema) -> None:
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 30
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=bearer(ADMIN_TOKEN))

        try:
            run()
        except Exception as error:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {error}")
    assert not failures, "\n\n".join(failures)
