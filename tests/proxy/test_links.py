"""``proxy.links.open_link``: a connect that is cancelled (a timeout, a watch stopped) leaves no socket open."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kafkaguard.proxy.links import open_link


def test_a_cancelled_connect_closes_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, only an ``OSError`` closed the socket: a connect cut short by ``asyncio.timeout`` (the upstream's
    timeout) or by a stopping broker-settings watch leaked it, which pytest reported as an unclosed socket."""
    dialled: list[socket.socket] = []

    async def never_connects(sock: socket.socket, _address: object) -> None:
        dialled.append(sock)
        await asyncio.Event().wait()

    async def dial() -> None:
        monkeypatch.setattr(asyncio.get_running_loop(), "sock_connect", never_connects)
        async with asyncio.timeout(0.05):
            await open_link("127.0.0.1", 9, None)

    with pytest.raises(TimeoutError):
        asyncio.run(dial())
    assert len(dialled) == 1
    assert dialled[0].fileno() == -1  # closed


def test_a_refused_connect_raises_its_os_error() -> None:
    with socket.socket() as bound:  # bound, not listening: a connect to it is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            asyncio.run(open_link("127.0.0.1", port, None))
