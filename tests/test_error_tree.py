"""One error tree (httpx's model): every exception contextshift defines derives from ContextShiftError and
has a stable code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import contextshift
from contextshift.core.errors import ContextShiftError

CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(contextshift.__path__, "contextshift."):
        if ".migrations" in module_info.name:
            continue
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("contextshift."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_error_class_derives_from_context_shift_error_and_has_a_code() -> None:
    classes = _exception_classes()
    assert len(classes) > 10
    strays = [c.__qualname__ for c in classes if not issubclass(c, ContextShiftError)]
    assert strays == []
    for cls in classes:
        code = getattr(cls, "code", None)
        assert isinstance(code, str) and (CODE.match(code) or code == "compaction.model_unavailable"), cls


def test_every_refusal_of_the_service_has_exactly_one_http_status_and_only_the_api_knows_it() -> None:
    from contextshift.api.errors import HTTP_STATUS
    from contextshift.service.errors import Refusal

    assert set(HTTP_STATUS) == set(Refusal)
    assert all(400 <= status <= 599 for status in HTTP_STATUS.values())
    # the service layer names no HTTP status: no `ServiceError(404, ...)`, no `status=` of its own errors
    service = Path(contextshift.__file__).parent / "service"
    numeric = re.compile(r"(ServiceError|super\(\)\.__init__)\(\s*\d{3}\b")
    offenders = [p.name for p in sorted(service.glob("*.py")) if numeric.search(p.read_text())]
    assert offenders == []


def test_a_refusal_reads_on_the_wire_with_its_status_and_headers() -> None:
    from contextshift.api.errors import WWW_AUTHENTICATE, http_headers, http_status
    from contextshift.service.errors import Refusal, ServiceError

    limited = ServiceError(Refusal.RATE_LIMITED, "AUTH_RATE_LIMITED", "Too many.", retry_after=7)
    assert (http_status(limited), http_headers(limited)) == (429, {"Retry-After": "7"})
    unauthenticated = ServiceError(Refusal.UNAUTHENTICATED, "AUTH_REQUIRED", "Sign in.")
    assert (http_status(unauthenticated), http_headers(unauthenticated)) == (
        401,
        {"WWW-Authenticate": WWW_AUTHENTICATE},
    )
    busy = ServiceError(Refusal.CONFLICT, "CHAT_BUSY", "Another turn runs.", chat_id="c1")
    assert (http_status(busy), http_headers(busy)) == (409, {})
