"""The error responses every operation can give before its route runs, added to the OpenAPI document (V1).

The checks in front of the routes answer for any route, so no route has to remember them:

- every request: 400 (a foreign ``Host``; a body that is not JSON), 404 (a path or query with a control
  character), 413 (a body over the limit, even on a GET), 431 (headers over the limit), 500, 501 (a transfer
  coding other than chunked);
- a state-changing method: 403 (another site's ``Origin``, a browser change without its CSRF header) and, on the
  JSON paths, 415 (a body that is not JSON);
- the signed-in paths (``/api/``, ``/v1/``): 401 and 429 (the sign-in), and every operation that reads the
  database (all but ``database_free`` ones): 503 ``DATABASE_BUSY``;
- an operation with path, query or body parameters: 422 ``VALIDATION``; an admin-only one: 403 ``FORBIDDEN``.

What only a route knows (its 404 for an id, a 409, a business 422, a provider's 502/504) it declares itself
with ``error_responses``. On ``/v1`` every refusal comes in the shape the endpoint's SDK reads (``compat_errors``
rewrites the envelope there), so a status an operation there lacks is added in the shape of its own declared
errors; only what uvicorn's protocol refuses before any middleware runs (400, 431, 501: ``protocol.py``) can also
come in the envelope, as an alternative (``anyOf``). Elsewhere a status a route declares with another body gets
the envelope as that alternative.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from .auth import protected, require_admin
from .compat_errors import dialect_of
from .errors import ErrorEnvelope, error_response_entry
from .guard import JSON_PATHS, SAFE_METHODS

ENVELOPE_REF = {"$ref": f"#/components/schemas/{ErrorEnvelope.__name__}"}
#: FastAPI's own 422 body, which this service never sends (api/errors.py answers VALIDATION in the envelope).
FASTAPI_422 = {"$ref": "#/components/schemas/HTTPValidationError"}
#: Statuses any request can get from the layers in front of the routes.
EVERY_REQUEST = (400, 404, 413, 431, 500, 501)
#: Statuses uvicorn's protocol answers itself (protocol.py), before any middleware: in the envelope even on /v1.
PROTOCOL_REFUSALS = (400, 431, 501)


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def _validates(dependant: Dependant) -> bool:
    """Whether FastAPI checks a parameter of the operation (or of one of its dependencies): 422 ``VALIDATION``."""
    d = dependant
    own = d.path_params or d.query_params or d.header_params or d.cookie_params or d.body_params
    return bool(own) or any(_validates(sub) for sub in d.dependencies)


def refusal_statuses(path: str, route: APIRoute, method: str, *, database_free: Collection[str] = ()) -> set[int]:
    """The error statuses an operation can give whatever its route does (see the module's doc)."""
    statuses = set(EVERY_REQUEST)
    if protected(path):
        statuses |= {401, 429}
    if path not in database_free:
        statuses.add(503)
    if method not in SAFE_METHODS:
        statuses.add(403)
        if path == "/session" or path.startswith(JSON_PATHS):
            statuses.add(415)
    if _depends_on(route.dependant, require_admin):
        statuses.add(403)
    if _validates(route.dependant):
        statuses.add(422)
    return statuses


def _openapi_entry(status: int) -> dict[str, Any]:
    entry = error_response_entry(status)
    del entry["model"]
    return {**entry, "content": {"application/json": {"schema": ENVELOPE_REF}}}


def _schema(response: dict[str, Any]) -> Any:
    return response.get("content", {}).get("application/json", {}).get("schema")


def _with_envelope(declared: dict[str, Any], status: int) -> dict[str, Any]:
    """A response a route declares, which the checks in front of it can also answer in the envelope."""
    content = declared.get("content", {}).get("application/json", {})
    schema = content.get("schema")
    if schema == FASTAPI_422:
        return _openapi_entry(status)
    if schema is None or schema == ENVELOPE_REF or ENVELOPE_REF in schema.get("anyOf", ()):
        return declared
    entry = _openapi_entry(status)
    headers = {name: {**header, "required": False} for name, header in entry.get("headers", {}).items()}
    return {
        **declared,
        **({"headers": {**headers, **declared.get("headers", {})}} if headers else {}),
        "description": f"{declared.get('description', '')}; or {entry['description']}",
        "content": {"application/json": {**content, "schema": {"anyOf": [schema, ENVELOPE_REF]}}},
    }


def _compat_entry(status: int, compat: Any) -> dict[str, Any]:
    """A refusal on /v1, in the endpoint's own error shape (the envelope's codes, renamed by compat_errors)."""
    entry = _openapi_entry(status)
    return {
        **entry,
        "description": f"{entry['description']} (in this endpoint's error shape)",
        "content": {"application/json": {"schema": compat}},
    }


def _refused(responses: dict[str, Any], status: int, compat: Any) -> dict[str, Any]:
    """The response of a refusal before the route, given what the route declares for that status."""
    declared = responses.get(str(status))
    if compat is None:
        return _openapi_entry(status) if declared is None else _with_envelope(declared, status)
    if declared is None:
        response = _compat_entry(status, compat)
    else:  # the route's own answer for that status, which the refusal may also be: its headers, if any, optional
        headers = {name: {**h, "required": False} for name, h in _openapi_entry(status).get("headers", {}).items()}
        response = {**declared, **({"headers": {**headers, **declared.get("headers", {})}} if headers else {})}
    return _with_envelope(response, status) if status in PROTOCOL_REFUSALS else response


def add_refusals(
    document: dict[str, Any], routes: Iterable[tuple[str, BaseRoute]], *, database_free: Collection[str] = ()
) -> dict[str, Any]:
    """``document`` with every operation's refusals (see the module's doc) among its responses, in status order.

    ``routes`` are the app's routes, each with the prefix it is served under.
    """
    paths: dict[str, Any] = document.get("paths", {})
    for prefix, route in routes:
        path = prefix + route.path_format if isinstance(route, APIRoute) else None
        if not isinstance(route, APIRoute) or not route.include_in_schema or path not in paths:
            continue
        for method in route.methods or ():
            operation = paths[path].get(method.lower())
            if operation is None:
                continue
            responses: dict[str, Any] = operation.setdefault("responses", {})
            # on /v1, the shape of the operation's own declared errors (compat_errors rewrites the envelope)
            compat = None
            if dialect_of(path) is not None:
                declared = [_schema(r) for code, r in sorted(responses.items()) if code >= "400"]
                compat = next((d for d in declared if d is not None and d != ENVELOPE_REF), None)
            for status in refusal_statuses(path, route, method, database_free=database_free):
                responses[str(status)] = _refused(responses, status, compat)
            operation["responses"] = dict(sorted(responses.items()))
    schemas = document.get("components", {}).get("schemas", {})
    if '"#/components/schemas/HTTPValidationError"' not in json.dumps(paths):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
    return document
