"""The proxy's upstream login by keytab (``upstream_sasl_mechanism`` GSSAPI): against a real ``kafkaguard serve``
with a GSSAPI listener and the test's own KDC, the proxy's principal logs in and is named by the upstream's rules; a
principal the upstream does not map, a service that is not the upstream's, and an unreadable keytab are refused
with messages that say so. ``tests/kafka/test_kerberos_kafka.py`` logs the proxy in to the real Kafka broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.config import load_settings
from kafkaguard.config.sections import ProxySettings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.proxy.app import upstream_security
from kafkaguard.proxy.upstream import Address, UpstreamConnection, UpstreamSecurity, UpstreamUnavailable
from tests.kerberos import MAIN, SERVICE, SERVICE_HOST, Kdc, kerberos_env
from tests.server.test_gssapi import gssapi_settings
from tests.serving import ServerHandle, TlsFiles, start_server

pytestmark = pytest.mark.integration

PROXY_PRINCIPAL = f"kafkaguard-proxy@{MAIN}"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory, kdc: Kdc) -> Iterator[ServerHandle]:
    directory = tmp_path_factory.mktemp("gssapi-upstream")
    with kerberos_env(kdc):
        handle = start_server(
            directory,
            TlsFiles(directory / "unused.pem", directory / "unused.key"),
            listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
            ssl_certfile=None,
            ssl_keyfile=None,
            super_users=f"User:admin;User:{PROXY_PRINCIPAL.partition('@')[0]}",
            **gssapi_settings(kdc),
        )
        try:
            yield handle
        finally:
            handle.stop()


def security(kdc: Kdc, principal: str, service: str = SERVICE) -> UpstreamSecurity:
    settings = load_settings(
        None,
        upstream="localhost:9092",
        upstream_security_protocol="SASL_PLAINTEXT",
        upstream_sasl_mechanism="GSSAPI",
        upstream_sasl_kerberos_service_name=service,
        upstream_sasl_kerberos_keytab=kdc.principal(principal),
        upstream_sasl_kerberos_principal=principal,
    )
    return upstream_security(ProxySettings.of(settings))


async def log_in(upstream: ServerHandle, way_in: UpstreamSecurity) -> str:
    """Log in, then ask for a topic no ACL covers: its name (the upstream audits the principal asking)."""
    connection = UpstreamConnection([Address(SERVICE_HOST, upstream.sasl[1])], way_in, timeout=10)
    topic = f"krb-proxy-{uuid.uuid4().hex[:8]}"
    try:
        await connection.connect()
        body = MetadataRequest(
            topics=(MetadataRequestTopic(name=TopicName(topic), topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        await connection.call(ApiKey.METADATA, 12, body)
    finally:
        connection.close()
    return topic


def test_the_proxy_logs_in_by_keytab_as_its_principal(upstream: ServerHandle, kdc: Kdc) -> None:
    with kerberos_env(kdc):
        topic = asyncio.run(log_in(upstream, security(kdc, PROXY_PRINCIPAL)))
    asked = {r["principal"] for r in upstream.audit_records() if r["resource_name"] == topic}
    assert asked == {"User:kafkaguard-proxy"}


def test_a_principal_the_upstream_cannot_name_is_refused(upstream: ServerHandle, kdc: Kdc) -> None:
    with kerberos_env(kdc), pytest.raises(UpstreamUnavailable, match="refused the proxy's GSSAPI login as dave/"):
        asyncio.run(log_in(upstream, security(kdc, f"dave/admin@{MAIN}")))


def test_a_service_that_is_not_the_upstreams_fails_before_the_upstream_is_asked(
    upstream: ServerHandle, kdc: Kdc
) -> None:
    with kerberos_env(kdc), pytest.raises(UpstreamUnavailable, match=r"GSSAPI login as kafkaguard-proxy@.* failed"):
        asyncio.run(log_in(upstream, security(kdc, PROXY_PRINCIPAL, service="nokafka")))


def test_an_unreadable_keytab_is_a_configuration_error(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        upstream="localhost:9092",
        upstream_security_protocol="SASL_PLAINTEXT",
        upstream_sasl_mechanism="GSSAPI",
        upstream_sasl_kerberos_service_name=SERVICE,
        upstream_sasl_kerberos_keytab=tmp_path / "missing.keytab",
        upstream_sasl_kerberos_principal=PROXY_PRINCIPAL,
    )
    with pytest.raises(InvalidConfigError, match=r"missing\.keytab cannot be read"):
        upstream_security(ProxySettings.of(settings))


def test_gssapi_upstream_settings_go_together() -> None:
    with pytest.raises(InvalidConfigError, match="needs upstream_sasl_kerberos_service_name"):
        load_settings(None, upstream="localhost:9092", upstream_security_protocol="SASL_PLAINTEXT",
                      upstream_sasl_mechanism="GSSAPI")  # fmt: skip
    with pytest.raises(InvalidConfigError, match="needs upstream_security_protocol SASL_PLAINTEXT or SASL_SSL"):
        load_settings(None, upstream="localhost:9092", upstream_sasl_mechanism="GSSAPI")
