"""Client properties as kafka-acls.sh's --command-config holds them, translated to librdkafka's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaguard.cli.client import CliError, UnsupportedByClientError, client_config, load_properties, to_rd_binding
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)


def test_java_properties_with_jaas_and_pem_truststore(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# admin client\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="p\\"w;d";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/ca.pem\n"
        "ssl.truststore.password=ignored\n"
        "ssl.endpoint.identification.algorithm=\n"
        "! another comment\n",
        "utf-8",
    )
    properties = load_properties(path)
    assert properties["security.protocol"] == "SASL_SSL"
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client_config("h:9093", properties) == {
        "bootstrap.servers": "h:9093",
        "socket.timeout.ms": 10000,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": 'p"w;d',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ssl.truststore.location": "/etc/truststore.jks"}, "cannot read a JKS store"),
        ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}, "only ScramLoginModule"),
        (
            {"sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a";'},
            "username and password",
        ),
    ],
)
def test_untranslatable_properties_say_what_to_do(properties: dict[str, str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        client_config("h:9092", properties)


def test_missing_properties_file() -> None:
    with pytest.raises(CliError, match="cannot read --command-config"):
        load_properties(Path("/nonexistent/client.properties"))


def test_bindings_librdkafka_cannot_carry_are_refused() -> None:
    entry = AccessControlEntry("User:a", "*", AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)
    with pytest.raises(UnsupportedByClientError, match="resource type USER"):
        to_rd_binding(AclBinding(ResourcePattern(ResourceType.USER, "bob"), entry))
    auto = AccessControlEntry("User:a", "*", AclOperation.AUTO_CREATE, AclPermissionType.ALLOW)
    with pytest.raises(UnsupportedByClientError, match="operation AUTO_CREATE"):
        to_rd_binding(AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), auto))
