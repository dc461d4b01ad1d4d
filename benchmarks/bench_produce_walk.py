"""What the proxy spends reading a Produce request before it relays it: kio's decoding as the connection did it
until the walk (``codec.decode_request``, on a worker thread for a frame above ``connection.LARGE_FRAME``), against
the walk (``codec.decode_request_head`` + ``proxy.produce_request.walk_produce_request``, always in the loop), on
the same frames in the same run.

The frames are a producer's: one batch per partition of ``--batch`` bytes (librdkafka's ``batch.size``), 1 and 12
partitions, at Produce v9 (what confluent-kafka and Java's 3.x clients send). Time per request is the median of
``--rounds`` rounds of ``--requests`` requests each, in one process; the event loop is the caller's, as it is in
the proxy. This is the proxy's own CPU per Produce request before forwarding, not end-to-end throughput
(``bench_proxy`` measures that).

Run: ``.venv/bin/python -m benchmarks.bench_produce_walk`` (about 20 s); writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import time
from collections.abc import Callable, Sequence

from benchmarks.report import write_section
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import build, nested
from kafkaguard.protocol.codec import decode_request, decode_request_head, request_schema
from kafkaguard.protocol.connection import LARGE_FRAME
from kafkaguard.proxy.produce_request import walk_produce_request
from kafkaguard.proxy.wire import encode_request

VERSION = 9
VERSIONS = {ApiKey.PRODUCE: (3, 11)}
MAX_ITEMS = 100_000


def frame(batch: int, partitions: int) -> bytes:
    cls = request_schema(ApiKey.PRODUCE, VERSION)
    data = tuple(
        build(nested(cls, "PartitionProduceData"), index=i, records=os.urandom(batch)) for i in range(partitions)
    )
    topic = build(nested(cls, "TopicProduceData"), name="bench", partition_data=data)
    body = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30), topic_data=(topic,))
    return encode_request(ApiKey.PRODUCE, VERSION, 1, "bench", body)


async def decoded(payload: bytes) -> object:
    """The connection's path before the walk."""
    if len(payload) > LARGE_FRAME:
        return await asyncio.to_thread(decode_request, payload, VERSIONS, max_items=MAX_ITEMS)
    return decode_request(payload, VERSIONS, max_items=MAX_ITEMS)


async def walked(payload: bytes) -> object:
    head = decode_request_head(payload, VERSIONS)
    return walk_produce_request(payload, head.body_at, VERSION, max_items=MAX_ITEMS)


async def per_request_us(path: Callable[[bytes], object], payload: bytes, requests: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(requests):
            await path(payload)  # type: ignore[misc]
        times.append((time.perf_counter() - start) / requests * 1e6)
    return statistics.median(times)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print the table, do not write docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    for batch, partitions in ((1024, 1), (16 * 1024, 1), (256 * 1024, 1), (16 * 1024, 12), (256 * 1024, 12)):
        payload = frame(batch, partitions)
        requests = max(args.requests // max(partitions * batch // 65536, 1), 50)
        old = asyncio.run(per_request_us(decoded, payload, requests, args.rounds))
        new = asyncio.run(per_request_us(walked, payload, requests, args.rounds))
        threaded = "yes" if len(payload) > LARGE_FRAME else "no"
        rows.append(
            f"| {batch // 1024} KiB × {partitions} | {len(payload):,} | {threaded} | {old:,.1f} | {new:,.1f} "
            f"| {old / new:,.1f}× |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            "## Reading a Produce request: kio's decoding vs the walk (`benchmarks/bench_produce_walk.py`, issue 39)",
            "",
            f"Per request, median of {args.rounds} rounds, same frames, same process (Produce v9, one topic). "
            '"before": `decode_request` as the connection called it (on a worker thread above '
            f'{LARGE_FRAME // 1024} KiB); "walk": `decode_request_head` + `walk_produce_request`, in the loop.',
            "",
            "| batch × partitions | frame bytes | before: on a thread | before, µs | walk, µs | before / walk |",
            "|---|---:|---|---:|---:|---:|",
            *rows,
        ]
    )
    if not args.no_write:
        write_section("produce_walk", table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
