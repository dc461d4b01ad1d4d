"""Free ports for servers the tests start: one probe for every suite that needs a block of them."""

from __future__ import annotations

import random
import socket
from collections.abc import Sequence

#: Where blocks are looked for: below Linux's ephemeral range (32768 and up), where a busy machine's outgoing
#: connections hold ports by the thousand.
LOW, HIGH = 15_000, 32_000


def free_port_block(size: int, hosts: Sequence[str] = ("127.0.0.1",)) -> int:
    """A first port P with P … P + size - 1 free on every one of ``hosts`` right now, probed with SO_REUSEADDR as
    the servers bind (a port left in TIME_WAIT is free to them)."""
    for _ in range(500):
        first = random.randrange(LOW, HIGH - size)
        if all(bindable(host, first + i) for i in range(size) for host in hosts):
            return first
    raise RuntimeError(f"no block of {size} free ports on {', '.join(hosts)}")


def bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
