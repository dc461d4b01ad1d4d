"""The audit trail's sink and routing settings: a bad one stops the start with a message that says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaguard.audit.trail.from_settings import audit_trail, producer_config
from kafkaguard.config import load_settings
from kafkaguard.config.sections import AuditSettings
from kafkaguard.errors import InvalidConfigError


def settings(tmp_path: Path, **overrides: object):
    return load_settings(None, data_dir=tmp_path, **overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"audit_kafka_routes": [{"category": "billing", "topic": "t"}]},
         "audit_kafka_routes: route 1: unknown category 'billing'"),
        ({"audit_kafka_routes": [{"category": "authorization", "topic": "bad name"}]},
         "is not a Kafka topic name"),
        ({"audit_kafka_topic": "a/b"}, "audit_kafka_topic: topic name 'a/b' is not a Kafka topic name"),
        ({"audit_kafka_bootstrap_servers": "kafka:9092", "audit_kafka_security_protocol": "SASL_SSL"},
         "needs audit_kafka_user and a password"),
        ({"audit_kafka_bootstrap_servers": "kafka:9092", "audit_kafka_security_protocol": "SASL_SSL",
          "audit_kafka_user": "audit"}, "audit_kafka_user needs a password"),
        ({"audit_kafka_bootstrap_servers": "upstream"}, "'upstream' needs upstream"),
        ({"audit_kafka_bootstrap_servers": "kafka"}, "audit_kafka_bootstrap_servers: upstream server 'kafka'"),
    ],
)  # fmt: skip
def test_bad_sink_settings_say_what_to_fix(tmp_path: Path, overrides: dict[str, object], message: str):
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(")):
        settings(tmp_path, **overrides)


def test_the_producer_reaches_the_upstream_with_its_login(tmp_path: Path):
    loaded = settings(tmp_path, upstream="kafka-1:9092", upstream_security_protocol="SASL_PLAINTEXT",
                      upstream_user="proxy", upstream_password="proxy-secret",  # noqa: S106 - a test value
                      audit_kafka_bootstrap_servers="upstream")  # fmt: skip
    kafka = AuditSettings.of(loaded).kafka
    assert kafka is not None
    assert producer_config(kafka.client) == {"bootstrap.servers": "kafka-1:9092", "security.protocol": "sasl_plaintext",
                                       "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "proxy",
                                       "sasl.password": "proxy-secret"}  # fmt: skip
    assert "proxy-secret" not in repr(loaded)


def test_an_unwritable_spool_directory_refuses_the_start(tmp_path: Path):
    (tmp_path / "blocker").write_text("a file, not a directory")
    loaded = settings(tmp_path, audit_kafka_bootstrap_servers="127.0.0.1:1",
                      audit_spool_dir=tmp_path / "blocker" / "spool")  # fmt: skip
    trail = audit_trail(AuditSettings.of(loaded))
    assert trail is not None and [sink.name for sink in trail.sinks] == ["kafka"]
    with pytest.raises(InvalidConfigError, match=r"audit_spool_dir .*blocker/spool cannot be written"):
        trail.sinks[0].start()
