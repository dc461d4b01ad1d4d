"""``config.sections``: each section holds only what its mode has (no placeholder mechanism for an OAUTHBEARER
upstream, no token rules without OAUTHBEARER), secrets stay unread and out of reprs until used, and the flat keys
users write still decide every value."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from kafkaguard.bootstrap import build_services
from kafkaguard.config import Listener, Settings, load_settings
from kafkaguard.config.sections import (
    LimitSettings,
    ProxySettings,
    Secret,
    Sections,
    StoreSettings,
    UpstreamOAuthBearer,
    UpstreamScram,
)
from kafkaguard.errors import InvalidConfigError
from kafkaguard.scram import ScramMechanism

OAUTH: dict[str, Any] = {
    "upstream": "kafka:9093",
    "upstream_security_protocol": "SASL_SSL",
    "upstream_sasl_mechanism": "OAUTHBEARER",
    "upstream_sasl_oauthbearer_token_endpoint_url": "https://idp.example/token",
    "upstream_sasl_oauthbearer_client_id": "kafkaguard-proxy",
    "upstream_sasl_oauthbearer_client_secret": "the-client-secret",
}

#: The upstream service user's password (a test value).
PASSWORD = {"upstream_password": "pw"}


def sections(tmp_path: Path, **overrides: Any) -> Sections:
    return Sections.of(load_settings(None, data_dir=tmp_path, **overrides))


def test_an_oauthbearer_upstream_has_no_scram_mechanism(tmp_path: Path) -> None:
    proxy = sections(tmp_path, **OAUTH).proxy
    assert isinstance(proxy.login, UpstreamOAuthBearer)
    assert not hasattr(proxy.login, "mechanism")
    assert (proxy.login.token_endpoint_url, proxy.login.client_id) == ("https://idp.example/token", "kafkaguard-proxy")
    assert proxy.login.client_secret.read() == "the-client-secret"
    assert proxy.tls is not None  # SASL_SSL
    assert "the-client-secret" not in repr(proxy)


def test_a_scram_upstream_names_its_mechanism_and_a_plaintext_one_has_no_login_nor_tls(tmp_path: Path) -> None:
    scram = sections(tmp_path, upstream="kafka:9092", upstream_security_protocol="SASL_PLAINTEXT",
                     upstream_sasl_mechanism="SCRAM-SHA-256", upstream_user="proxy", **PASSWORD).proxy  # fmt: skip
    assert isinstance(scram.login, UpstreamScram)
    assert (scram.login.mechanism, scram.login.user) == (ScramMechanism.SCRAM_SHA_256, "proxy")
    assert scram.tls is None and scram.servers == (("kafka", 9092),)
    assert "'pw'" not in repr(scram)
    plain = sections(tmp_path, upstream="kafka:9092").proxy
    assert (plain.login, plain.tls, plain.security_protocol) == (None, None, "PLAINTEXT")


def test_token_rules_exist_only_with_oauthbearer(tmp_path: Path) -> None:
    assert sections(tmp_path).identity.oauthbearer is None
    jwks = tmp_path / "jwks.json"
    identity = sections(tmp_path, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_jwks_endpoint_url=f"file:{jwks}",
                        sasl_oauthbearer_expected_audience="a, b").identity  # fmt: skip
    assert identity.oauthbearer is not None
    assert identity.oauthbearer.expected_audience == ("a", "b")
    assert identity.oauthbearer.sub_claim_name == "sub"


def test_plain_is_offered_without_tls_only_when_asked(tmp_path: Path) -> None:
    plaintext, ssl = Listener.parse("SASL_PLAINTEXT://127.0.0.1:9092"), Listener.parse("SASL_SSL://127.0.0.1:9093")
    identity = sections(tmp_path, sasl_mechanisms=["PLAIN", "SCRAM-SHA-512"]).identity
    assert identity.listener_mechanisms(plaintext) == ["SCRAM-SHA-512"]
    assert identity.listener_mechanisms(ssl) == ["PLAIN", "SCRAM-SHA-512"]
    both = sections(tmp_path, sasl_mechanisms=["PLAIN"], sasl_plain_without_tls=True).identity
    assert both.listener_mechanisms(plaintext) == ["PLAIN"]


def test_listener_tls_exists_only_with_a_certificate_and_key(tmp_path: Path) -> None:
    assert sections(tmp_path).listening.tls is None
    listening = sections(tmp_path, ssl_certfile=tmp_path / "c.pem", ssl_keyfile=tmp_path / "k.pem").listening
    assert listening.tls is not None and listening.tls.certfile == tmp_path / "c.pem"
    assert listening.listeners == (Listener.parse("SASL_PLAINTEXT://127.0.0.1:9092"),)


def test_a_secret_is_read_when_used_with_its_setting_named(tmp_path: Path) -> None:
    file = tmp_path / "secret.txt"
    file.write_text("from-the-file\r\n")
    assert Secret(None, file, "x_file").read() == "from-the-file"
    assert Secret(None, None, "x_file").read() is None
    missing = Secret(None, tmp_path / "absent", "audit_kafka_password_file")
    with pytest.raises(InvalidConfigError, match=r"audit_kafka_password_file .*absent cannot be read"):
        missing.read()
    # an unreadable file of an unused mode stops nothing: the sections build without reading it
    assert sections(tmp_path, audit_kafka_password_file=tmp_path / "absent").audit.kafka is None


def test_the_audit_sink_reaches_the_upstream_with_the_upstream_login(tmp_path: Path) -> None:
    audit = sections(tmp_path, upstream="kafka-1:9092", upstream_security_protocol="SASL_PLAINTEXT",
                     upstream_user="proxy", audit_kafka_bootstrap_servers="upstream", **PASSWORD).audit  # fmt: skip
    assert audit.kafka is not None
    client = audit.kafka.client
    assert (client.bootstrap_servers, client.sasl_mechanism, client.user) == ("kafka-1:9092", "SCRAM-SHA-512", "proxy")
    assert audit.kafka.spool_path == tmp_path / "audit-spool"


def test_the_store_password_is_given_once(tmp_path: Path) -> None:
    file = tmp_path / "pw"
    file.write_text("secret\n")
    store = StoreSettings(tmp_path, "postgresql://kg@db:5432/kg", None, file, 0.5)
    url = store.url()
    assert url is not None and url.password == "secret"  # noqa: S105 - the test's secret
    both = dataclasses.replace(store, password=SecretStr("given-twice"))
    with pytest.raises(InvalidConfigError, match="give the store password once"):
        both.url()
    assert dataclasses.replace(store, postgres=None).url() is None


def test_every_limit_is_a_flat_setting_of_the_same_value(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path, max_connections=7, refused_changes_burst=3)
    limits = LimitSettings.of(settings)
    for name in (f.name for f in dataclasses.fields(LimitSettings)):
        assert name in Settings.model_fields
        assert getattr(limits, name) == getattr(settings, name)
    assert (limits.max_connections, limits.refused_changes_burst) == (7, 3)


def test_services_carry_the_sections_of_their_settings(tmp_path: Path) -> None:
    services = build_services(load_settings(None, data_dir=tmp_path, super_users="User:ops", auto_create_topics=True))
    try:
        assert services.sections == Sections.of(services.settings)
        assert services.sections.authorization.super_users == "User:ops"
        assert services.sections.topics.auto_create_topics is True
    finally:
        services.close()


def test_a_proxy_section_of_unvalidated_oauthbearer_settings_says_what_is_missing(tmp_path: Path) -> None:
    unchecked = Settings.model_construct(**(OAUTH | {"upstream_sasl_oauthbearer_client_id": None}))
    with pytest.raises(InvalidConfigError, match="OAUTHBEARER needs a token endpoint and client id"):
        ProxySettings.of(unchecked)
