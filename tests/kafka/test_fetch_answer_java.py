"""Kafka's own client parser reads the Fetch v16/v17 answers the proxy rewrites (``fetch_walk.tail_with``): the
``node_endpoints`` padded to the upstream's length with a filler tag, or blanked when they cannot fit. kio refuses
unknown tags, so this is the proof that matters: ``FetchResponse.parse`` of the broker's kafka-clients jar
(``FetchAnswerProbe.java``) sees the proxy's endpoints (or none) and every partition's leader hint unchanged."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.proxy.fetch_walk import NodeEndpoint, tail_with
from tests.kafka.broker import java
from tests.proxy.fetch_answers import tail_at
from tests.proxy.memory_upstream import entity

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("FetchAnswerProbe.java")
TOPIC = uuid.UUID("6f1c1d5e-0000-4000-8000-000000000001")
UPSTREAM_HOST = "kafka-broker-2.internal.example.com"
HEADER = 5  # a v1 response header: correlation id, no tagged fields


def moved_answer(version: int, host: str) -> bytes:
    """An upstream's answer (payload from the correlation id): partition 0 moved to node 2 at ``host``:9093."""
    cls = response_schema(ApiKey.FETCH, version)
    leader = entity(nested(cls, "LeaderIdAndEpoch"), leader_id=2, leader_epoch=7)
    moved = entity(nested(cls, "PartitionData"), partition_index=0, error_code=ErrorCode.not_leader_or_follower,
                   high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, current_leader=leader,
                   preferred_read_replica=-1, records=b"")  # fmt: skip
    kept = entity(nested(cls, "PartitionData"), partition_index=1, high_watermark=10, last_stable_offset=10,
                  preferred_read_replica=-1, records=b"")  # fmt: skip
    topic = entity(nested(cls, "FetchableTopicResponse"), topic_id=TOPIC, partitions=(moved, kept))
    endpoint = entity(nested(cls, "NodeEndpoint"), node_id=2, host=host, port=9093, rack="rack-b")
    answer: Any = entity(cls, responses=(topic,), node_endpoints=(endpoint,))
    return encode_response(ApiKey.FETCH, version, 7, answer)[4:]


def rewritten(version: int, payload: bytes, host: str, port: int) -> bytes:
    start = tail_at(payload, version)
    tail = tail_with(payload[start:], [NodeEndpoint(2, host, port, "rack-b")])
    assert len(tail) == len(payload) - start  # in place: the frame's size went out before it
    return payload[:start] + tail


def java_reads(kafka_dist: Path, tmp_path: Path, answers: list[tuple[int, bytes]]) -> list[str]:
    lines = tmp_path / "answers.txt"
    lines.write_text("".join(f"{version} {payload[HEADER:].hex()}\n" for version, payload in answers))
    done = subprocess.run([java(), "-cp", str(kafka_dist / "libs" / "*"), str(PROBE), str(lines)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


LEADERS = " | 0 6 2/7 | 1 0 -1/-1"  # partition, error (6: NOT_LEADER_OR_FOLLOWER), leader id/epoch


@pytest.mark.parametrize("version", [16, 17])
def test_java_reads_padded_and_blanked_node_endpoints(kafka_dist: Path, tmp_path: Path, version: int):
    upstream = moved_answer(version, UPSTREAM_HOST)
    padded = rewritten(version, upstream, "127.0.0.1", 40002)  # shorter than the upstream's: padded
    short_upstream = moved_answer(version, "k2")
    blanked = rewritten(version, short_upstream, "127.0.0.1", 40002)  # longer than the upstream's: blanked
    assert UPSTREAM_HOST.encode() not in padded and b"k2" not in blanked

    assert java_reads(kafka_dist, tmp_path, [(version, upstream), (version, padded), (version, blanked)]) == [
        f"2 {UPSTREAM_HOST}:9093 rack-b{LEADERS} | unknown tags 0",  # the upstream's own answer, as a baseline
        f"2 127.0.0.1:40002 rack-b{LEADERS} | unknown tags 1",  # the proxy's endpoint; the filler kept as unknown
        f"-{LEADERS} | unknown tags 1",  # no endpoint (the client asks Metadata); the leader hint still there
    ]
