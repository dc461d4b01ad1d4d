"""Client addresses in the form ACL hosts are compared with (SEMANTICS.md §2)."""

from __future__ import annotations

import ipaddress


def java_host(address: str) -> str:
    """The client address as Java's ``InetAddress.getHostAddress()`` prints it, which is what Kafka compares ACL
    hosts with: dotted quad for IPv4 and IPv4-mapped IPv6, uncompressed IPv6 (``0:0:0:0:0:0:0:1``) otherwise.
    Anything that is not an IP address is returned unchanged (and so matches only ``*`` or itself)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
    return str(ip)
