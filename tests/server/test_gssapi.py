"""SASL/GSSAPI (Kerberos) on ``kafkaguard serve``, against the test's own KDC (``tests.kerberos``): the node's keytab
and service principal, ``sasl_kerberos_principal_to_local_rules`` (``tests.kerberos.RULES``, no DEFAULT), every
principal of ``tests.kerberos.CASES`` accepted or refused as the rules say, with the principal the audit log names;
clients: the ``gssapi`` binding driving the wire exchange by hand, and kafka-python (``sasl_mechanism="GSSAPI"``).
``tests/kafka/test_kerberos_kafka.py`` holds the same cases to the real Kafka broker."""

from __future__ import annotations

import concurrent.futures
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gssapi
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.kerberos import CASES, MAIN, RULES, SERVICE, SERVICE_HOST, SERVICE_PRINCIPAL, Kdc, kerberos_env
from tests.serving import ServerHandle, TlsFiles, start_server
from tests.wire import Wire, metadata

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.errors import KafkaError as KafkaPythonError  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

TIMEOUT = 10.0
REFUSED = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"


def gssapi_settings(kdc: Kdc) -> dict[str, Any]:
    return {
        "sasl_mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"],
        "sasl_kerberos_service_name": SERVICE,
        "sasl_kerberos_keytab": kdc.service_keytab,
        "sasl_kerberos_principal": SERVICE_PRINCIPAL,
        "sasl_kerberos_principal_to_local_rules": list(RULES),
        "advertised_host": SERVICE_HOST,
    }


@pytest.fixture(scope="module")
def kerberos_server(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles, kdc: Kdc) -> Iterator[ServerHandle]:
    with kerberos_env(kdc):
        handle = start_server(
            tmp_path_factory.mktemp("gssapi"),
            tls_files,
            listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
            ssl_certfile=None,
            ssl_keyfile=None,
            **gssapi_settings(kdc),
        )
        try:
            yield handle
        finally:
            handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def client_credentials(kdc: Kdc, principal: str, directory: Path) -> gssapi.Credentials:
    """``principal``'s TGT (kinit with its keytab) in a credential cache of its own."""
    ccache = kdc.kinit(principal, directory / f"ccache-{uuid.uuid4().hex[:8]}")
    return gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{ccache}"})


def gssapi_login(wire: Wire, credentials: gssapi.Credentials, *, mutual: bool = True) -> tuple[ErrorCode, str | None]:
    """SaslHandshake v1 + SaslAuthenticate v2 until done, the client side written here on ``gssapi`` (as Java's
    GssKrb5Client: the context, the empty token, the answer choosing no security layer)."""
    assert wire.request(SaslHandshakeRequest(mechanism="GSSAPI")).error_code == ErrorCode.none
    target = gssapi.Name(f"{SERVICE}@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
    flags = gssapi.RequirementFlag.mutual_authentication if mutual else gssapi.RequirementFlag.out_of_sequence_detection
    context = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate", flags=flags)
    token = context.step() or b""
    for _ in range(4):
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=token))
        if answer.error_code != ErrorCode.none:
            return answer.error_code, answer.error_message
        challenge = bytes(answer.auth_bytes)
        if not context.complete:
            token = context.step(challenge) or b""
        elif challenge:
            offer = context.unwrap(challenge).message
            assert offer == b"\x01\x01\x00\x00"  # no security layer, 64 KiB: Kafka's offer
            token = context.wrap(b"\x01\x00\x00\x00", False).message
        else:
            return answer.error_code, answer.error_message
    raise AssertionError("the GSSAPI exchange did not end")


def principal_of(server: ServerHandle, topic: str) -> set[str]:
    return {r["principal"] for r in server.audit_records() if r["resource_name"] == topic}


@pytest.mark.parametrize(("principal", "expected"), CASES, ids=[case[0] for case in CASES])
def test_each_principal_is_named_by_the_rules_or_refused(
    kerberos_server: ServerHandle, kdc: Kdc, tmp_path: Path, principal: str, expected: str | None
) -> None:
    with kerberos_env(kdc):
        credentials = client_credentials(kdc, principal, tmp_path)
        with Wire(kerberos_server.sasl) as wire:
            code, message = gssapi_login(wire, credentials)
            if expected is None:
                assert code == ErrorCode.sasl_authentication_failed
                assert message == (
                    f"Authentication failed: no principal for {principal} under sasl_kerberos_principal_to_local_rules"
                )
                assert wire.closed()
                return
            assert (code, message) == (ErrorCode.none, None)
            topic = f"krb-{uuid.uuid4().hex[:8]}"
            answer = metadata(wire, [topic], allow_auto_topic_creation=False)
            assert answer.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert principal_of(kerberos_server, topic) == {f"User:{expected}"}


def test_without_mutual_authentication_the_offer_comes_at_once(
    kerberos_server: ServerHandle, kdc: Kdc, tmp_path: Path
) -> None:
    with kerberos_env(kdc), Wire(kerberos_server.sasl) as wire:
        assert gssapi_login(wire, client_credentials(kdc, f"alice@{MAIN}", tmp_path), mutual=False) == (
            ErrorCode.none,
            None,
        )


def test_a_ticket_for_another_service_is_refused_with_kafkas_message(
    kerberos_server: ServerHandle, kdc: Kdc, tmp_path: Path
) -> None:
    kdc.principal(f"other/{SERVICE_HOST}@{MAIN}")
    with kerberos_env(kdc):
        credentials = client_credentials(kdc, f"alice@{MAIN}", tmp_path)
        target = gssapi.Name(f"other@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
        context = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate")
        with Wire(kerberos_server.sasl) as wire:
            assert wire.request(SaslHandshakeRequest(mechanism="GSSAPI")).error_code == ErrorCode.none
            answer = wire.request(SaslAuthenticateRequest(auth_bytes=context.step() or b""))
            assert (answer.error_code, answer.error_message) == (ErrorCode.sasl_authentication_failed, REFUSED)
            assert wire.closed()


def test_garbage_and_a_replayed_ticket_are_refused(kerberos_server: ServerHandle, kdc: Kdc, tmp_path: Path) -> None:
    with Wire(kerberos_server.sasl) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="GSSAPI")).error_code == ErrorCode.none
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=b"\x60\x05not-a-ticket"))
        assert (answer.error_code, answer.error_message) == (ErrorCode.sasl_authentication_failed, REFUSED)
    with kerberos_env(kdc):
        credentials = client_credentials(kdc, f"alice@{MAIN}", tmp_path)
        target = gssapi.Name(f"{SERVICE}@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
        ticket = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate").step() or b""
        for expected in (ErrorCode.none, ErrorCode.sasl_authentication_failed):  # the replay cache refuses a copy
            with Wire(kerberos_server.sasl) as wire:
                assert wire.request(SaslHandshakeRequest(mechanism="GSSAPI")).error_code == ErrorCode.none
                assert wire.request(SaslAuthenticateRequest(auth_bytes=ticket)).error_code == expected


def test_gssapi_is_offered_beside_scram(kerberos_server: ServerHandle) -> None:
    with Wire(kerberos_server.sasl) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="NOPE"))
        assert set(handshake.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"}


def kafka_python_admin(server: ServerHandle, timeout_ms: int = int(TIMEOUT * 1000)) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=f"{SERVICE_HOST}:{server.sasl[1]}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_service_name=SERVICE,
        request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=timeout_ms,
    )


@pytest.mark.parametrize(("principal", "expected"), [CASES[1], CASES[10], CASES[5]], ids=["main", "other", "refused"])
def test_kafka_python_logs_in_with_gssapi(
    kerberos_server: ServerHandle, kdc: Kdc, tmp_path: Path, principal: str, expected: str | None
) -> None:
    ccache = kdc.kinit(principal, tmp_path / "ccache")
    topic = f"krb-py-{uuid.uuid4().hex[:8]}"
    with kerberos_env(kdc, ccache):
        if expected is None:
            # kafka-python retries a refused login until its bootstrap times out
            with pytest.raises(KafkaPythonError, match="Unable to bootstrap"):
                kafka_python_admin(kerberos_server, timeout_ms=3000)
            assert principal_of(kerberos_server, topic) == set()
            return
        admin = kafka_python_admin(kerberos_server)
        try:
            (described,) = admin.describe_topics([topic])  # no ACL: denied, and audited with the principal
        finally:
            admin.close()
    assert described["error_code"] == ErrorCode.topic_authorization_failed
    assert principal_of(kerberos_server, topic) == {f"User:{expected}"}


def test_confluent_kafkas_wheel_has_no_gssapi() -> None:
    """The README says so: confluent-kafka's wheel bundles a librdkafka built without libsasl2, which refuses
    GSSAPI when the client is made (its own message). Use kafka-python or Kafka's Java clients for Kerberos."""
    with pytest.raises(KafkaException, match="No provider for SASL mechanism GSSAPI") as refused:
        AdminClient({"bootstrap.servers": "localhost:1", "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": SERVICE})  # fmt: skip
    assert "Current build options: PLAIN SASL_SCRAM OAUTHBEARER" in str(refused.value)


def test_refused_tickets_spend_the_failure_budget_and_waiting_ones_do_not(
    tmp_path: Path, tls_files: TlsFiles, kdc: Kdc
) -> None:
    """Three bad tickets spend an address's burst of three: the fourth login is refused unchecked, a valid ticket
    included. Many valid logins at once from one address (more than its burst) all pass."""
    with kerberos_env(kdc):
        handle = start_server(tmp_path / "budget", tls_files, listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                              ssl_certfile=None, ssl_keyfile=None, login_failures_per_address_burst=3,
                              **gssapi_settings(kdc))  # fmt: skip
        try:
            credentials = client_credentials(kdc, f"alice@{MAIN}", tmp_path)
            wires = [Wire(handle.sasl) for _ in range(8)]  # more logins under way at once than the burst
            try:
                with concurrent.futures.ThreadPoolExecutor(len(wires)) as pool:
                    logins = list(pool.map(lambda wire: gssapi_login(wire, credentials), wires))
                assert logins == [(ErrorCode.none, None)] * len(wires)
            finally:
                for wire in wires:
                    wire.close()
            for _ in range(3):
                with Wire(handle.sasl) as wire:
                    assert wire.request(SaslHandshakeRequest(mechanism="GSSAPI")).error_code == ErrorCode.none
                    answer = wire.request(SaslAuthenticateRequest(auth_bytes=b"\x60\x05not-a-ticket"))
                    assert answer.error_message == REFUSED
            with Wire(handle.sasl) as wire:
                code, message = gssapi_login(wire, credentials)
                assert code == ErrorCode.sasl_authentication_failed
                assert message is not None and message.startswith("Authentication failed: Too many failed logins")
        finally:
            handle.stop()
