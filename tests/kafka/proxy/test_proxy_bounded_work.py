"""No logged-in client can take the proxy away from the others (issue 24, finding 2), in front of real Kafka.

Before the item budget, DescribeGroups v5 carrying ~1 million empty group names in a 1 MiB frame, from a user who
may describe no group, stalled every other client of the proxy for 10–21 s and timed out their upstream requests;
FindCoordinator v4 and DescribeTransactions with 0.5 MiB of keys stalled it 8–9 s. These tests fail on that code:
now each such request closes its own connection before its elements are walked, and the watchdog (a logged-in
client on another connection, its latency asserted loosely) is answered throughout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import GroupId, TransactionalId
from kio.static.primitive import i8

from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.server.test_bounded_work import LIMIT, Watchdog, assert_nobody_stalled
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire, encode_request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def guarded(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_proxy(tmp_path_factory.mktemp("proxy-bounded"), kafka, audit_log=None)
    handle.add_user("mallory", "mallory-secret")  # no ACLs: may describe nothing
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


HUGE = {
    "DescribeGroups v5, 1M empty names": DescribeGroupsRequest(
        groups=(GroupId(""),) * 1_000_000, include_authorized_operations=False
    ),
    "FindCoordinator v4, 100k keys": FindCoordinatorRequest(
        key_type=i8(0), coordinator_keys=tuple(f"g{i}" for i in range(100_000))
    ),
    "DescribeTransactions, 100k ids": DescribeTransactionsRequest(
        transactional_ids=tuple(TransactionalId(f"t{i}") for i in range(100_000))
    ),
}


@pytest.mark.parametrize("name", list(HUGE))
def test_a_request_beyond_the_item_limit_closes_its_connection_and_stalls_nobody(guarded: ServerHandle, name: str):
    payload = encode_request(HUGE[name], correlation_id=1)
    with Watchdog(guarded.sasl, ADMIN, ADMIN_PASSWORD) as watchdog:
        for attempt in range(3):  # each from an address of its own: a violator's address waits a second
            with Wire(
                guarded.sasl, timeout=60, source=f"127.0.{1 + list(HUGE).index(name)}.{20 + attempt}"
            ) as attacker:
                attacker.login("mallory", "mallory-secret")
                started = time.monotonic()
                attacker.send_frame(payload)
                assert attacker.recv_frame() is None  # closed, not answered
                assert time.monotonic() - started < 5
    assert_nobody_stalled(watchdog)


def test_describe_groups_within_the_limit_is_refused_per_group_and_stalls_nobody(guarded: ServerHandle):
    request = DescribeGroupsRequest(groups=tuple(GroupId(f"g{i}") for i in range(LIMIT - 1)),
                                    include_authorized_operations=False)  # fmt: skip
    with Watchdog(guarded.sasl, ADMIN, ADMIN_PASSWORD) as watchdog, Wire(guarded.sasl, timeout=60) as mallory:
        mallory.login("mallory", "mallory-secret")
        for _ in range(3):
            answer = mallory.request(request)
            assert len(answer.groups) == LIMIT - 1
            assert {group.error_code.value for group in answer.groups} == {30}  # GROUP_AUTHORIZATION_FAILED
    assert_nobody_stalled(watchdog)
