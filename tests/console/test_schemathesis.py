"""Schemathesis against the console's own ``/openapi.json`` over HTTP, as an authenticated admin (a super user):
no 5xx and no response that breaks the documented schema or content type, for every operation, with valid
(positive) and invalid (negative) inputs. Examples are bounded and derandomized, so every run checks the same
cases. (Schemathesis' lazy pytest loader does not run under pytest 9, so each operation's strategy is driven by
hypothesis directly.)"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

from tests.console.conftest import ADMIN, ADMIN_PASSWORD, ConsoleHandle, start_console

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{ADMIN}:{ADMIN_PASSWORD}".encode()).decode()}
OPERATIONS = [
    ("GET", "/api/acls"),
    ("POST", "/api/acls"),
    ("DELETE", "/api/acls"),
    ("GET", "/api/users"),
    ("PUT", "/api/users/{name}"),
    ("DELETE", "/api/users/{name}"),
    ("POST", "/api/authorize"),
    ("GET", "/api/groups"),
    ("POST", "/api/groups/{name}/members"),
    ("DELETE", "/api/groups/{name}/members/{principal}"),
    ("DELETE", "/api/groups/{name}"),
    ("GET", "/api/access/principal"),
    ("GET", "/api/access/resource"),
    ("GET", "/api/history"),
    ("GET", "/api/denials"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
]
EXAMPLES = {GenerationMode.POSITIVE: 100, GenerationMode.NEGATIVE: 50}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    handle = start_console(tmp_path_factory.mktemp("fuzzed"))
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


@pytest.fixture(scope="module")
def api_schema(fuzzed: ConsoleHandle) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json")


def test_every_operation_is_fuzzed(api_schema: schemathesis.BaseSchema) -> None:
    documented = set()
    for result in api_schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an Err would raise here: the schema is invalid
        documented.add((operation.method.upper(), operation.path))
    assert documented == set(OPERATIONS)


#: Operations without parameters or a body have no invalid input to generate.
_NO_INPUT = {("GET", "/api/users"), ("GET", "/api/groups"), ("GET", "/healthz"), ("GET", "/metrics")}
CASES = [
    pytest.param(method, path, mode, id=f"{method} {path} {mode.value}")
    for method, path in OPERATIONS
    for mode in EXAMPLES
    if mode is GenerationMode.POSITIVE or (method, path) not in _NO_INPUT
]


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_the_api_keeps_its_documented_contract(
    api_schema: schemathesis.BaseSchema, fuzzed: ConsoleHandle, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES[mode],
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    def run(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(
            base_url=fuzzed.url,
            headers=AUTH,
            checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
        )

    run()
