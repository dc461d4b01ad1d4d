"""``proxy.resolve``: IP literals are never looked up; names are, once per ``TTL_SECONDS``; failures are not kept."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from kafkaguard.proxy import resolve as resolving
from kafkaguard.proxy.resolve import TTL_SECONDS, resolve


class Lookups:
    """The loop's ``getaddrinfo`` replaced: counts its calls, answers ``answer`` (or raises ``failure``)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self.answer = "10.1.2.3"
        self.failure: OSError | None = None

    async def getaddrinfo(self, host: str, port: int, **_kwargs: object) -> list[object]:
        self.asked.append((host, port))
        if self.failure is not None:
            raise self.failure
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (self.answer, port))]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    now = [1000.0]
    monkeypatch.setattr(resolving, "clock", lambda: now[0])
    monkeypatch.setattr(resolving, "_resolved", {})
    yield now


def run(lookups: Lookups, host: str, port: int, monkeypatch: pytest.MonkeyPatch) -> list[resolving.AddressInfo]:
    async def go() -> list[resolving.AddressInfo]:
        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", lookups.getaddrinfo)
        return await resolve(host, port)

    return asyncio.run(go())


def test_an_ip_literal_is_not_looked_up(clock: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = Lookups()
    assert run(lookups, "127.0.0.1", 9092, monkeypatch) == [
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 9092))
    ]
    assert run(lookups, "::1", 9092, monkeypatch) == [
        (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("::1", 9092, 0, 0))
    ]
    assert lookups.asked == []
    run(lookups, "fe80::1%lo", 9092, monkeypatch)  # a zone: getaddrinfo knows its scope id
    assert lookups.asked == [("fe80::1%lo", 9092)]


def test_a_name_is_looked_up_once_per_ttl(clock: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = Lookups()
    first = run(lookups, "kafka-1.internal", 9092, monkeypatch)
    clock[0] += TTL_SECONDS - 0.1
    assert run(lookups, "kafka-1.internal", 9092, monkeypatch) == first
    assert lookups.asked == [("kafka-1.internal", 9092)]
    lookups.answer = "10.9.9.9"  # the broker moved
    clock[0] += 0.2
    moved = run(lookups, "kafka-1.internal", 9092, monkeypatch)
    assert moved[0][4] == ("10.9.9.9", 9092)
    assert len(lookups.asked) == 2
    run(lookups, "kafka-1.internal", 9093, monkeypatch)  # another port is another entry
    assert len(lookups.asked) == 3


def test_a_failed_lookup_is_asked_again(clock: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = Lookups()
    lookups.failure = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    with pytest.raises(socket.gaierror):
        run(lookups, "gone.internal", 9092, monkeypatch)
    lookups.failure = None
    assert run(lookups, "gone.internal", 9092, monkeypatch)[0][4] == ("10.1.2.3", 9092)
    assert len(lookups.asked) == 2
