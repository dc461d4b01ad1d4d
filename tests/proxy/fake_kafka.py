"""A fake upstream Kafka broker for proxy tests that need no Kafka tarball: it decodes every request, records it, and
answers plausibly.

* ApiVersions: every API the proxy can forward, from v0 to the proxy's cap (the proxy then offers its whole cap),
  and ``features`` from v3;
* Metadata: this broker as its only node (or the ``brokers`` given); a named topic exists if it is in ``existing``,
  else it is created when the request may auto-create (v0-v3 always, v4+ with ``allow_auto_topic_creation``) and
  ``auto_create`` is true (``created`` records it), else UNKNOWN_TOPIC_OR_PARTITION; all topics: ``existing``;
* DescribeConfigs: a BROKER resource is answered as Kafka's broker answers it: its own id with
  ``auto.create.topics.enable`` (unless ``describe_configs_error`` is set), any other id INVALID_REQUEST "Unexpected
  broker id, expected N or empty string, but received M"; other resources: no configs, no error;
* topic ids: a topic's id is ``topic_id(name)``; Metadata answers each named topic with it, and a topic asked by id
  (name null) with its name when the id is one of ``existing`` or ``id_names``, else UNKNOWN_TOPIC_ID;
* FindCoordinator: this broker; CreateTopics: ``created`` records the names (answered with no results);
* anything else: the response of that version with every field zero, empty or null (no error).

It runs on its own thread (blocking sockets, one thread per connection), so it serves a proxy running on any loop.
"""

from __future__ import annotations

import dataclasses
import socket
import socketserver
import struct
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.api_versions import NO_FEATURES, Features
from kafkaguard.protocol.build import build, nested, rebuild
from kafkaguard.protocol.codec import DecodedRequest, decode_request, encode_response, response_schema
from kafkaguard.protocol.lengths import unwrap
from kafkaguard.proxy.app import ProxyServer
from kafkaguard.proxy.versions import CAPS
from tests.kafka.proxy.conftest import free_port_range
from tests.serving import ServerHandle, TlsFiles, start_server

_SIZE = struct.Struct(">i")
#: What the fake decodes: every forwarded API from v0 to the proxy's cap, and the ones the proxy asks itself.
VERSIONS = {key: (0, high) for key, (_low, high) in CAPS.items()} | {ApiKey.API_VERSIONS: (0, 4)}
BROKER_RESOURCE = 4


@dataclass
class FakeKafka:
    node_id: int = 1
    auto_create: bool = True
    existing: set[str] = field(default_factory=set)
    #: The brokers Metadata names: (node id, host, port); None: this broker only.
    brokers: list[tuple[int, str, int]] | None = None
    #: Set: DescribeConfigs of this broker's own id fails with it (e.g. CLUSTER_AUTHORIZATION_FAILED).
    describe_configs_error: ErrorCode | None = None
    #: Set: reads requests and never answers (a hung broker).
    silent: bool = False
    #: A misbehaving upstream: topics a Metadata answer names although nobody asked, and asked ones it leaves out.
    unasked_topics: set[str] = field(default_factory=set)
    omitted_topics: set[str] = field(default_factory=set)
    #: APIs answered with bytes no Kafka response holds (the correlation id, then junk).
    garbage_for: set[ApiKey] = field(default_factory=set)
    #: The cluster's features, answered in ApiVersions v3+ as Kafka 3.9 answers them (min-0 supported ones from v4).
    features: Features = NO_FEATURES
    #: Names whose ids (``topic_id``) a Metadata request by id resolves, besides ``existing``.
    id_names: set[str] = field(default_factory=set)
    port: int = 0
    received: list[DecodedRequest] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, api_key: ApiKey) -> list[Any]:
        with self.lock:
            return [r.body for r in self.received if r.api_key is api_key]

    def requests_about_brokers(self) -> list[Any]:
        """The DescribeConfigs requests received that name a broker resource (the proxy reading its settings)."""
        return [
            body
            for body in self.requests(ApiKey.DESCRIBE_CONFIGS)
            if any(int(r.resource_type) == BROKER_RESOURCE for r in body.resources)
        ]

    def answer(self, request: DecodedRequest) -> bytes | None:
        api_key, version = request.api_key, request.header.api_version
        body: Any = request.body  # any API's request, read below as the API it is checked to be
        cls = response_schema(api_key, version)
        if api_key is ApiKey.PRODUCE and int(body.acks) == 0:
            return None
        if api_key in self.garbage_for:
            payload = _SIZE.pack(request.header.correlation_id) + b"\xff" * 3
            return _SIZE.pack(len(payload)) + payload
        if api_key is ApiKey.API_VERSIONS:
            key_cls = nested(cls, "ApiVersion")
            keys = tuple(build(key_cls, api_key=int(k), min_version=low, max_version=high)
                         for k, (low, high) in sorted(VERSIONS.items()))  # fmt: skip
            features = self.features
            supported = (
                tuple(
                    build(nested(cls, "SupportedFeatureKey"), name=n, min_version=low, max_version=high)
                    for n, low, high in features.supported
                    if low > 0 or version >= 4
                )
                if version >= 3
                else ()
            )
            finalized = (
                tuple(
                    build(nested(cls, "FinalizedFeatureKey"), name=n, min_version_level=low, max_version_level=high)
                    for n, low, high in features.finalized
                )
                if version >= 3
                else ()
            )
            answer = build(cls, error_code=ErrorCode.none, api_keys=keys, throttle_time=timedelta(0),
                           supported_features=supported, finalized_features_epoch=features.epoch,
                           finalized_features=finalized, zk_migration_ready=False)  # fmt: skip
        elif api_key is ApiKey.METADATA:
            answer = self._metadata(cls, version, body)
        elif api_key is ApiKey.DESCRIBE_CONFIGS:
            answer = self._describe_configs(cls, body)
        elif api_key is ApiKey.FIND_COORDINATOR:
            answer = self._find_coordinator(cls, body)
        elif api_key is ApiKey.CREATE_TOPICS:
            with self.lock:
                self.created.extend(topic.name for topic in body.topics)
            answer = zero(cls)
        else:
            answer = zero(cls)
        return encode_response(api_key, version, request.header.correlation_id, answer)

    def _brokers(self) -> list[tuple[int, str, int]]:
        return self.brokers if self.brokers is not None else [(self.node_id, "127.0.0.1", self.port)]

    def _metadata(self, cls: type[Any], version: int, body: Any) -> Any:
        topic_cls, partition_cls = nested(cls, "MetadataResponseTopic"), nested(cls, "MetadataResponsePartition")
        may_create = version < 4 or bool(body.allow_auto_topic_creation)
        by_id = {topic_id(n): n for n in self.existing | self.id_names}
        unknown_ids = []
        asked: list[str | None] = (
            list(sorted(self.existing))
            if body.topics is None
            else [t.name if t.name is not None else by_id.get(t.topic_id) for t in body.topics]
        )
        if body.topics is not None:
            unknown_ids = [t.topic_id for t in body.topics if t.name is None and t.topic_id not in by_id]
        names = [name for name in asked if name is not None and name not in self.omitted_topics]
        names += sorted(self.unasked_topics)
        partition = dataclasses.replace(zero(partition_cls), leader_id=self.node_id)
        topics = [
            dataclasses.replace(zero(topic_cls), name=None, topic_id=i, error_code=ErrorCode.unknown_topic_id)
            for i in unknown_ids
        ]
        resolved = {by_id[t.topic_id] for t in body.topics or () if t.name is None and t.topic_id in by_id}
        for name in names:
            error = ErrorCode.none
            if name not in self.existing and name not in resolved:  # a topic found by its id exists
                if may_create and self.auto_create:
                    with self.lock:
                        self.created.append(name)  # not kept: every request finds the same topics missing
                else:
                    error = ErrorCode.unknown_topic_or_partition
            partitions = (partition,) if error == ErrorCode.none else ()
            topic = dataclasses.replace(zero(topic_cls), name=name, error_code=error, partitions=partitions)
            if hasattr(topic, "topic_id") and error == ErrorCode.none:
                topic = dataclasses.replace(topic, topic_id=topic_id(name))
            topics.append(topic)
        broker_cls = nested(cls, "MetadataResponseBroker")
        brokers = tuple(build(broker_cls, node_id=n, host=h, port=p, rack=None) for n, h, p in self._brokers())
        return rebuild(zero(cls), brokers=brokers, controller_id=self.node_id, cluster_id="fake", topics=tuple(topics))

    def _describe_configs(self, cls: type[Any], body: Any) -> Any:
        result_cls = nested(cls, "DescribeConfigsResult")
        config_cls = nested(cls, "DescribeConfigsResourceResult")
        results = []
        for resource in body.resources:
            error, message, configs = ErrorCode.none, None, tuple[Any, ...]()
            if int(resource.resource_type) == BROKER_RESOURCE:
                if resource.resource_name != str(self.node_id):
                    error, message = (
                        ErrorCode.invalid_request,
                        (
                            f"Unexpected broker id, expected {self.node_id} or empty string, but received "
                            f"{resource.resource_name}"
                        ),
                    )
                elif self.describe_configs_error is not None:
                    error = self.describe_configs_error
                else:
                    value = str(self.auto_create).lower()
                    configs = (dataclasses.replace(zero(config_cls), name="auto.create.topics.enable", value=value),)
            results.append(dataclasses.replace(
                zero(result_cls), error_code=error, error_message=message, configs=configs,
                resource_type=resource.resource_type, resource_name=resource.resource_name,
            ))  # fmt: skip
        return rebuild(zero(cls), results=tuple(results))

    def _find_coordinator(self, cls: type[Any], body: Any) -> Any:
        where = {"node_id": self.node_id, "host": "127.0.0.1", "port": self.port}
        if hasattr(body, "coordinator_keys"):
            coordinator_cls = nested(cls, "Coordinator")
            coordinators = tuple(rebuild(zero(coordinator_cls), key=key, **where) for key in body.coordinator_keys)
            return rebuild(zero(cls), coordinators=coordinators)
        return rebuild(zero(cls), **where)

    # -------------------------------------------------------------------------------------------- the server

    def serve_connection(self, sock: socket.socket) -> None:
        while True:
            head = _read_exactly(sock, 4)
            if head is None:
                return
            payload = _read_exactly(sock, _SIZE.unpack(head)[0])
            if payload is None:
                return
            request = decode_request(payload, VERSIONS)
            with self.lock:
                self.received.append(request)
            answer = None if self.silent else self.answer(request)
            if answer is not None:
                sock.sendall(answer)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def topic_id(name: str) -> uuid.UUID:
    """The fake's id of topic ``name`` (the same in every run)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"fake-kafka/{name}")


def zero(cls: type[Any]) -> Any:
    """An instance of the kio entity ``cls`` with every field its default, or zero, empty or null."""
    values: dict[str, Any] = {}
    for found in dataclasses.fields(cls):
        if found.default is not dataclasses.MISSING or found.default_factory is not dataclasses.MISSING:
            continue
        values[found.name] = zero_value(found.type)
    return cls(**values)


def zero_value(annotation: Any) -> Any:
    inner, is_array, optional = unwrap(annotation)
    if is_array:
        return ()
    if optional:
        return None
    inner = getattr(inner, "__supertype__", inner)  # kio's NewTypes (TopicName, BrokerId …)
    if dataclasses.is_dataclass(inner):
        return zero(inner)  # type: ignore[arg-type]
    if inner is ErrorCode:
        return ErrorCode.none
    if isinstance(inner, type) and issubclass(inner, timedelta):
        return inner.parse(timedelta(0)) if hasattr(inner, "parse") else timedelta(0)
    if inner is bool:
        return False
    empties: tuple[tuple[type[Any], Any], ...] = ((int, 0), (float, 0.0), (str, ""), (bytes, b""))
    for base, empty in empties:
        if isinstance(inner, type) and issubclass(inner, base):
            return inner(empty)  # kio's bounded types (i32 …) take their value
    return None


def start_proxy(directory: Path, upstream: str, **overrides: Any) -> ServerHandle:
    """``kafkaguard proxy`` (in-process, as ``tests.serving.start_server`` runs it) on one SASL_PLAINTEXT
    listener, in front of ``upstream`` (bootstrap servers) over PLAINTEXT."""
    return start_server(
        directory, TlsFiles(directory / "unused.pem", directory / "unused.key"), server_type=ProxyServer,
        listeners=[f"SASL_PLAINTEXT://127.0.0.1:{free_port_range()}"], ssl_certfile=None, ssl_keyfile=None,
        upstream=upstream, upstream_security_protocol="PLAINTEXT", **overrides,
    )  # fmt: skip


@contextmanager
def fake_kafka(broker: FakeKafka) -> Iterator[FakeKafka]:
    """``broker`` listening on a free loopback port until the block ends."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            broker.serve_connection(self.request)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    broker.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="fake-kafka", daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
