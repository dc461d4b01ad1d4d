"""``proxy.scope``: the upstream's answer is read as the scope's own API only."""

from __future__ import annotations

from typing import cast

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.proxy.builders import list_groups_response
from kafkaguard.proxy.messages import LIST_GROUPS, LIST_TRANSACTIONS
from kafkaguard.proxy.scope import Forwarded, ProxyScope


class FakeScope:
    api_key, api_version = ApiKey.LIST_GROUPS, 4


def _forwarded() -> Forwarded:
    cls = response_schema(ApiKey.LIST_GROUPS, 4)
    answer = list_groups_response(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=())
    payload = encode_response(ApiKey.LIST_GROUPS, 4, 9, answer)[4:]  # after the frame's size
    return Forwarded(cast(ProxyScope, FakeScope()), payload)


def test_the_answer_is_decoded_as_the_scopes_api() -> None:
    answer = _forwarded().body(LIST_GROUPS)
    assert type(answer) is response_schema(ApiKey.LIST_GROUPS, 4)
    assert (answer.error_code, answer.groups) == (ErrorCode.none, ())


def test_reading_it_as_another_api_is_a_bug_of_the_handler() -> None:
    with pytest.raises(TypeError, match="a ListGroups answer read as ListTransactions's"):
        _forwarded().body(LIST_TRANSACTIONS)
