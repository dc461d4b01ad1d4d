"""The proxy's relay paths leave no garbage cycles behind, request after request, however the connection ends.

Why it matters: ``node.collector`` freezes what is alive every 0.1 s and reclaims frozen cycles only hourly (or
after 1 GiB of growth), so a reference cycle made per request is a leak in production: the walked Fetch v16+
answer's walk → generator → frame → walk cycle held each answer's bytes and grew the proxy's RSS by 311 MiB a minute
in bench_proxy's soak (fixed in ``proxy.fetch_walk`` with ``_Cursor``). ``test_forwarded_requests``' garbage check
did not see it: its Fetch requests each name a denied topic, so their answers are decoded, never walked.

Here a proxy runs in-process in front of ``fake_kafka`` (its upstream links real loopback sockets), and a client
drives each relay path over several rounds, with the cyclic collector off (``test_collector.garbage_cycles_left``,
as the server's connections are counted):

* Metadata, relayed and its brokers rewritten;
* Produce v11, its answer held and walked (``produce_walk``), with and without a leader change (``node_endpoints``
  decoded and rewritten), and Produce v9, relayed plain; acks=0 too;
* Fetch v12, its answer relayed unedited (read whole, and spliced: one partition over ``links.SPLICE_FROM``);
* Fetch v16, its answer walked (``fetch_walk``: read whole, and spliced with peeks) with and without a leader change
  — the path of the old leak;
* refused requests: a Produce and a Fetch naming an allowed and a denied topic (the request rebuilt, the answer
  decoded and merged), a denied topic only, Metadata of a denied topic;
* connections that end abruptly: reset while a large walked answer is being passed on, closed with a request sent
  and its answer unread, closed in the middle of a request's frame, and in the middle of the login.

Then what only a full collection frees (frozen objects included) is counted by type, for the types of kafkaguard,
kio, asyncio, socket and ssl (``tests.garbage.freed_only_by_the_collector``, the proxy's loop parked): the cycles it
keeps under ``gc.DEBUG_SAVEALL``, and those it frees before that — a cycle through a suspended generator is broken
by the generator's finalizer and freed by reference counting, so it never reaches ``gc.garbage`` (the old walk's
cycle was one: counting ``gc.garbage`` alone, as ``test_collector`` did, passed on the old code), which
``gc.get_objects()`` before and after the collection shows. ``gc.collect()``'s return value is not trusted (it
proved unreliable before). The count must be empty — no tolerance: no path needs one. A failure names the path and
the types of what it left.

It fails on the old code: with ``_Cursor`` reverted (``FetchAnswerWalk`` starting its generator on itself, the parent
of 56587b8) the walked Fetch path failed with ``[('FetchAnswerWalk', 60)]`` (one per walked answer), the refused and
the abrupt paths (which walk Fetch v16 answers too) with 10 each; the other paths passed.

It found a cycle of its own: a connection lost to the client's reset (a killed client, or one closing with a request's
answer unread) left the whole connection as cyclic garbage — reader, writer, dispatcher, upstream link, session, ~25
objects — asyncio keeping the reset's exception and raising it again in ``Connection.run``'s ``wait_closed``, whose
traceback then held the connection: fixed there (``protocol.connection``), the abrupt path failed before the fix.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested, rebuild
from kafkaguard.protocol.codec import DecodedRequest, encode_response, request_schema, response_schema
from kafkaguard.proxy.links import SPLICE_FROM
from tests.garbage import isolated
from tests.node.test_collector import garbage_cycles_left, wait_until_all_closed
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy, topic_id, zero
from tests.proxy.fetch_answers import readable
from tests.proxy.test_forwarded_requests import grant
from tests.serving import ServerHandle
from tests.wire import Wire, decode_response, encode_request, frame, metadata

PASSWORD = "cycles-pw"  # noqa: S105 - a test password
USER = "alice"
#: Rounds of each path: a cycle per request shows as ROUNDS (or a multiple) of each of its types.
ROUNDS = 10
#: The modules whose objects are counted: what the proxy's own code, its codec and its event loop make.
OURS = ("kafkaguard", "kio", "asyncio", "socket", "ssl")
#: feed-a: small records; feed-big: records spliced (over SPLICE_FROM); feed-moved: its leader moved (Kafka's
#: NOT_LEADER_OR_FOLLOWER with the new leader in ``node_endpoints``); secret-a: a topic the user may not touch.
SMALL, BIG, MOVED, SECRET = "feed-a", "feed-big", "feed-moved", "secret-a"
BIG_RECORDS = 4 * SPLICE_FROM
#: A v2 record batch's first bytes as the proxy reads them (magic at 16, non-transactional attributes at 21).
BATCH = Records(bytes(16) + b"\x02" + bytes(4) + struct.pack(">h", 0) + bytes(40))
NEW_LEADER_EPOCH = 7


@dataclasses.dataclass
class RelayingKafka(FakeKafka):
    """The fake upstream, answering Fetch and Produce as a broker does: each partition asked is answered (Fetch:
    with records, ``BIG_RECORDS`` of them for ``BIG``), ``MOVED``'s partitions NOT_LEADER_OR_FOLLOWER naming this
    broker as their new leader, and, from the versions that have it, its address in ``node_endpoints``."""

    def answer(self, request: DecodedRequest) -> bytes | None:
        body: Any = request.body
        if request.api_key is ApiKey.FETCH:
            return self._framed(request, self._fetch(request.header.api_version, body))
        if request.api_key is ApiKey.PRODUCE and int(body.acks) != 0:
            return self._framed(request, self._produce(request.header.api_version, body))
        return super().answer(request)

    def _framed(self, request: DecodedRequest, answer: Any) -> bytes:
        return encode_response(request.api_key, request.header.api_version, request.header.correlation_id, answer)

    def _name(self, topic: Any) -> str:
        name = getattr(topic, "topic", None) or getattr(topic, "name", None)
        if name is not None:
            return str(name)
        return next(n for n in self.existing if topic_id(n) == topic.topic_id)

    def _endpoints(self, cls: type[Any], names: list[str]) -> dict[str, Any]:
        if MOVED not in names:
            return {}
        endpoint = rebuild(zero(nested(cls, "NodeEndpoint")), node_id=self.node_id, host="127.0.0.1", port=self.port)
        return {"node_endpoints": (endpoint,)}

    def _moved(self, name: str) -> dict[str, Any]:
        if name != MOVED:
            return {"error_code": ErrorCode.none}
        leader = {"leader_id": self.node_id, "leader_epoch": NEW_LEADER_EPOCH}
        return {"error_code": ErrorCode.not_leader_or_follower, "current_leader": leader}

    def _fetch(self, version: int, body: Any) -> Any:
        cls = response_schema(ApiKey.FETCH, version)
        topic_cls, partition_cls = nested(cls, "FetchableTopicResponse"), nested(cls, "PartitionData")
        leader_cls = nested(partition_cls, "LeaderIdAndEpoch") if version >= 12 else None
        topics, names = [], []
        for asked in body.topics:
            name = self._name(asked)
            names.append(name)
            moved = self._moved(name)
            if leader_cls is None or "current_leader" not in moved:
                moved.pop("current_leader", None)
            else:
                moved["current_leader"] = rebuild(zero(leader_cls), **moved["current_leader"])
            size = BIG_RECORDS if name == BIG else 1000
            partitions = tuple(
                rebuild(zero(partition_cls), partition_index=p.partition, high_watermark=10,
                        records=Records(bytes([p.partition + 1]) * size), **moved)
                for p in asked.partitions
            )  # fmt: skip
            topics.append(rebuild(zero(topic_cls), topic=name, topic_id=topic_id(name), partitions=partitions))
        return rebuild(zero(cls), responses=tuple(topics), **(self._endpoints(cls, names) if version >= 16 else {}))

    def _produce(self, version: int, body: Any) -> Any:
        cls = response_schema(ApiKey.PRODUCE, version)
        topic_cls, partition_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
        topics, names = [], []
        for asked in body.topic_data:
            names.append(asked.name)
            moved = self._moved(asked.name)
            if "current_leader" in moved:
                if version >= 10:
                    leader_cls = nested(partition_cls, "LeaderIdAndEpoch")
                    moved["current_leader"] = rebuild(zero(leader_cls), **moved["current_leader"])
                else:
                    moved.pop("current_leader")
            partitions = tuple(
                rebuild(zero(partition_cls), index=p.index, base_offset=42, **moved) for p in asked.partition_data
            )
            topics.append(rebuild(zero(topic_cls), name=asked.name, partition_responses=partitions))
        return rebuild(zero(cls), responses=tuple(topics), **(self._endpoints(cls, names) if version >= 10 else {}))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    directory: Path = tmp_path_factory.mktemp("cycles")
    with fake_kafka(RelayingKafka(existing={SMALL, BIG, MOVED, SECRET})) as upstream:
        handle = start_proxy(directory, upstream.address, audit_log=None)
        try:
            handle.add_user(USER, PASSWORD)
            grant(handle, USER, ResourceType.TOPIC, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
            yield handle
        finally:
            handle.stop()
        assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


# ------------------------------------------------------------------------------------------- the requests sent


def produce_request(version: int, *topics: str, acks: int = -1) -> Any:
    cls = request_schema(ApiKey.PRODUCE, version)
    topic_cls, partition_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    data = tuple(
        rebuild(zero(topic_cls), name=name,
                partition_data=tuple(rebuild(zero(partition_cls), index=i, records=BATCH) for i in range(2)))
        for name in topics
    )  # fmt: skip
    return rebuild(zero(cls), acks=acks, timeout=timedelta(seconds=30), topic_data=data)


def fetch_request(version: int, *topics: str) -> Any:
    cls = request_schema(ApiKey.FETCH, version)
    topic_cls, partition_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    asked = tuple(
        rebuild(zero(topic_cls), topic=name, topic_id=topic_id(name),
                partitions=tuple(rebuild(zero(partition_cls), partition=i, partition_max_bytes=2**30)
                                 for i in range(2)))
        for name in topics
    )  # fmt: skip
    return rebuild(zero(cls), max_wait=timedelta(milliseconds=10), min_bytes=1, max_bytes=2**30, topics=asked,
                   forgotten_topics_data=())  # fmt: skip


def ask(wire: Wire, body: Any) -> Any:
    """``body`` sent and its answer decoded, a Fetch v16+ answer read past the proxy's filler tags."""
    correlation_id = wire.next_correlation_id()
    wire.send_frame(encode_request(body, correlation_id))
    payload = wire.recv_frame()
    assert payload is not None, f"the proxy closed the connection instead of answering {type(body).__name__}"
    version = type(body).__version__
    if type(body).__api_key__ == ApiKey.FETCH and version >= 16:
        payload = readable(payload, version)
    got, answer = decode_response(payload, type(body).__api_key__, version)
    assert got == correlation_id
    return answer


def logged_in(proxy: ServerHandle) -> Wire:
    wire = Wire(proxy.sasl)
    wire.login(USER, PASSWORD)
    return wire


def errors_by_topic(answer: Any) -> dict[str, set[int]]:
    """Each topic of a Produce or Fetch answer: the error codes of its partitions."""
    found: dict[str, set[int]] = {}
    for topic in answer.responses:
        name = getattr(topic, "name", None) or getattr(topic, "topic", None) or topic.topic_id
        parts = getattr(topic, "partition_responses", None) or topic.partitions
        found[str(name)] = {int(p.error_code.value) for p in parts}
    return found


def leaders_at_the_proxy(proxy: ServerHandle, answer: Any) -> None:
    """A leader change's ``node_endpoints`` reached the client at the proxy's addresses, never the upstream's."""
    (endpoint,) = answer.node_endpoints
    assert endpoint.port in {listener.port for listener in proxy.server.bound_listeners}


# ------------------------------------------------------------------------------------------------- the paths


def relayed_metadata(proxy: ServerHandle) -> None:
    with logged_in(proxy) as wire:
        answer = metadata(wire, [SMALL, MOVED])
        assert {t.name: t.error_code.value for t in answer.topics} == {SMALL: 0, MOVED: 0}
        ports = {b.port for b in answer.brokers}
        assert ports <= {listener.port for listener in proxy.server.bound_listeners}, "brokers at the proxy"


def produced(proxy: ServerHandle) -> None:
    with logged_in(proxy) as wire:
        assert errors_by_topic(ask(wire, produce_request(11, SMALL))) == {SMALL: {0}}  # held, walked, as sent
        moved = ask(wire, produce_request(11, MOVED))  # held, walked, its endpoints decoded and rewritten
        assert errors_by_topic(moved) == {MOVED: {ErrorCode.not_leader_or_follower.value}}
        leaders_at_the_proxy(proxy, moved)
        assert errors_by_topic(ask(wire, produce_request(9, SMALL, MOVED))) == {
            SMALL: {0},
            MOVED: {ErrorCode.not_leader_or_follower.value},
        }  # relayed plain
        wire.send_frame(encode_request(produce_request(11, SMALL, acks=0), wire.next_correlation_id()))
        assert errors_by_topic(ask(wire, produce_request(9, SMALL))) == {SMALL: {0}}  # acks=0 answered nothing


def fetched_unedited(proxy: ServerHandle) -> None:
    with logged_in(proxy) as wire:
        answer = ask(wire, fetch_request(12, SMALL, BIG))  # one answer over SPLICE_FROM: spliced
        assert [len(p.records) for t in answer.responses for p in t.partitions] == [1000, 1000] + [BIG_RECORDS] * 2
        assert len(ask(wire, fetch_request(12, SMALL)).responses) == 1  # read whole


def fetched_walked(proxy: ServerHandle) -> None:
    with logged_in(proxy) as wire:
        answer = ask(wire, fetch_request(16, SMALL, BIG))  # walked with peeks, spliced
        assert [len(p.records) for t in answer.responses for p in t.partitions] == [1000, 1000] + [BIG_RECORDS] * 2
        assert errors_by_topic(ask(wire, fetch_request(16, SMALL))) == {str(topic_id(SMALL)): {0}}  # read whole
        moved = ask(wire, fetch_request(17, MOVED))  # its tail's endpoints rewritten
        assert errors_by_topic(moved) == {str(topic_id(MOVED)): {ErrorCode.not_leader_or_follower.value}}
        leaders_at_the_proxy(proxy, moved)


def refused(proxy: ServerHandle) -> None:
    denied = ErrorCode.topic_authorization_failed.value
    with logged_in(proxy) as wire:
        assert errors_by_topic(ask(wire, produce_request(11, SMALL, SECRET))) == {SMALL: {0}, SECRET: {denied}}
        assert errors_by_topic(ask(wire, produce_request(9, SECRET))) == {SECRET: {denied}}
        assert errors_by_topic(ask(wire, fetch_request(16, SMALL, SECRET))) == {
            str(topic_id(SMALL)): {0},
            str(topic_id(SECRET)): {denied},
        }
        assert errors_by_topic(ask(wire, fetch_request(12, SECRET))) == {SECRET: {denied}}
        assert {t.name: t.error_code.value for t in metadata(wire, [SECRET]).topics} == {SECRET: denied}


def reset(wire: Wire) -> None:
    """The client's end closed with a reset, as a killed client's is."""
    wire.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    wire.close()


def ended_abruptly(proxy: ServerHandle) -> None:
    wire = logged_in(proxy)  # reset while a spliced, walked answer is on its way
    wire.send_frame(encode_request(fetch_request(16, BIG, SMALL), wire.next_correlation_id()))
    assert len(wire.sock.recv(100)) > 0
    reset(wire)
    with logged_in(proxy) as wire:  # a request sent, the connection closed before its answer is read
        wire.send_frame(encode_request(fetch_request(16, SMALL), wire.next_correlation_id()))
        wire.send_frame(encode_request(produce_request(11, SMALL), wire.next_correlation_id()))
    wire = logged_in(proxy)  # half a frame, then gone
    wire.send_raw(frame(encode_request(produce_request(11, SMALL), wire.next_correlation_id()))[:30])
    reset(wire)
    with Wire(proxy.sasl) as wire:  # in the middle of the login: the handshake done, no authentication
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == ErrorCode.none
    wait_until_all_closed(proxy)


PATHS: dict[str, Callable[[ServerHandle], None]] = {
    "relayed Metadata": relayed_metadata,
    "Produce, held and plain": produced,
    "Fetch relayed unedited": fetched_unedited,
    "Fetch v16+ walked": fetched_walked,
    "refused requests": refused,
    "connections ended abruptly": ended_abruptly,
}


async def _turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def settled(proxy: ServerHandle) -> None:
    """Every connection closed on the proxy's side, its loop turned a few times (the upstream links' transports end
    in callbacks it runs after their connection's task: ``_call_connection_lost``), and the fake upstream's threads
    for those links gone (their sockets are ``socket`` objects too)."""
    wait_until_all_closed(proxy)
    proxy.run(_turns())
    deadline = time.monotonic() + 10
    while any("process_request" in t.name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
@isolated
def test_a_relay_path_leaves_no_garbage_cycles(proxy: ServerHandle, path: Callable[[ServerHandle], None]):
    path(proxy)  # once first: what a first request fills (topic ids, nodes, lazy imports) is no garbage
    settled(proxy)
    with garbage_cycles_left(proxy, OURS) as ours:
        for _ in range(ROUNDS):
            path(proxy)
        settled(proxy)
    assert ours == Counter(), f"{ROUNDS} rounds left garbage cycles: {ours.most_common(10)}"
