"""A Produce v11 answer relayed with its held edit (``links``: the answer read whole, walked in memory by
``produce_walk``, written at once), on real loopback sockets: an answer naming no broker reaches the client as the
upstream sent it and the edit's tail is never called; one naming brokers reaches it rewritten, its frame's size that
of the rewritten answer — through a socket client, a writer that is not a socket, a TLS stream link, and at a size
that would be spliced were it not held; not one byte more is taken from the upstream."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Any

import pytest

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.proxy import links
from kafkaguard.proxy.produce_walk import ProduceAnswerWalk
from kafkaguard.proxy.walks import AnswerEdit
from kafkaguard.proxy.wire import decode_response
from tests.proxy.memory_upstream import entity
from tests.proxy.test_fetch_relay_walked import pass_on_from_socket
from tests.proxy.test_relay_pipeline import Collecting, client_pair, read_answer, run

VERSION = 11
PROXIED_HOST = "proxy.example"


def answer(partitions: int, *, endpoint: str | None) -> Any:
    """A v11 answer: one topic of ``partitions`` partitions; with ``endpoint``, broker 2 there as a new leader."""
    cls = response_schema(ApiKey.PRODUCE, VERSION)
    part = nested(cls, "PartitionProduceResponse")
    topic = entity(
        nested(cls, "TopicProduceResponse"),
        name="feed-a",
        partition_responses=tuple(entity(part, index=i, base_offset=42) for i in range(partitions)),
    )
    endpoints = () if endpoint is None else (entity(nested(cls, "NodeEndpoint"), node_id=2, host=endpoint, port=9092),)
    return entity(cls, responses=(topic,), node_endpoints=endpoints)


def framed(body: Any) -> bytes:
    return encode_response(ApiKey.PRODUCE, VERSION, 7, body)


def proxied(body: Any) -> Any:
    return dataclasses.replace(body, node_endpoints=tuple(
        dataclasses.replace(e, host=PROXIED_HOST, port=19095) for e in body.node_endpoints))  # fmt: skip


async def rewrite(calls: list[bytes], tail: bytes) -> bytes:
    """Produce's rewrite as ``handlers.produce`` makes it: decoded, the endpoints replaced, re-encoded."""
    calls.append(tail)
    body = decode_response(ApiKey.PRODUCE, VERSION, b"\x00\x00\x00\x07" + tail)
    return framed(proxied(body))[8:]


def edit(calls: list[bytes]) -> AnswerEdit:
    walk = functools.partial(ProduceAnswerWalk, api_version=VERSION)
    return AnswerEdit(walk=walk, tail=functools.partial(rewrite, calls), held=True)


CASES = {
    "one partition": 1,
    "larger than a splice": links.SPLICE_FROM // 30 + 10,  # ~36 bytes a partition: beyond SPLICE_FROM
}


@pytest.mark.parametrize("partitions", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("endpoint", [None, "kafka-2.internal", "k"])
def test_through_a_socket_client(partitions: int, endpoint: str | None) -> None:
    body = answer(partitions, endpoint=endpoint)
    upstream, expected = framed(body), framed(body if endpoint is None else proxied(body))
    if partitions > 1:
        assert len(upstream) - 8 > links.SPLICE_FROM
    calls: list[bytes] = []

    async def scenario() -> None:
        async with client_pair() as (proxy_side, client):

            async def target(link: links.SocketLink) -> None:
                head = await link.read_exactly(8)
                await link.pass_on(head, len(upstream) - 8, proxy_side, edit(calls))

            reading = asyncio.create_task(read_answer(client))
            await pass_on_from_socket(upstream, target, 1)
            correlation_id, got = await reading
        assert correlation_id == 7 and expected[8:] == got

    run(scenario)
    assert calls == ([] if endpoint is None else [upstream[8:]])


@pytest.mark.parametrize("endpoint", [None, "kafka-2.internal"])
def test_into_a_writer_that_is_not_a_socket(endpoint: str | None) -> None:
    body = answer(3, endpoint=endpoint)
    upstream, expected = framed(body), framed(body if endpoint is None else proxied(body))

    async def scenario() -> None:
        collected = Collecting()

        async def target(link: links.SocketLink) -> None:
            head = await link.read_exactly(8)
            await link.pass_on(head, len(upstream) - 8, collected, edit([]))

        await pass_on_from_socket(upstream, target, 2)
        assert bytes(collected.data) == expected

    run(scenario)


def test_copied_from_a_tls_stream_link() -> None:
    body = answer(CASES["larger than a splice"], endpoint="kafka-2.internal")
    upstream = framed(body)

    async def scenario() -> None:
        async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(upstream + b"next")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            link = await links.StreamLink.connect(host, port, None)
            collected = Collecting()
            try:
                head = await link.read_exactly(8)
                await link.pass_on(head, len(upstream) - 8, collected, edit([]))
                assert bytes(collected.data) == framed(proxied(body))
                assert await link.read_exactly(4) == b"next"
            finally:
                link.close()

    run(scenario)
