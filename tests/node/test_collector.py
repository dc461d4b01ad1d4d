"""The garbage-collection policy (``server.collector``): what is alive is frozen at each tick, frozen cycles are
reclaimed on time or on memory growth, and — what makes freezing safe — served connections leave no garbage cycles
behind, whatever way they end."""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import struct
import time
from asyncio import selector_events
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from kafkaguard.node.collector import RECLAIM_AFTER_GROWTH, RECLAIM_INTERVAL, Collector, break_transport_cycles
from tests.garbage import freed_only_by_the_collector, isolated, parked
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles
from tests.wire import Wire, frame

ROUNDS = 40


class Node:
    """A cycle of its own: garbage only the cyclic collector can free."""

    def __init__(self) -> None:
        self.me = self


def test_a_tick_freezes_what_is_alive():
    collector = Collector(clock=lambda: 0.0, resident=lambda: None)
    collector._reclaimed_at = 0.0  # as if started: nothing due
    gc.unfreeze()
    try:
        alive = [Node() for _ in range(1000)]
        before = gc.get_freeze_count()
        collector.tick()
        assert gc.get_freeze_count() >= before + 1000
        assert collector.reclaims == 0
        assert len(alive) == 1000
    finally:
        gc.unfreeze()


def test_frozen_cycles_are_reclaimed_when_the_interval_has_passed():
    now = [0.0]
    collector = Collector(clock=lambda: now[0], resident=lambda: None)
    gc.unfreeze()
    try:
        collector._reclaimed_at = 0.0
        for _ in range(500):
            Node()  # garbage at once, kept only by its own cycle
        collector.tick()  # frozen with the rest: no collection sees it now
        assert gc.collect() < 500
        now[0] = RECLAIM_INTERVAL - 1
        collector.tick()
        assert collector.reclaims == 0
        for _ in range(500):
            Node()
        collector.tick()
        now[0] = RECLAIM_INTERVAL
        collector.tick()
        assert collector.reclaims == 1
        assert gc.get_freeze_count() > 0  # frozen again after the reclaim
    finally:
        gc.unfreeze()


def test_frozen_cycles_are_reclaimed_when_memory_has_grown():
    resident = [100 * 2**20]
    collector = Collector(clock=lambda: 0.0, resident=lambda: resident[0])
    gc.unfreeze()
    try:
        collector._reclaim()  # as start() does
        resident[0] += RECLAIM_AFTER_GROWTH - 1
        collector.tick()
        assert collector.reclaims == 0
        resident[0] += 1
        collector.tick()
        assert collector.reclaims == 1
        collector.tick()  # measured again after the reclaim: not due again
        assert collector.reclaims == 1
    finally:
        gc.unfreeze()


def served_connections(server: ServerHandle) -> None:
    """Connections ending every way a client can make them end: logged in and closed by the client, a failed
    login, a protocol violation, nothing sent at all, logged in and reset (before the fix in ``Connection.run``
    each left the whole connection as a cycle: asyncio raised the reset again in ``wait_closed``), one ApiVersions
    and gone."""
    address = server.sasl
    for _ in range(ROUNDS):
        with Wire(address) as wire:
            wire.request(ApiVersionsRequest(client_software_name="gc", client_software_version="1"))
            wire.login(ADMIN, ADMIN_PASSWORD)
        with Wire(address) as wire, pytest.raises(AssertionError):
            wire.login(ADMIN, "wrong password")
        with Wire(address) as wire:
            wire.send_raw(frame(b"\xff" * 12))  # an API key no client sends: the server closes it
            assert wire.closed()
        Wire(address).close()
        with Wire(address) as wire:  # logged in, then reset, as a killed client's connection ends
            wire.login(ADMIN, ADMIN_PASSWORD)
            wire.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with Wire(server.plaintext) as wire:
            wire.request(ApiVersionsRequest(client_software_name="gc", client_software_version="1"))


async def restart(server: ServerHandle) -> None:
    server.server.collector.start()


def server_side_garbage(modules: tuple[str, ...]) -> Counter[str]:
    """The garbage cycles a full collection finds now, frozen objects included, by type (of ``modules``)."""
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith(modules))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def wait_until_all_closed(server: ServerHandle) -> None:
    deadline = time.monotonic() + 10
    while server.server.admission.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)  # the server's side of each connection ends on its own loop
    assert server.server.admission.open_connections == 0


@contextmanager
def garbage_cycles_left(server: ServerHandle, modules: tuple[str, ...]) -> Iterator[Counter[str]]:
    """The garbage cycles (of types from ``modules``) that what the block does leaves once every connection of
    ``server`` has closed, those a finalizer breaks included (``tests.garbage``); the server's collector is paused
    meanwhile (its ticks would freeze what is counted), and the cyclic collector is off."""
    server.run(server.server.collector.stop())
    # Frozen garbage of earlier tests' servers (their collectors froze it) is freed now, not counted as this block's.
    gc.unfreeze()
    gc.collect()
    gc.disable()
    found: Counter[str] = Counter()
    try:
        yield found
        wait_until_all_closed(server)
        audit = server.server.audit
        if audit is not None:  # its writer's thread frees each batch once written: not while counting
            server.run(audit.flush())
        assert not gc.isenabled(), "something enabled the collector meanwhile: it may have freed what is counted"
        with parked(server):
            found.update(freed_only_by_the_collector(modules))
    finally:
        gc.enable()
        server.run(restart(server))


@isolated
def test_served_connections_leave_no_garbage_cycles(server: ServerHandle):
    with garbage_cycles_left(server, ("kafkaguard", "asyncio", "socket", "ssl")) as ours:
        served_connections(server)
    assert ours == Counter(), f"{6 * ROUNDS} connections left garbage cycles: {ours.most_common(10)}"


def closed_transport_garbage() -> Counter[str]:
    """The garbage cycles one closed asyncio socket transport leaves (fully closed: its connection lost)."""

    async def close_one() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
        transport.close()
        await asyncio.sleep(0)  # connection_lost runs
        b.close()

    gc.unfreeze()  # as garbage_cycles_left: earlier servers' frozen garbage is not this one transport's
    gc.collect()
    gc.disable()
    try:
        asyncio.run(close_one())
        return server_side_garbage(("asyncio",))
    finally:
        gc.enable()


def test_asyncio_leaves_a_transport_cycle_which_the_collector_breaks(monkeypatch: pytest.MonkeyPatch):
    """What the checks above would see without ``break_transport_cycles``; and that it removes it."""
    break_transport_cycles()
    transport_class = getattr(selector_events, "_SelectorSocketTransport")  # noqa: B009 - private to asyncio
    patched = transport_class._call_connection_lost
    monkeypatch.setattr(transport_class, "_call_connection_lost", patched.__wrapped__)
    assert "_SelectorSocketTransport" in closed_transport_garbage()  # asyncio 3.11 as it is
    monkeypatch.setattr(transport_class, "_call_connection_lost", patched)
    assert closed_transport_garbage() == Counter()
    break_transport_cycles()  # idempotent: the wrapper is not wrapped again
    assert transport_class._call_connection_lost is patched


@isolated
def test_sasl_ssl_connections_leave_no_garbage_cycles(server: ServerHandle, tls_files: TlsFiles):
    """TLS connections end through asyncio's SSL protocol: they must not leave cycles either."""

    context = ssl.create_default_context(cafile=str(tls_files.certfile))
    with garbage_cycles_left(server, ("kafkaguard", "asyncio", "socket", "ssl")) as ours:
        for _ in range(10):
            with Wire(server.sasl_ssl, tls=context) as wire:
                wire.login(ADMIN, ADMIN_PASSWORD)
    assert ours == Counter(), f"TLS connections left garbage cycles: {ours.most_common(10)}"
