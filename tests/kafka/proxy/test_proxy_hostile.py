"""The security issue's hostile-length fuzz against the proxy's listener: every hostile frame of every API and
version the proxy offers closes that connection, the proxy keeps serving, and nothing of it reaches the upstream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.server.hostile import hostile_bodies
from tests.server.test_hostile_lengths import answered_or_closed, header
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire, frame


@pytest.fixture(scope="module")
def guarded(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_proxy(tmp_path_factory.mktemp("proxy-hostile"), kafka, audit_log=None)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def offered(proxy: ServerHandle) -> list[tuple[int, int]]:
    versions = proxy.server.versions  # type: ignore[attr-defined]
    return [(int(key), v) for key, (low, high) in sorted(versions.items()) for v in range(low, high + 1)]


def connect(proxy: ServerHandle, *, login: bool) -> Wire:
    wire = Wire(proxy.sasl)
    if login:
        wire.login(ADMIN, ADMIN_PASSWORD)
    return wire


def alive(watchdog: Wire) -> None:
    answer = watchdog.request(ApiVersionsRequest(client_software_name="watchdog", client_software_version="1"))
    assert answer.error_code.value == 0


@pytest.mark.parametrize("login", [False, True], ids=["before-login", "after-login"])
def test_hostile_lengths_close_the_connection_and_never_reach_the_upstream(
    guarded: ServerHandle, upstream_requests: list[bytes], login: bool
):
    apis = offered(guarded)
    assert (0, 11) in apis and (1, 12) in apis, "Produce v11 and Fetch v12 are offered, so they are fuzzed"
    assert {(1, 17), (20, 6), (75, 0)} <= set(apis), "Fetch v17, DeleteTopics v6, DescribeTopicPartitions too"
    kip848 = {(68, 0), (69, 0), (8, 9), (9, 9)}  # ConsumerGroupHeartbeat/Describe v0, OffsetCommit/OffsetFetch v9
    assert kip848 <= set(apis), f"the KIP-848 APIs are offered (broker configured for them): {kip848 - set(apis)}"
    watchdog = connect(guarded, login=True)
    sent = 0
    for api_key, version in apis:
        for label, body in hostile_bodies(load_request_schema(api_key, version)):
            forwarded = len(upstream_requests)
            with connect(guarded, login=login) as wire:
                wire.send_raw(frame(header(api_key, version) + body))
                outcome = answered_or_closed(wire)
            sent += 1
            # An empty body may be a valid request (ListGroups v0-2 has no fields): it may be answered, and forwarded.
            if label != "empty body":
                assert outcome == "closed", f"API {api_key} v{version} {label}: {outcome}"
                assert len(upstream_requests) == forwarded, f"API {api_key} v{version} {label} reached the upstream"
        alive(watchdog)
    watchdog.close()
    assert sent > 5 * len(apis)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), body=st.binary(max_size=64), login=st.booleans())
def test_random_bytes_after_a_valid_header_never_crash_the_proxy(guarded: ServerHandle, data: Any, body: bytes,
                                                                 login: bool) -> None:  # fmt: skip
    api = data.draw(st.sampled_from(offered(guarded)))
    with connect(guarded, login=login) as wire:
        wire.send_raw(frame(header(*api) + body))
        answered_or_closed(wire)
    with connect(guarded, login=True) as watchdog:
        alive(watchdog)
