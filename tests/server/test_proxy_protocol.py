"""The PROXY protocol behind a load balancer: through a relay that prepends v1 and v2 headers, host ACLs, connection
limits and the audit use the address the header carries; the same header from an untrusted address is refused; a
hostile header closes only its own connection."""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaguard.audit.records.refusals import RefusalReason
from tests.node.proxy_relay import V2_SIGNATURE, ProxyRelay, encode_v1, encode_v2
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import Wire, create_acl, metadata

pytestmark = pytest.mark.integration

CLIENT = ("203.0.113.7", 40000)
OTHER_CLIENT = ("198.51.100.9", 50000)
API_VERSIONS_V0 = b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff"


@pytest.fixture(scope="module")
def behind_balancer(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    handle = start_server(
        tmp_path_factory.mktemp("proxy-protocol"),
        tls_files,
        proxy_protocol="required",
        trusted_proxies=["127.0.0.1/32"],
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def topic_with_host_acl(server: ServerHandle, user: str, host: str) -> str:
    """A topic ``user`` may describe only from ``host`` (created by the admin through a relay from the client)."""
    topic = f"pp-{uuid.uuid4().hex[:8]}"
    with ProxyRelay(server.sasl, version=2, source=CLIENT) as relay, Wire(("127.0.0.1", relay.port)) as admin:
        admin.login(ADMIN, ADMIN_PASSWORD)
        metadata(admin, [topic])
        code = create_acl(admin, resource_type=2, name=topic, pattern_type=3, principal=f"User:{user}",
                          operation=8, host=host)  # fmt: skip
        assert code == 0
    return topic


def sees(relay_port: int, user: str, password: str, topic: str) -> bool:
    with Wire(("127.0.0.1", relay_port)) as wire:
        wire.login(user, password)
        return bool(metadata(wire, [topic], allow_auto_topic_creation=False).topics[0].error_code == 0)


@pytest.mark.parametrize("version", [1, 2])
def test_host_acls_decide_on_the_carried_address(behind_balancer: ServerHandle, version: int) -> None:
    user = f"pp-user-{uuid.uuid4().hex[:6]}"
    behind_balancer.add_user(user, "pp-secret")
    topic = topic_with_host_acl(behind_balancer, user, CLIENT[0])
    with ProxyRelay(behind_balancer.sasl, version=version, source=CLIENT) as relay:
        assert sees(relay.port, user, "pp-secret", topic)
    with ProxyRelay(behind_balancer.sasl, version=version, source=OTHER_CLIENT) as relay:
        assert not sees(relay.port, user, "pp-secret", topic)
    hosts = {r["host"] for r in behind_balancer.audit_records() if r["resource_name"] == topic}
    assert hosts == {CLIENT[0], OTHER_CLIENT[0]}  # never the balancer's 127.0.0.1


def test_tls_behind_the_balancer(behind_balancer: ServerHandle) -> None:
    """The header comes before the TLS handshake (as load balancers send it)."""
    context = ssl.create_default_context(cafile=str(behind_balancer.tls.certfile))
    topic = f"pp-tls-{uuid.uuid4().hex[:8]}"
    with (
        ProxyRelay(behind_balancer.sasl_ssl, version=2, source=CLIENT) as relay,
        Wire(("127.0.0.1", relay.port), tls=context) as wire,
    ):
        wire.login(ADMIN, ADMIN_PASSWORD)
        metadata(wire, [topic], allow_auto_topic_creation=False)
    assert {r["host"] for r in behind_balancer.audit_records() if r["resource_name"] == topic} == {CLIENT[0]}


def refused(server: ServerHandle) -> int:
    counts = server.services.refusals.counts()
    return sum(n for key, n in counts.items() if key.reason == RefusalReason.PROXY_PROTOCOL.value)


def test_an_untrusted_address_is_refused_before_anything_is_read(behind_balancer: ServerHandle) -> None:
    before = refused(behind_balancer)
    with Wire(behind_balancer.sasl, source="127.0.0.2") as wire:  # not a trusted proxy
        wire.send_raw(encode_v2(CLIENT, ("127.0.0.1", 9092)) + API_VERSIONS_V0)
        assert wire.closed()
    assert refused(behind_balancer) == before + 1


def test_no_header_from_the_trusted_proxy_is_refused_when_required(behind_balancer: ServerHandle) -> None:
    before = refused(behind_balancer)
    with Wire(behind_balancer.sasl) as wire:
        wire.send_raw(len(API_VERSIONS_V0).to_bytes(4, "big") + API_VERSIONS_V0)
        assert wire.recv_frame() is None
    assert refused(behind_balancer) == before + 1


HOSTILE = {
    "bad_signature": V2_SIGNATURE[:-1] + b"X" + b"\x21\x11\x00\x0c" + bytes(12),
    "bad_version": V2_SIGNATURE + b"\x31\x11\x00\x0c" + bytes(12),
    "oversized": V2_SIGNATURE + b"\x21\x11\xff\xff" + bytes(64),
    "short_block": V2_SIGNATURE + b"\x21\x11\x00\x04" + bytes(4),
    "tlv_overrun": V2_SIGNATURE + b"\x21\x11\x00\x10" + bytes(12) + b"\x04\x00\x20\x00",
    "v1_garbage": b"PROXY TCP4 not-an-address 10.0.0.1 1 2\r\n",
    "v1_no_crlf": b"PROXY TCP4 " + b"9" * 200,
}


@pytest.mark.parametrize("header", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_header_closes_only_its_connection(behind_balancer: ServerHandle, header: str) -> None:
    with (
        ProxyRelay(behind_balancer.sasl, version=2, source=CLIENT) as good,
        Wire(("127.0.0.1", good.port)) as watchdog,
    ):
        watchdog.login(ADMIN, ADMIN_PASSWORD)
        with Wire(behind_balancer.sasl) as hostile:
            hostile.send_raw(HOSTILE[header] + API_VERSIONS_V0)
            assert hostile.recv_frame() is None
        assert metadata(watchdog, []).topics is not None  # the other connection is served on


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300), st.booleans())
def test_fuzzed_headers_never_hurt_the_server(behind_balancer: ServerHandle, garbage: bytes, v2_prefix: bool) -> None:
    data = (V2_SIGNATURE + garbage) if v2_prefix else (b"PROXY " + garbage)
    sock = socket.create_connection(behind_balancer.sasl, timeout=5)
    try:
        sock.sendall(data + API_VERSIONS_V0)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(4096):  # whatever it answers (a valid header then ApiVersions), it ends the connection
            pass
    except OSError:
        pass
    finally:
        sock.close()
    with Wire(behind_balancer.sasl, source="127.0.0.1") as probe:  # still serving: a good header is answered
        probe.send_raw(
            encode_v1(CLIENT, ("127.0.0.1", 9092)) + len(API_VERSIONS_V0).to_bytes(4, "big") + API_VERSIONS_V0
        )
        assert probe.recv_frame() is not None


def test_connection_limits_count_the_carried_address(tmp_path: Path, tls_files: TlsFiles) -> None:
    handle = start_server(
        tmp_path,
        tls_files,
        proxy_protocol="optional",
        trusted_proxies=["127.0.0.1"],
        max_connections_per_ip=1,
    )
    try:
        with (
            ProxyRelay(handle.sasl, source=CLIENT) as one,
            ProxyRelay(handle.sasl, source=OTHER_CLIENT) as other,
            Wire(("127.0.0.1", one.port)) as first,
            Wire(("127.0.0.1", other.port)) as second,
        ):
            first.login(ADMIN, ADMIN_PASSWORD)
            second.login(ADMIN, ADMIN_PASSWORD)  # another carried address: its own limit
            with Wire(("127.0.0.1", one.port)) as third:  # a second from CLIENT: over its limit
                third.send_raw(len(API_VERSIONS_V0).to_bytes(4, "big") + API_VERSIONS_V0)
                assert third.recv_frame() is None
        # optional: an untrusted address is served under its own address, and its header is not believed
        with Wire(handle.sasl, source="127.0.0.2") as direct:
            direct.login(ADMIN, ADMIN_PASSWORD)
        with Wire(handle.sasl, source="127.0.0.3") as spoofing:
            spoofing.send_raw(encode_v2(CLIENT, ("127.0.0.1", 1)) + API_VERSIONS_V0)
            assert spoofing.recv_frame() is None
    finally:
        handle.stop()
    assert handle.errors == []


def test_a_local_command_uses_the_balancers_own_address(tmp_path: Path, tls_files: TlsFiles) -> None:
    """A v2 LOCAL header (the balancer's health check) and v1 UNKNOWN: the socket's address stands."""
    handle = start_server(tmp_path, tls_files, proxy_protocol="required", trusted_proxies=["127.0.0.0/8"])
    try:
        for header in (encode_v2(None, local=True), encode_v1(None)):
            with ProxyRelay(handle.sasl, header=header) as relay, Wire(("127.0.0.1", relay.port)) as wire:
                wire.login(ADMIN, ADMIN_PASSWORD)
                topic = f"pp-local-{uuid.uuid4().hex[:6]}"
                metadata(wire, [topic], allow_auto_topic_creation=False)
                hosts = {r["host"] for r in handle.audit_records() if r["resource_name"] == topic}
                assert hosts == {"127.0.0.1"}
    finally:
        handle.stop()
