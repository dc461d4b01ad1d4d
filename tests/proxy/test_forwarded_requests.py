"""What the proxy forwards means no more than what was authorized, for every API and version it offers.

A proxy in front of a fake upstream (``fake_kafka``: it records every request it receives) is sent, for each API
and version the proxy offers (``versions.CAPS`` ∩ the handlers; the fake offers everything), requests that name one
allowed and one denied resource of each kind the API carries (topic, group, transactional id; config resources:
an allowed topic, a denied topic and a broker), from a user whose ACLs cover only the ``feed-`` prefix. Each single
resource field (a request's group, its transactional id) is also sent denied. What reached the upstream must:

* name no denied resource (no ``secret-`` name anywhere in it; no broker config resource, the user having no
  cluster ACL);
* create no topic the user may not create: a CreateTopics names only creatable topics, and a Metadata request that
  may auto-create (v0-v3 always: Kafka reads the missing ``allow_auto_topic_creation`` as true; v4+ with it true)
  names only creatable topics. The ``reader`` may create nothing; the ``creator`` has CREATE on ``feed-``.

Before the fix, Metadata v1-v3 from the reader failed the second check (the proxy's "without auto-creation" probe
went upstream as v1-v3, without the field: the fake, like Kafka, created ``feed-t``), and the reader's topics were
really created (``test_no_topic_is_created_for_a_user_without_create``).
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.types import GroupId, TopicName, TransactionalId
from kio.static.primitive import Records, i8

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import DecodedRequest, request_schema
from kafkaguard.protocol.lengths import unwrap
from kafkaguard.proxy.dispatch import FORWARDED
from kafkaguard.proxy.versions import CAPS
from tests.actors import ACTOR
from tests.garbage import isolated
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy, topic_id, zero, zero_value
from tests.serving import ServerHandle
from tests.wire import Wire

PASSWORD = "sweep-pw"  # noqa: S105 - a test password
ALLOWED, DENIED = "feed-", "secret-"
#: kio's resource name types → (allowed, denied) names.
NAMES: dict[Any, tuple[Any, ...]] = {
    TopicName: ("feed-t", "secret-t"),
    GroupId: ("feed-g", "secret-g"),
    TransactionalId: ("feed-x", "secret-x"),
}
#: Topics named by id (Fetch v13+, Metadata v12, DeleteTopics v6): the fake's ids of the allowed and denied topics.
NAMES[uuid.UUID] = (topic_id(NAMES[TopicName][0]), topic_id(NAMES[TopicName][1]))
DENIED_ID = NAMES[uuid.UUID][1]
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
READER, CREATOR = "reader", "creator"
OFFERED = [(key, version) for key in sorted(FORWARDED) for version in range(CAPS[key][0], CAPS[key][1] + 1)]


@dataclasses.dataclass
class Sweep:
    proxy: ServerHandle
    upstream: FakeKafka
    wires: dict[str, Wire] = dataclasses.field(default_factory=dict)

    def send(self, user: str, requests: list[Any]) -> None:
        """Each of ``requests`` on ``user``'s connection (one per user for the whole sweep: the proxy limits how
        fast one address opens connections); each must be answered, never closed: its handler ran to its end."""
        wire = self.wires.get(user)
        if wire is None:
            wire = self.wires[user] = Wire(self.proxy.sasl)
            wire.login(user, PASSWORD)
        try:
            for request in requests:
                wire.request(request)
        except BaseException:
            self.wires.pop(user).close()
            raise


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sweep]:
    directory: Path = tmp_path_factory.mktemp("sweep")
    with fake_kafka(FakeKafka(node_id=1, auto_create=True, id_names=set(NAMES[TopicName]))) as upstream:
        proxy = start_proxy(directory, upstream.address)
        try:
            for user in (READER, CREATOR):
                proxy.add_user(user, PASSWORD)
                grant(proxy, user, ResourceType.TOPIC, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                      AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS)  # fmt: skip
                grant(proxy, user, ResourceType.GROUP, AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
                grant(proxy, user, ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE, AclOperation.DESCRIBE)
            grant(proxy, CREATOR, ResourceType.TOPIC, AclOperation.CREATE)
            sweep = Sweep(proxy, upstream)
            yield sweep
        finally:
            for wire in sweep.wires.values():
                wire.close()
            proxy.stop()
        assert proxy.errors == [], f"the proxy logged errors: {proxy.errors}"


def grant(proxy: ServerHandle, user: str, resource_type: ResourceType, *operations: AclOperation) -> None:
    pattern = ResourcePattern(resource_type, ALLOWED, PatternType.PREFIXED)
    bindings = [
        AclBinding(pattern, AccessControlEntry(f"User:{user}", "*", op, AclPermissionType.ALLOW)) for op in operations
    ]
    assert all(result.succeeded for result in proxy.services.acls.create_acls(bindings, actor=ACTOR))


# ------------------------------------------------------------------------------------------- the requests sent

#: A v2 record batch header whose attributes say "transactional" (all the proxy reads of it), so a Produce's
#: transactional id is a resource it must authorize.
TRANSACTIONAL_BATCH = Records(bytes(16) + b"\x02" + bytes(4) + struct.pack(">h", 0x10) + bytes(40))


def fill(cls: type[Any], scalars: dict[Any, str], names: dict[Any, tuple[str, ...]] = NAMES) -> Any:
    """A request entity of ``cls``: every resource-name field set (arrays of names: ``names``, allowed and denied;
    an array of entities that each name a resource: one entity per name; a single name: ``scalars``'), the rest
    zero."""
    values: dict[str, Any] = {}
    for found in dataclasses.fields(cls):
        inner, is_array, _optional = unwrap(found.type)
        if inner in names and _names_a_resource(cls, found):
            values[found.name] = names[inner] if is_array else scalars[inner]
        elif is_array and dataclasses.is_dataclass(inner):
            kind = _named_kind(inner)  # type: ignore[arg-type]
            if kind is None:
                values[found.name] = (fill(inner, scalars, names),)  # type: ignore[arg-type]
            else:
                values[found.name] = tuple(fill(inner, {**scalars, kind: n}, names) for n in names[kind])  # type: ignore[arg-type]
        elif found.name == "acks":
            values[found.name] = -1  # acks=0 gets no answer
        elif found.name == "records":
            values[found.name] = TRANSACTIONAL_BATCH
        elif found.default is dataclasses.MISSING and found.default_factory is dataclasses.MISSING:
            values[found.name] = zero_value(found.type)
    return cls(**values)


def _names_a_resource(cls: type[Any], found: dataclasses.Field[Any]) -> bool:
    """A UUID names a topic only as the ``topic_id`` of an entity without a name (Fetch v13+'s topics): where an
    entity has both (Metadata v10+, DeleteTopics v6) its name is filled and its id left zero (``_by_id`` adds the
    requests that name ids there)."""
    if unwrap(found.type)[0] is not uuid.UUID:
        return True
    return found.name == "topic_id" and not any(unwrap(f.type)[0] is TopicName for f in dataclasses.fields(cls))


def _named_kind(cls: type[Any]) -> Any:
    """The resource kind an entity names in a single field of its own (a topic's name, a group's id), or None."""
    for found in dataclasses.fields(cls):
        inner, is_array, _optional = unwrap(found.type)
        if inner in NAMES and not is_array and _names_a_resource(cls, found):
            return inner
    return None


def _by_id(api_key: ApiKey, version: int, cls: type[Any]) -> list[Any]:
    """Metadata v12 and DeleteTopics v6 naming topics only by id: the allowed topic's id alone, then both."""
    if not ((api_key is ApiKey.METADATA and version >= 12) or (api_key is ApiKey.DELETE_TOPICS and version >= 6)):
        return []
    topic_cls = nested(cls, "MetadataRequestTopic" if api_key is ApiKey.METADATA else "DeleteTopicState")
    requests = []
    for ids in (NAMES[uuid.UUID][:1], NAMES[uuid.UUID]):
        topics = tuple(dataclasses.replace(zero(topic_cls), name=None, topic_id=i) for i in ids)
        requests.append(dataclasses.replace(zero(cls), topics=topics))
    return requests


def requests_for(api_key: ApiKey, version: int) -> list[Any]:
    """Every request sent for ``api_key`` v``version``: one naming only allowed resources (some APIs forward nothing
    when one is denied, as Kafka's broker does nothing then), one naming allowed and denied ones, then one for each
    single name (a group, a transactional id) denied."""
    cls = request_schema(api_key, version)
    if api_key is ApiKey.FIND_COORDINATOR:
        return _find_coordinator(cls, version)
    allowed = {kind: names[0] for kind, names in NAMES.items()}
    only_allowed = fill(cls, allowed, {kind: (name,) for kind, name in allowed.items()})
    variants = [allowed] + [{**allowed, kind: NAMES[kind][1]} for kind in sorted(_single_kinds(cls), key=str)]
    requests = [only_allowed] + [fill(cls, variant) for variant in variants]
    if hasattr(only_allowed, "resources"):  # DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
        requests = [_config_resources(requests[0], allowed_only=True)] + [_config_resources(r) for r in requests[1:]]
    return requests + _by_id(api_key, version, cls)


def _single_kinds(cls: type[Any]) -> set[Any]:
    return {unwrap(f.type)[0] for f in dataclasses.fields(cls) if unwrap(f.type)[0] in NAMES and not unwrap(f.type)[1]}


def _find_coordinator(cls: type[Any], version: int) -> list[Any]:
    kinds = [(0, NAMES[GroupId])] + ([(1, NAMES[TransactionalId])] if version >= 1 else [])
    if version >= 4:
        return [cls(key_type=i8(key_type), coordinator_keys=names) for key_type, names in kinds]
    if version >= 1:
        return [cls(key_type=i8(key_type), key=name) for key_type, names in kinds for name in names]
    return [cls(key=name) for name in NAMES[GroupId]]


def _config_resources(request: Any, *, allowed_only: bool = False) -> Any:
    [resource] = request.resources
    named = [(TOPIC_RESOURCE, NAMES[TopicName][0])]
    if not allowed_only:
        named += [(TOPIC_RESOURCE, NAMES[TopicName][1]), (BROKER_RESOURCE, "1")]
    resources = tuple(dataclasses.replace(resource, resource_type=i8(t), resource_name=n) for t, n in named)
    return dataclasses.replace(request, resources=resources)


# ------------------------------------------------------------------------------------------- what is checked


def strings_in(value: Any) -> Iterator[str]:
    """Every string in ``value``, and every UUID as its text (a denied topic's id is a denied name)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, uuid.UUID):
        yield DENIED if value == DENIED_ID else str(value)
    elif isinstance(value, tuple):
        for item in value:
            yield from strings_in(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for found in dataclasses.fields(value):
            yield from strings_in(getattr(value, found.name))


def topics_it_may_create(request: DecodedRequest) -> list[str]:
    """The topics ``request`` may have the upstream create (see the module docstring)."""
    body: Any = request.body  # CreateTopics' or Metadata's request, read as the API it is checked to be
    version = request.header.api_version
    if request.api_key is ApiKey.CREATE_TOPICS:
        return [topic.name for topic in body.topics]
    if request.api_key is not ApiKey.METADATA or not body.topics:
        return []
    may_auto_create = version < 4 or body.allow_auto_topic_creation  # Kafka reads v0-v3's missing field as true
    return [topic.name for topic in body.topics] if may_auto_create else []


def widenings(request: DecodedRequest, user: str) -> list[str]:
    """Why ``request``, received upstream, grants ``user`` something denied (empty: it does not)."""
    lookup = (
        request.header.client_id == "kafkaguard-proxy"
        and request.api_key is ApiKey.METADATA
        and not topics_it_may_create(request)
    )  # fmt: skip  (the proxy's own Metadata, resolving ids to names: it answers the proxy, and creates nothing)
    problems = [f"names {name!r}" for name in strings_in(request.body) if name.startswith(DENIED) and not lookup]
    if request.header.client_id != "kafkaguard-proxy":  # the proxy's own reads of the brokers' settings aside
        for resource in getattr(request.body, "resources", ()):
            if int(resource.resource_type) == BROKER_RESOURCE:
                problems.append(f"names broker config resource {resource.resource_name!r}")
    creatable = (lambda name: name.startswith(ALLOWED)) if user == CREATOR else (lambda name: False)
    problems += [f"may create topic {name!r}" for name in topics_it_may_create(request) if not creatable(name)]
    return problems


# ------------------------------------------------------------------------------------------------ the tests


def test_the_sweep_covers_every_api_and_version_the_proxy_offers(sweep: Sweep):
    offered = {(key, v) for key, (low, high) in sweep.proxy.server.versions.items() if key in FORWARDED  # type: ignore[attr-defined]
               for v in range(low, high + 1)}  # fmt: skip
    assert offered == set(OFFERED)
    assert {(ApiKey.PRODUCE, 10), (ApiKey.PRODUCE, 11)} <= offered  # KIP-951's versions are swept too


@pytest.mark.parametrize("user", [READER, CREATOR])
@pytest.mark.parametrize(("api_key", "version"), OFFERED, ids=[f"{k.api_name}-v{v}" for k, v in OFFERED])
def test_what_reaches_the_upstream_grants_nothing_denied(sweep: Sweep, user: str, api_key: ApiKey, version: int):
    upstream = sweep.upstream
    with upstream.lock:
        before, created_before = len(upstream.received), len(upstream.created)
    sweep.send(user, requests_for(api_key, version))
    with upstream.lock:
        received, created = upstream.received[before:], upstream.created[created_before:]
    problems = [f"{r.api_key.api_name} v{r.header.api_version} {p}" for r in received for p in widenings(r, user)]
    assert problems == []
    forwarded = [r for r in received if r.api_key is api_key]
    if api_key is ApiKey.CREATE_TOPICS and user == READER:
        assert forwarded == [], "the reader may create no topic: nothing to forward"
    else:
        assert forwarded, "the allowed resources were forwarded (the sweep is not vacuous)"
    if user == READER:
        assert created == []
    elif api_key in (ApiKey.METADATA, ApiKey.CREATE_TOPICS):
        assert set(created) == {NAMES[TopicName][0]}, "auto-creation and CreateTopics still work when allowed"


@isolated
def test_proxied_connections_leave_no_garbage_cycles(sweep: Sweep):
    """What makes the collector's freezing safe on the proxy too (``server.collector``): connections that log in,
    have every API and version forwarded (allowed, partly denied, denied) and close leave no garbage cycles —
    frozen ones would wait for the hourly reclaim."""
    from tests.node.test_collector import garbage_cycles_left, wait_until_all_closed

    proxy = sweep.proxy
    for wire in sweep.wires.values():
        wire.close()
    sweep.wires.clear()
    wait_until_all_closed(proxy)  # the sweep's own connections are not this test's
    with garbage_cycles_left(proxy, ("kafkaguard", "asyncio", "socket", "ssl")) as ours:
        for api_key, version in OFFERED:
            with Wire(proxy.sasl) as wire:
                wire.login(READER, PASSWORD)
                for request in requests_for(api_key, version):
                    wire.request(request)
    assert ours == Counter(), f"{len(OFFERED)} proxied connections left garbage cycles: {ours.most_common(10)}"
