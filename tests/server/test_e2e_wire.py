"""What only a raw socket can show: the SASL gate, ApiVersions for a newer client, the failed-login delay,
DescribeUserScramCredentials' exact bytes, and a restart on the same data directory."""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import kio.schema.metadata.v10.request as metadata_v10
import kio.schema.metadata.v11.request as metadata_v11
import pytest
import scramp  # type: ignore[import-untyped]
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.describe_user_scram_credentials.v0.response import CredentialInfo
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from kafkaguard.scram import ScramMechanism
from kafkaguard.server.versions import SERVER_VERSIONS
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import (
    Wire,
    create_acl,
    decode_api_versions_v0,
    decode_response,
    encode_request,
    frame,
    metadata,
)

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="wire-test", client_software_version="1")


def any_acl_filter() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


def advertised(response) -> dict[int, tuple[int, int]]:
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


OUR_VERSIONS = {int(key): versions for key, versions in SERVER_VERSIONS.items()}


# ------------------------------------------------------------------------------------------------ SASL gate


def test_only_api_versions_and_sasl_before_authentication(server: ServerHandle):
    with Wire(server.sasl) as wire:
        response = wire.request(api_versions_request())
        assert response.error_code.value == 0
        assert advertised(response) == OUR_VERSIONS
        wire.send_frame(encode_request(metadata_request_all(), wire.next_correlation_id()))
        assert wire.recv_frame() is None  # closed, no answer
    with Wire(server.sasl) as wire:
        wire.send_frame(encode_request(any_acl_filter(), 1))
        assert wire.recv_frame() is None
    # After the handshake but before the exchange completes, still nothing else.
    with Wire(server.sasl) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
        wire.send_frame(encode_request(any_acl_filter(), wire.next_correlation_id()))
        assert wire.recv_frame() is None
    # Once logged in, the same request is answered on the same kind of connection.
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        assert wire.request(any_acl_filter()).error_code.value == 0


def metadata_request_all() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_unsupported_mechanism_is_refused_and_closed(server: ServerHandle):
    with Wire(server.sasl) as wire:
        response = wire.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert response.error_code.value == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(response.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert wire.closed()


def test_plaintext_listener_needs_no_sasl(server: ServerHandle):
    with Wire(server.plaintext) as wire:
        # User:ANONYMOUS: answered, and refused by the authorizer, not by the SASL gate.
        assert wire.request(any_acl_filter()).error_code.value == 31


# ------------------------------------------------------------------------------------------------ ApiVersions


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_above_ours_gets_v0_unsupported_version_with_our_versions(server: ServerHandle, version):
    # A newer client's request: header v2 with a version we do not know, and a body we may not parse.
    body = encode_request(api_versions_request(), 77)
    header_end = struct.calcsize(">hhih") + len("wire-test")
    patched = struct.pack(">hhi", 18, version, 77) + body[8:header_end] + body[header_end:] + b"\x00future-field"
    with Wire(server.sasl) as wire:
        wire.send_raw(frame(patched))
        payload = wire.recv_frame()
        assert payload is not None
        correlation_id, response = decode_api_versions_v0(payload)
        assert correlation_id == 77
        assert response.error_code.value == 35  # UNSUPPORTED_VERSION
        assert advertised(response) == OUR_VERSIONS
        # The connection stays usable: the client retries with a version we offer.
        assert wire.request(api_versions_request()).error_code.value == 0


def test_unknown_api_key_closes_only_that_connection(server: ServerHandle):
    with Wire(server.sasl) as bad, Wire(server.sasl) as good:
        good.login(ADMIN, ADMIN_PASSWORD)
        bad.send_frame(struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" * 16)  # Produce: not offered
        assert bad.recv_frame() is None
        assert good.request(any_acl_filter()).error_code.value == 0


# ------------------------------------------------------------------------------------------------ failed logins


def test_failed_login_is_answered_after_100_ms_without_blocking_the_loop(tmp_path: Path, tls_files: TlsFiles):
    handle = start_server(tmp_path / "data", tls_files, auth_failure_delay_ms=100)
    try:
        with Wire(handle.sasl) as bad, Wire(handle.sasl) as other:
            assert bad.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code.value == 0
            client = scramp.ScramClient(["SCRAM-SHA-512"], ADMIN, "wrong password")
            first = bad.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
            client.set_server_first(bytes(first.auth_bytes).decode())
            final = encode_request(
                SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), bad.next_correlation_id()
            )
            # While the failure waits out its delay, another connection is served at once.
            other_latency: list[float] = []

            def ask_other() -> None:
                start = time.monotonic()
                other.request(api_versions_request())
                other_latency.append(time.monotonic() - start)

            started = time.monotonic()
            bad.send_frame(final)
            helper = threading.Thread(target=ask_other)
            helper.start()
            payload = bad.recv_frame()
            elapsed = time.monotonic() - started
            helper.join(5)
            assert payload is not None
            _, response = decode_response(payload, 36, 2)
            assert response.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
            assert response.error_message == (
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512"
            )
            assert 0.095 <= elapsed < 1.0
            assert other_latency and other_latency[0] < 0.05
            assert bad.closed()
        assert handle.server.logins.failed == 1
    finally:
        handle.stop()
    assert handle.errors == []


# ------------------------------------------------------------------------------------------------ SCRAM secrets


def test_describe_user_scram_credentials_reveals_mechanism_and_iterations_only(server: ServerHandle):
    user = unique("secret-holder")
    server.add_user(user, "correct horse battery staple", iterations=5000)
    stored = [server.services.credentials.lookup(user, mechanism) for mechanism in ScramMechanism]
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        request = DescribeUserScramCredentialsRequest(users=(UserName(name=user),))
        correlation_id = wire.next_correlation_id()
        wire.send_frame(encode_request(request, correlation_id))
        payload = wire.recv_frame()
    assert payload is not None
    for credential in stored:
        assert credential is not None
        for secret in (credential.salt, credential.stored_key, credential.server_key):
            assert secret not in payload
    _, response = decode_response(payload, 50, 0)
    assert [f.name for f in dataclasses.fields(CredentialInfo)] == ["mechanism", "iterations"]
    ((result),) = response.results
    assert (result.user, result.error_code.value) == (user, 0)
    assert {(int(i.mechanism), int(i.iterations)) for i in result.credential_infos} == {(1, 5000), (2, 5000)}


def test_scram_admin_apis_refused_without_cluster_acls(server: ServerHandle):
    user, password = unique("nobody"), "pw"
    server.add_user(user, password)
    with Wire(server.sasl) as wire:
        wire.login(user, password, "SCRAM-SHA-512")
        described = wire.request(DescribeUserScramCredentialsRequest(users=(UserName(name=user),)))
        assert described.error_code.value == 31
        assert [r.error_code.value for r in described.results] == [31]
        upsertion = ScramCredentialUpsertion(
            name=user, mechanism=i8(1), iterations=i32(4096), salt=b"salt", salted_password=b"x" * 32
        )
        altered = wire.request(AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,)))
        assert [(r.user, r.error_code.value) for r in altered.results] == [(user, 31)]
    rules = {
        (r["api"], r["rule"])
        for r in server.audit_records()
        if r["principal"] == f"User:{user}" and r["decision"] == "DENIED"
    }
    assert rules == {("DescribeUserScramCredentials", "DefaultDeny"), ("AlterUserScramCredentials", "DefaultDeny")}


# ------------------------------------------------------------------------------------------------ restart


def salted(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def test_changes_survive_a_restart(tmp_path: Path, tls_files: TlsFiles):
    data_dir = tmp_path / "data"
    user, password, topic = "restart-user", "restart-pw", "restart-topic"
    first = start_server(data_dir, tls_files)
    try:
        with Wire(first.sasl) as wire:
            wire.login(ADMIN, ADMIN_PASSWORD)
            salt = b"0123456789abcdef"
            upsertion = ScramCredentialUpsertion(
                name=user,
                mechanism=i8(1),
                iterations=i32(4096),
                salt=salt,
                salted_password=salted(password, salt, 4096),
            )
            altered = wire.request(AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,)))
            assert [(r.user, r.error_code.value) for r in altered.results] == [(user, 0)]
            # The user may describe the cluster's ACLs (and so describe its own grant after the restart).
            grant = create_acl(
                wire, resource_type=4, name="kafka-cluster", pattern_type=3, principal=f"User:{user}", operation=8
            )
            assert grant == 0
            created = wire.request(
                CreateTopicsRequest(
                    topics=(
                        CreatableTopic(
                            name=TopicName(topic),
                            num_partitions=i32(3),
                            replication_factor=i16(1),
                            assignments=(),
                            configs=(),
                        ),
                    ),
                    timeout=i32Timedelta.parse(timedelta(seconds=5)),
                    validate_only=False,
                )
            )
            ((created_topic),) = created.topics
            assert created_topic.error_code.value == 0
            topic_id = created_topic.topic_id
        cluster_id = first.server.cluster_id
    finally:
        first.stop()
    assert first.errors == []

    second = start_server(data_dir, tls_files, create_admin=False)
    try:
        assert second.server.cluster_id == cluster_id
        with Wire(second.sasl) as wire:
            wire.login(user, password)  # the credential made over the wire, before the restart
            acls = wire.request(any_acl_filter())
            assert acls.error_code.value == 0
            grants = {
                (r.resource_type, r.resource_name, a.principal, a.operation)
                for r in acls.resources
                for a in r.acls
                if a.principal == f"User:{user}"
            }
            assert grants == {(4, "kafka-cluster", f"User:{user}", 8)}
        with Wire(second.sasl) as wire:
            wire.login(ADMIN, ADMIN_PASSWORD)
            answer = metadata(wire, [topic], allow_auto_topic_creation=False)
            assert answer.cluster_id == cluster_id
            ((described),) = answer.topics
            assert (described.error_code.value, described.topic_id, len(described.partitions)) == (0, topic_id, 3)
    finally:
        second.stop()
    assert second.errors == []


# ------------------------------------------------------------------------------------------------ Metadata


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_with_topic_ids_or_null_names_is_an_invalid_request(server: ServerHandle, version):
    """Found by the fuzz test: the response's topic name is not nullable before v12, and the handler used to
    answer a lookup by id with a null name, which could not be encoded (an exception, the connection dropped)."""
    module = metadata_v10 if version == 10 else metadata_v11
    by_id = module.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)
    by_name = module.MetadataRequestTopic(topic_id=None, name=TopicName("some-topic"))
    flags = {"include_cluster_authorized_operations": False} if version == 10 else {}
    request = module.MetadataRequest(
        topics=(by_id, by_name), allow_auto_topic_creation=False, include_topic_authorized_operations=False, **flags
    )
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        response = wire.request(request)
        assert [(t.name, t.error_code.value) for t in response.topics] == [("", 42), ("some-topic", 42)]
        assert wire.request(any_acl_filter()).error_code.value == 0  # the connection is still served


def test_delete_topics_entry_without_name_or_id_is_an_invalid_request(server: ServerHandle):
    """Found by the fuzz test: an entry with a null name and the zero id reached the store as a None id (an
    exception, the connection dropped). Kafka answers INVALID_REQUEST for that entry."""
    nameless = DeleteTopicState(name=None, topic_id=uuid.UUID(int=0))
    request = DeleteTopicsRequest(topics=(nameless,), timeout=i32Timedelta.parse(timedelta(seconds=5)))
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        (result,) = wire.request(request).responses
        assert (result.name, result.error_code.value, result.error_message) == (
            None,
            42,
            "Neither topic name nor id were specified.",
        )
        assert wire.request(any_acl_filter()).error_code.value == 0
