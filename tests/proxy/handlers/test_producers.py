"""``proxy.handlers.producers`` (InitProducerId) against an in-memory upstream: a transactional producer with WRITE
on its transactional id, and an idempotent one with WRITE on some topic, go up as the client sent them; without it
the proxy answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED (producer id -1) and nothing
goes upstream; an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable


@pytest.fixture(autouse=True)
def producer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TRANSACTIONAL_ID, "feed-", AclOperation.WRITE)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE)


def init(transactional_id: str | None) -> Any:
    return entity(InitProducerIdRequest, transactional_id=transactional_id, producer_id=-1, producer_epoch=-1)


def given_id(api_key: ApiKey, version: int, _request: Any) -> Any:
    return answer_of(api_key, version, producer_id=1234, producer_epoch=0)


@pytest.mark.parametrize("transactional_id", ["feed-x", None])
def test_an_allowed_producer_is_relayed(services: Services, transactional_id: str | None):
    upstream = MemoryUpstream(given_id)
    handled = handle(services, upstream, init(transactional_id))
    assert_relayed(handled, upstream)
    assert int(handled.answer().producer_id) == 1234


@pytest.mark.parametrize(
    ("principal", "transactional_id", "error"),
    [
        ("User:alice", "secret-x", ErrorCode.transactional_id_authorization_failed),
        ("User:bob", None, ErrorCode.cluster_authorization_failed),  # bob may write no topic
    ],
)
def test_a_refused_producer_gets_no_id_and_nothing_goes_upstream(
    services: Services, principal: str, transactional_id: str | None, error: ErrorCode
):
    upstream = MemoryUpstream(given_id)
    handled = handle(services, upstream, init(transactional_id), principal=principal)
    assert upstream.sent == []
    answer = handled.answer()
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (error, -1, -1)


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), init("feed-x"))
