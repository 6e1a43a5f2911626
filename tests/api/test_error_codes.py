"""The error codes the OpenAPI document lists are exactly the codes the service can put in its error envelope
(V1, N1), each with the status it answers with.

The document's ``ErrorBody.code`` enum comes from ``contextshift/api/error_codes.py``. This test does not copy that
list: it reads the package's own source (every module's syntax tree, names resolved in the imported module) for
each code it raises, and where the raise says so, with which status:

- a call whose callee takes a ``code`` parameter (``ServiceError(Refusal.CONFLICT, "CHAT_BUSY", ...)``,
  ``ProviderError(PROVIDER_TIMEOUT, ...)``, ``envelope(404, "NOT_FOUND", ...)``): the code, and the status from its
  ``kind`` (through ``api.errors.HTTP_STATUS``) or its ``status``;
- a call of an error class that has its code as a class attribute (``TokenBudgetExceeded(...)``), with the status
  ``api.errors.error_status`` gives that class;
- the computed ``<KIND>_NOT_FOUND`` of ``not_found("chat", ...)`` and ``NotFound("chat", ...)``, made by calling them;
- a literal envelope ``{"error": {"code": ...}}``.

A code passed on from a variable (another error's ``.code``) is read where it was first raised. A code that is
raised but never reaches the envelope (a stream event, an audit, the OpenAI-shaped ``/v1``, start-up) is listed in
``NOT_IN_THE_ENVELOPE`` below with the reason. So a new code fails here until it is documented, with a message
saying where it is raised and what to add.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from starlette.exceptions import HTTPException

import contextshift
from contextshift.api.app import create_app
from contextshift.api.error_codes import ERROR_CODES
from contextshift.api.errors import HTTP_STATUS, error_status
from contextshift.api.limits import BodyTooLarge
from contextshift.core.errors import ContextShiftError
from contextshift.service.errors import Refusal, ServiceError, not_found
from contextshift.storage import NotFound
from tests.api.conftest import ADMIN_TOKEN, Server

ROOT = Path(contextshift.__file__).parent
#: The factories that build a code from their first argument (``"chat"`` -> ``CHAT_NOT_FOUND``).
COMPUTED: tuple[Callable[..., ContextShiftError], ...] = (not_found, NotFound)
#: Codes the package raises that never reach the error envelope, and why.
NOT_IN_THE_ENVELOPE = {
    "INVALID_REQUEST": "the OpenAI-compatible endpoint's refusal, answered in OpenAI's error shape",
    "CONTEXT_LENGTH_EXCEEDED": "the OpenAI-compatible endpoint's refusal, answered in OpenAI's error shape",
    "ADMIN_TOKEN_TOO_WEAK": "refused at start-up (CONTEXTSHIFT_ADMIN_TOKEN), before the service answers anything",
    "SECRET_KEY_INVALID": "refused at start-up (CONTEXTSHIFT_SECRET_KEY), before the service answers anything",
    "EMBEDDINGS_NOT_INSTALLED": "refused at start-up (CONTEXTSHIFT_EMBEDDINGS): create_app loads the model first",
    "UNKNOWN_EMBEDDINGS": "refused at start-up (CONTEXTSHIFT_EMBEDDINGS): create_app loads the model first",
    "EMBEDDINGS_CORRUPT": "refused at start-up (CONTEXTSHIFT_EMBEDDINGS): create_app loads the model first",
    "UNKNOWN_CONTEXT_STRATEGY": "the strategy host falls back to truncate (core/host.py)",
    "PLUGIN_FAILED": "the interceptor host skips a failing interceptor (pipeline/interceptors.py)",
    "COMPACTION_INPUT_TOO_LARGE": "a compaction pass records it in its log (service/compaction.py)",
    "JOB_CHAT_BUSY": "a background job's attempt error, kept with the attempt and shown by GET /api/v2/jobs (jobs/)",
    "JOB_FAILED": "tells the job engine an attempt failed; the attempt's own code is what is kept (jobs/engine.py)",
    "INTEGRATION_NOT_INSTALLED": "a library user's ImportError (contextshift.integrations.*); the service imports none",
    "TOKENIZER_TEMPLATE_INVALID": "the tokenizer falls back to its plain framing (tokenizers/__init__.py)",
    "TOKENIZER_SERVER_FAILED": "server token counts fall back to the local estimate (tokenizers/server.py)",
    "UNKNOWN_PROVIDER_KIND": "a provider's kind is checked against the same list when it is saved (VALIDATION)",
}


@dataclass(frozen=True)
class Raised:
    """A code raised in the source, with the status the raise gives it (None when the raise does not say)."""

    code: str
    status: int | None
    where: str


def _own_code(cls: type) -> str | None:
    """The code a class (or a base below ``ContextShiftError``) sets as a class attribute."""
    for base in cls.__mro__:
        if base is ContextShiftError:
            return None
        if isinstance(base.__dict__.get("code"), str):
            return str(base.__dict__["code"])
    return None


def _is_code(value: object) -> bool:
    """An envelope code: ``UPPER_SNAKE``, or dotted like ``compaction.model_unavailable`` (OpenAI's are neither)."""
    return isinstance(value, str) and (value.replace("_", "").isupper() or "." in value) and " " not in value


class Scanner(ast.NodeVisitor):
    """Finds the codes one module raises (see the module's doc)."""

    def __init__(self, module: ModuleType, relative: str) -> None:
        self.namespace = vars(module)
        self.relative = relative
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.raised: list[Raised] = []
        self.computed: list[str] = []  # codes built at run time outside COMPUTED

    # -- resolving names in the module --------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.namespace.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.resolve(node.value)
            return getattr(owner, node.attr, None) if owner is not None else None
        return None

    def annotated_class(self, name: str) -> type | None:
        """The class a parameter of the enclosing functions is annotated with."""
        for function in reversed(self.functions):
            for arg in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
                if arg.arg == name and arg.annotation is not None:
                    annotation = arg.annotation
                    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                        annotation = ast.parse(annotation.value, mode="eval").body
                    found = self.resolve(annotation)
                    return found if isinstance(found, type) else None
        return None

    def code_of(self, node: ast.expr) -> list[str]:
        """The codes an expression can stand for; none when it is passed on from elsewhere."""
        if isinstance(node, ast.JoinedStr):
            self.computed.append(self.where(node))
            return []
        if isinstance(node, ast.IfExp):
            return self.code_of(node.body) + self.code_of(node.orelse)
        value = self.resolve(node)
        if isinstance(value, str):
            return [value]
        if isinstance(node, ast.Name):  # a local variable: the literals assigned to it in the enclosing function
            return [code for assigned in self.assigned(node.id) for code in self.code_of(assigned)]
        if isinstance(node, ast.Attribute) and node.attr == "code" and isinstance(node.value, ast.Name):
            # another error's code: readable only when the parameter's class has one code (a class without subclasses)
            cls = self.annotated_class(node.value.id)
            if cls is not None and not cls.__subclasses__() and isinstance(cls.__dict__.get("code"), str):
                return [str(cls.__dict__["code"])]
        return []

    def assigned(self, name: str) -> list[ast.expr]:
        """What the enclosing function assigns to a local name."""
        if not self.functions:
            return []
        return [
            node.value
            for node in ast.walk(self.functions[-1])
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ]

    def where(self, node: ast.AST) -> str:
        return f"{self.relative}:{getattr(node, 'lineno', 0)}"

    def add(self, codes: list[str], status: int | None, node: ast.AST) -> None:
        self.raised += [Raised(code, status, self.where(node)) for code in codes if _is_code(code)]

    # -- the walk --------------------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "error" and isinstance(value, ast.Dict):
                for inner_key, inner in zip(value.keys, value.values, strict=True):
                    if isinstance(inner_key, ast.Constant) and inner_key.value == "code":
                        self.add(self.code_of(inner), None, inner)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        callee = self.resolve(node.func)
        if callee is None or not callable(callee):
            return
        if callee in COMPUTED:
            self.add_computed(callee, node)
            return
        if isinstance(callee, type) and issubclass(callee, HTTPException) and callee is not BodyTooLarge:
            self.raised.append(Raised("<HTTPException>", None, self.where(node)))
            return
        arguments = self.bind(callee, node)
        if arguments is None:
            return
        if isinstance(callee, type) and issubclass(callee, ContextShiftError):
            self.add_error(callee, arguments, node)
        elif "code" in arguments:
            self.add(self.code_of(arguments["code"]), self.literal_status(arguments), node)

    def add_error(self, cls: type[ContextShiftError], arguments: dict[str, ast.expr], node: ast.Call) -> None:
        """An error made here: its code and status, read from a real instance when every argument is a constant."""
        values = {name: self.resolve(a) for name, a in arguments.items()}
        if all(v is not None for v in values.values()):
            try:
                error = cls(**values)
            except Exception:
                error = None
            if error is not None:
                self.add([error.code], error_status(error), node)
                return
        if "code" in arguments:
            codes = self.code_of(arguments["code"])
        elif not issubclass(cls, ServiceError) and _own_code(cls) is not None:
            codes = [str(_own_code(cls))]
        else:
            return
        for code in codes:
            self.add([code], self.status_of(cls, code, arguments), node)

    def bind(self, callee: Any, node: ast.Call) -> dict[str, ast.expr] | None:
        """The call's argument expressions by parameter name; None when they cannot be told apart."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None
        try:
            signature = inspect.signature(callee)
        except (TypeError, ValueError):
            return None
        markers = [object() for _ in node.args]
        keywords = {k.arg: object() for k in node.keywords if k.arg is not None}
        try:
            bound = signature.bind_partial(*markers, **keywords)
        except TypeError:
            return None
        by_marker = {id(m): a for m, a in zip(markers, node.args, strict=True)}
        by_marker |= {id(keywords[k.arg]): k.value for k in node.keywords if k.arg is not None}
        return {name: by_marker[id(value)] for name, value in bound.arguments.items() if id(value) in by_marker}

    def literal_status(self, arguments: dict[str, ast.expr]) -> int | None:
        for name in ("status", "status_code"):
            value = self.resolve(arguments[name]) if name in arguments else None
            if isinstance(value, int):
                return value
        return None

    def status_of(self, cls: type[ContextShiftError], code: str, arguments: dict[str, ast.expr]) -> int | None:
        """The status ``api.errors.error_status`` gives an error of this class, code and kind."""
        error = cls.__new__(cls)
        error.code = code
        if isinstance(error, ServiceError):
            kind = self.resolve(arguments["kind"]) if "kind" in arguments else None
            if not isinstance(kind, Refusal):
                return None  # a subclass that sets its kind itself: its own call is read
            error.kind = kind
        return error_status(error)

    def add_computed(self, factory: Callable[..., ContextShiftError], node: ast.Call) -> None:
        values = [self.resolve(a) for a in node.args]
        if not values or not isinstance(values[0], str):
            self.computed.append(self.where(node))
            return
        error = factory(values[0], *["x" for _ in values[1:]])
        self.add([error.code], error_status(error), node)


def scan() -> tuple[list[Raised], list[str]]:
    """Every code the package raises, and the places that build one at run time outside ``COMPUTED``."""
    raised: list[Raised] = []
    computed: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):  # every module (contextshift.api has no __init__: walk the files)
        relative = path.relative_to(ROOT.parent)
        if "migrations" in relative.parts:  # alembic's scripts: run by alembic, never in a request
            continue
        module = importlib.import_module(".".join(relative.with_suffix("").parts).removesuffix(".__init__"))
        scanner = Scanner(module, str(relative))
        scanner.visit(ast.parse(path.read_text(encoding="utf-8")))
        raised += scanner.raised
        computed += scanner.computed
    return raised, computed


@pytest.fixture(scope="module")
def raised() -> dict[str, list[Raised]]:
    found, _computed = scan()
    by_code: dict[str, list[Raised]] = defaultdict(list)
    for one in found:
        by_code[one.code].append(one)
    return dict(by_code)


def test_every_code_the_service_raises_is_documented_and_every_documented_code_is_raised(
    raised: dict[str, list[Raised]],
) -> None:
    problems = [
        f"{code} is raised ({', '.join(r.where for r in sites[:3])}) but contextshift/api/error_codes.py does not "
        f'list it: add `"{code}": ErrorCode({_status_hint(sites)}, "<what it means>"),` to ERROR_CODES (or, if '
        "it never reaches the error envelope, add it to NOT_IN_THE_ENVELOPE in tests/api/test_error_codes.py with "
        "the reason)"
        for code, sites in sorted(raised.items())
        if code not in ERROR_CODES and code not in NOT_IN_THE_ENVELOPE and code != "<HTTPException>"
    ]
    problems += [
        f"{code} is in ERROR_CODES (contextshift/api/error_codes.py) but nothing raises it: remove it there"
        for code in ERROR_CODES
        if code not in raised
    ]
    assert not problems, "\n".join(problems)


def _status_hint(sites: list[Raised]) -> str:
    statuses = {r.status for r in sites if r.status is not None}
    return str(statuses.pop()) if len(statuses) == 1 else "<its HTTP status>"


def test_each_code_answers_with_the_status_the_document_gives_it(raised: dict[str, list[Raised]]) -> None:
    wrong = [
        f"{code} answers {site.status} at {site.where}, but ERROR_CODES says {ERROR_CODES[code].status}"
        for code, sites in sorted(raised.items())
        if code in ERROR_CODES
        for site in sites
        if site.status is not None and site.status != ERROR_CODES[code].status
    ]
    assert not wrong, "\n".join(wrong)


def test_the_codes_kept_out_of_the_envelope_are_raised_and_not_documented(raised: dict[str, list[Raised]]) -> None:
    assert not set(NOT_IN_THE_ENVELOPE) & set(ERROR_CODES)
    stale = sorted(set(NOT_IN_THE_ENVELOPE) - set(raised))
    assert not stale, f"nothing raises {stale} any more: remove them from NOT_IN_THE_ENVELOPE"


def test_no_code_is_built_at_run_time_where_this_test_cannot_read_it() -> None:
    _raised, computed = scan()
    inside = [w for w in computed if any(w.startswith(_relative(f)) for f in COMPUTED)]
    outside = sorted(set(computed) - set(inside))
    assert not outside, (
        "a code built at run time (an f-string) cannot be checked against the document: write it as a literal, "
        f"or add its factory to COMPUTED in tests/api/test_error_codes.py: {outside}"
    )


def _relative(function: Callable[..., Any]) -> str:
    return str(Path(str(inspect.getsourcefile(function))).relative_to(ROOT.parent))


def test_no_route_raises_a_framework_http_exception(raised: dict[str, list[Raised]]) -> None:
    sites = [r.where for r in raised.get("<HTTPException>", [])]
    assert not sites, (
        f"{sites}: an HTTPException answers 500 INTERNAL_ERROR (its code would be outside the document); raise a "
        "ServiceError with a Refusal and a code listed in contextshift/api/error_codes.py instead"
    )


def test_the_scan_sees_the_codes_of_each_kind_of_raise(raised: dict[str, list[Raised]]) -> None:
    """The reader itself: each way of raising a code is found, with its status."""

    def statuses(code: str) -> set[int | None]:
        return {r.status for r in raised[code]}

    assert statuses("CHAT_BUSY") == {HTTP_STATUS[Refusal.CONFLICT]}  # ServiceError(kind, code constant)
    assert statuses("TOKEN_BUDGET_EXCEEDED") == {422}  # a class with its code
    assert statuses("PROVIDER_TIMEOUT") == {504} and statuses("PROVIDER_AUTH") == {502}  # ProviderError(code)
    assert statuses("CHAT_NOT_FOUND") == {404} and "PROXY_AUDIT_NOT_FOUND" in raised  # not_found / NotFound
    assert statuses("USER_NAME_TAKEN") == {409}  # a class with its code, and passed on as another error's code
    assert statuses("AUTH_REQUIRED") == {401}  # a ServiceError subclass called with literals
    assert 400 in statuses("HOST_NOT_ALLOWED") and 413 in statuses("PAYLOAD_TOO_LARGE")  # envelopes written out
    assert None in statuses("CSRF_FAILED")  # a literal envelope whose status is set elsewhere
    assert statuses("REQUEST_HEADERS_TOO_LARGE") == {431}  # uvicorn's protocol refusals
    assert statuses("compaction.model_unavailable") == {422}


# -- the document -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    database = tmp_path_factory.mktemp("codes") / "api.db"
    with Server(create_app(f"sqlite:///{database}", admin_token=ADMIN_TOKEN)) as url:
        yield httpx.get(f"{url}/openapi.json", timeout=20).json()


def test_the_documents_code_enum_is_the_table_of_codes(document: dict[str, Any]) -> None:
    code = document["components"]["schemas"]["ErrorBody"]["properties"]["code"]
    assert code["type"] == "string"
    assert code["enum"] == list(ERROR_CODES)
    for name, entry in ERROR_CODES.items():  # a reader finds each code's status and meaning beside it
        assert f"- `{name}` ({entry.status}): {entry.meaning}" in code["description"]


def test_each_error_response_names_the_codes_of_its_status(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation.get("responses", {}).items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if schema != {"$ref": "#/components/schemas/ErrorEnvelope"}:
                    continue
                listed = {c for c, e in ERROR_CODES.items() if e.status == int(status)}
                assert listed, f"{method.upper()} {path} documents {status}, a status no code answers with"
                for code in listed:
                    assert f"`{code}`" in response["description"], (method, path, status, code)
