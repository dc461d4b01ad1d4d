"""The audit trail a server process runs with, from its settings: the JSON lines file (``audit_log``) and the Kafka
topic sink (``audit_kafka_bootstrap_servers``), either or both; None when neither is configured."""

from __future__ import annotations

from typing import Any

from kafkaguard.audit.records.cloudevents import source_of
from kafkaguard.audit.records.routing import Router, parse_routes
from kafkaguard.audit.records.spool import Spool
from kafkaguard.audit.records.trail_statistics import AuditTrailStatistics
from kafkaguard.audit.trail.kafka_sink import KafkaSink
from kafkaguard.audit.trail.sinks import Sink
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.config import Settings
from kafkaguard.errors import InvalidConfigError


def audit_trail(settings: Settings, statistics: AuditTrailStatistics | None = None) -> AuditLog | None:
    """The process's audit trail, or None when it has no sink.

    :raises InvalidConfigError: the Kafka sink's settings cannot be used (a password file that cannot be read).
    """
    statistics = statistics if statistics is not None else AuditTrailStatistics()
    sinks: list[Sink] = []
    if settings.audit_kafka_bootstrap_servers is not None:
        sinks.append(kafka_sink(settings, statistics))
    if settings.audit_log is None and not sinks:
        return None
    return AuditLog(
        settings.audit_log,
        mode=settings.audit_mode,
        max_bytes=settings.audit_max_bytes,
        sinks=sinks,
        source=source_of(settings.audit_node_name),
        statistics=statistics,
        login_failure_window_seconds=settings.audit_login_failure_window_seconds,
        usage_window_seconds=settings.audit_usage_window_seconds,
    )


def kafka_sink(settings: Settings, statistics: AuditTrailStatistics) -> KafkaSink:
    router = Router(parse_routes(settings.audit_kafka_routes), settings.audit_kafka_topic)
    spool = Spool(
        settings.audit_spool_path,
        max_bytes=settings.audit_spool_max_bytes,
        fsync_seconds=settings.audit_spool_fsync_seconds,
    )
    return KafkaSink(
        producer_config(settings),
        router,
        spool,
        statistics=statistics,
        delivery_timeout_seconds=settings.audit_kafka_delivery_timeout_seconds,
    )


def producer_config(settings: Settings) -> dict[str, Any]:
    """librdkafka's settings reaching the audit cluster: its own, or (``upstream``) the proxy's upstream ones.

    :raises InvalidConfigError: a password file cannot be read.
    """
    if settings.audit_kafka_bootstrap_servers == "upstream":
        password = settings._read_secret(
            settings.upstream_password, settings.upstream_password_file, "upstream_password_file"
        )
        return _client_config(
            settings.upstream or "",
            settings.upstream_security_protocol,
            settings.upstream_sasl_mechanism,
            settings.upstream_user,
            password,
            settings.upstream_ssl_cafile,
            settings.upstream_ssl_certfile,
            settings.upstream_ssl_keyfile,
            settings.upstream_ssl_key_password,
        )
    return _client_config(
        settings.audit_kafka_bootstrap_servers or "",
        settings.audit_kafka_security_protocol,
        settings.audit_kafka_sasl_mechanism,
        settings.audit_kafka_user,
        settings.audit_kafka_password_value,
        settings.audit_kafka_ssl_cafile,
        settings.audit_kafka_ssl_certfile,
        settings.audit_kafka_ssl_keyfile,
        None,
    )


def _client_config(
    servers: str,
    protocol: str,
    mechanism: str,
    user: str | None,
    password: str | None,
    cafile: object,
    certfile: object,
    keyfile: object,
    key_password: str | None,
) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": servers, "security.protocol": protocol.lower()}
    if protocol.startswith("SASL"):
        if user is None or password is None:
            raise InvalidConfigError(f"the audit sink's {protocol} login needs a user and a password")
        config |= {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if cafile is not None:
        config["ssl.ca.location"] = str(cafile)
    if certfile is not None and keyfile is not None:
        config |= {"ssl.certificate.location": str(certfile), "ssl.key.location": str(keyfile)}
        if key_password is not None:
            config["ssl.key.password"] = key_password
    return config
