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
from kafkaguard.config.sections import AuditKafkaSettings, AuditSettings, KafkaClientSettings
from kafkaguard.errors import InvalidConfigError


def audit_trail(audit: AuditSettings, statistics: AuditTrailStatistics | None = None) -> AuditLog | None:
    """The process's audit trail, or None when it has no sink.

    :raises InvalidConfigError: the Kafka sink's settings cannot be used (a password file that cannot be read).
    """
    statistics = statistics if statistics is not None else AuditTrailStatistics()
    sinks: list[Sink] = []
    if audit.kafka is not None:
        sinks.append(kafka_sink(audit.kafka, statistics))
    if audit.log is None and not sinks:
        return None
    return AuditLog(
        audit.log,
        mode=audit.mode,
        max_bytes=audit.max_bytes,
        sinks=sinks,
        source=source_of(audit.node_name),
        statistics=statistics,
        login_failure_window_seconds=audit.login_failure_window_seconds,
        usage_window_seconds=audit.usage_window_seconds,
    )


def router_of(kafka: AuditKafkaSettings) -> Router:
    """Where the Kafka sink sends each event: ``audit_kafka_routes``, else ``audit_kafka_topic``."""
    return Router(parse_routes(list(kafka.routes)), kafka.topic)


def reroute(trail: AuditLog, kafka: AuditKafkaSettings) -> bool:
    """Give ``trail``'s Kafka sink ``kafka``'s routes (a SIGHUP, ``node.live``): the sink's thread reads its router
    once per event, so an event goes by the old routes or the new ones, whole. False: no Kafka sink."""
    sinks = [sink for sink in trail.sinks if isinstance(sink, KafkaSink)]
    for sink in sinks:
        sink.router = router_of(kafka)
    return bool(sinks)


def kafka_sink(kafka: AuditKafkaSettings, statistics: AuditTrailStatistics) -> KafkaSink:
    router = router_of(kafka)
    spool = Spool(kafka.spool_path, max_bytes=kafka.spool_max_bytes, fsync_seconds=kafka.spool_fsync_seconds)
    return KafkaSink(
        producer_config(kafka.client),
        router,
        spool,
        statistics=statistics,
        delivery_timeout_seconds=kafka.delivery_timeout_seconds,
    )


def producer_config(client: KafkaClientSettings) -> dict[str, Any]:
    """librdkafka's settings reaching the audit cluster: its own, or (``upstream``) the proxy's upstream ones.

    :raises InvalidConfigError: a password file cannot be read.
    """
    return _client_config(
        client.bootstrap_servers,
        client.security_protocol,
        client.sasl_mechanism,
        client.user,
        client.password.read(),
        client.ssl_cafile,
        client.ssl_certfile,
        client.ssl_keyfile,
        client.ssl_key_password.read() if client.ssl_key_password is not None else None,
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
