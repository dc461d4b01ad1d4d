"""``protocol.routes``: a handler is registered under its API's key as itself, and an API is routed once."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.apis import STORE_HANDLERS
from kafkaguard.apis.acls import create_acls, describe_acls
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import NO_THROTTLE, build
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.messages import CREATE_ACLS, DESCRIBE_ACLS
from kafkaguard.protocol.routes import route, routes


def test_a_route_is_the_apis_key_and_the_handler_itself() -> None:
    key, handler = route(DESCRIBE_ACLS, describe_acls)
    assert key is ApiKey.DESCRIBE_ACLS
    assert handler is describe_acls  # no wrapper: dispatch calls the handler with no frame in between
    assert STORE_HANDLERS[ApiKey.DESCRIBE_ACLS] is describe_acls


def test_an_api_routed_twice_fails_at_import() -> None:
    with pytest.raises(ImportError, match=r"APIs routed twice: \['DescribeAcls'\]"):
        routes(
            route(DESCRIBE_ACLS, describe_acls), route(CREATE_ACLS, create_acls), route(DESCRIBE_ACLS, describe_acls)
        )


def test_a_response_is_read_as_its_apis_union_unchanged() -> None:
    cls = response_schema(ApiKey.DESCRIBE_ACLS, 3)
    answer = build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, resources=())
    assert DESCRIBE_ACLS.response(answer) is answer
