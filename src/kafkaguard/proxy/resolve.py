"""Upstream addresses resolved for a dial, without a thread-pool round trip per connection.

Every client connection of the proxy dials its own upstream connection, and ``loop.getaddrinfo`` runs in asyncio's
default executor: a hand-off to a worker thread and back through the loop's self-pipe, two context switches and
about a third of a dial's CPU (``docs/benchmarks.md``, "Figures from the code"), even for an address that is
already numeric. So:

* an IP literal (``10.0.0.7``, ``::1``) is never resolved: its one address is built here;
* a name is resolved through the executor and remembered for ``TTL_SECONDS`` (as Java's clients cache a lookup for
  30 s by default, ``networkaddress.cache.ttl``), so a broker that moves is dialled at its new address within that;
  a failed lookup is not remembered (the next dial asks again).

Cost: a dict lookup per dial; at most ``MAX_NAMES`` names are kept (the brokers' and bootstrap servers' names: a
handful), all forgotten at once beyond it.
"""

from __future__ import annotations

import asyncio
import socket
import time

TTL_SECONDS = 10.0
MAX_NAMES = 1024

#: (family, type, proto, canonname, sockaddr), as ``getaddrinfo`` gives them.
AddressInfo = tuple[
    socket.AddressFamily, socket.SocketKind, int, str, tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes]
]

_resolved: dict[tuple[str, int], tuple[float, list[AddressInfo]]] = {}
#: The clock the TTL is counted on (a test's own).
clock = time.monotonic


async def resolve(host: str, port: int) -> list[AddressInfo]:
    """The addresses to try for ``host:port``, in ``getaddrinfo``'s order.

    :raises OSError: (``socket.gaierror``) the name does not resolve.
    """
    literal = _literal(host, port)
    if literal is not None:
        return literal
    key = (host, port)
    now = clock()
    cached = _resolved.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    infos: list[AddressInfo] = list(await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM))
    if len(_resolved) >= MAX_NAMES:
        _resolved.clear()
    _resolved[key] = (now + TTL_SECONDS, infos)
    return infos


def _literal(host: str, port: int) -> list[AddressInfo] | None:
    """The one address of an IP literal, or None for a name. ``inet_pton`` rather than ``ipaddress``: a fraction of
    a microsecond against ``ipaddress``'s ~13 µs (``model/host.py``'s figure)."""
    if "%" in host:  # an IPv6 address with a zone (fe80::1%eth0): getaddrinfo fills in its scope id
        return None
    for family, address in ((socket.AF_INET, (host, port)), (socket.AF_INET6, (host, port, 0, 0))):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)]
    return None
