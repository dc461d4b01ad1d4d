"""ACL hosts: client addresses in the form they are compared with (SEMANTICS.md §2), and CIDR blocks (KIP-1276).

An ACL host is ``*``, one address as Java prints it, or — since Kafka 4.4 (KIP-1276) — a CIDR block: any host
containing ``/``. kafkaguard reads CIDR blocks with KIP-1276's rules whatever Kafka version it stands in for (the
README lists this among its deliberate differences from the Kafka 3.9 reference, which compares such a host as
text and so never matches it):

* IPv4 ``a.b.c.d/n`` with one to three decimal digits per octet (``010`` is ten, as Java's ``SubnetUtils`` reads
  it), octets ≤ 255 and ``0 ≤ n ≤ 32``; IPv6 (the address contains ``:``) ``addr/n`` with ``0 ≤ n ≤ 128``. No host
  names, ever (no DNS lookup is made), and no IPv4-mapped IPv6 block (write the IPv4 form).
* A block contains every address whose first ``n`` bits equal the block's: the network and broadcast addresses
  included (``10.0.0.0/31`` holds ``10.0.0.0`` and ``10.0.0.1``; ``/32`` and ``/128`` one address; ``/0`` its
  whole family). Bits after the first ``n`` are ignored (``10.1.2.3/8`` is ``10.0.0.0/8``), as ``SubnetUtils``
  ignores them. An IPv4 block never holds an IPv6 client, nor the reverse.
* An invalid block is refused when an ACL is created (``cidr_error``); one stored anyway (by an older version or a
  store edited by hand) matches no client.
* Filters (DescribeAcls, DeleteAcls) compare host strings exactly, as Kafka's do: the filter ``10.0.0.0/8`` finds
  the ACL ``10.0.0.0/8``, not ``10.1.0.0/16`` and not ``10.1.2.3``.

Hand-written rather than ``ipaddress.ip_network``: that function refuses host bits (``10.1.2.3/8``) and leading
zeros, which KIP-1276 accepts, and the authorizer's hot path wants an ``int`` and a shift, not objects.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache

#: ``SubnetUtils``' IPv4 form: four 1–3 digit octets and a 1–2 digit prefix length.
_IPV4_BLOCK = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})", re.ASCII)
_BITS = {4: 32, 6: 128}


# Cached: every connection asks, at accept and again when it starts, and an ``ipaddress`` parse is a fair share of
# what accepting a connection costs; clients reconnect from the same addresses. Bounded, so that a flood of
# distinct addresses holds at most this many.
@lru_cache(maxsize=4096)
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


#: The prefix length an IPv6 client is counted by (``Settings.ipv6_prefix_length``'s default): one host holds a
#: whole /64 (RFC 6177), so counting each of its 2^64 addresses apart would give one host 2^64 budgets.
DEFAULT_IPV6_PREFIX_LENGTH = 64


@lru_cache(maxsize=4096)
def client_key(address: str, ipv6_prefix_length: int = DEFAULT_IPV6_PREFIX_LENGTH) -> str:
    """What limits and budgets count a client address by: an IPv4 address (or IPv4-mapped IPv6) as itself, an IPv6
    address as its ``/ipv6_prefix_length`` block (``2001:db8:0:1::/64``; ``/128``: the address itself, as
    ``java_host`` prints it), anything else unchanged. Cached like ``java_host``.

    Worked example: ``2001:db8:0:1:aaaa::1`` and ``2001:db8:0:1:bbbb::2`` are both ``2001:db8:0:1::/64``, one
    client; ``::ffff:10.0.0.7`` is ``10.0.0.7``.
    """
    parsed = parse_address(address.split("%", 1)[0])
    if parsed is None:
        return address
    version, value = parsed
    if version == 4:
        return str(ipaddress.IPv4Address(value))
    if ipv6_prefix_length >= 128:
        return java_host(address)
    shift = 128 - ipv6_prefix_length
    network = ipaddress.IPv6Address((value >> shift) << shift)
    return f"{network.compressed}/{ipv6_prefix_length}"


def is_cidr(host: str) -> bool:
    """Whether an ACL host is a CIDR block (valid or not): it contains ``/``."""
    return "/" in host


@dataclass(frozen=True, slots=True)
class CidrBlock:
    """A parsed CIDR block: ``version`` 4 or 6, ``length`` the prefix length, ``network`` the address's first
    ``length`` bits as an integer (``value >> (bits - length)`` of any address it contains)."""

    version: int
    length: int
    network: int

    @property
    def shift(self) -> int:
        """How far an address of this family is shifted right to compare it with ``network``."""
        return _BITS[self.version] - self.length

    def contains(self, address: str) -> bool:
        """Whether the client ``address`` (Java's form, as ``RequestContext.host``) lies in the block."""
        parsed = parse_address(address)
        return parsed is not None and parsed[0] == self.version and parsed[1] >> self.shift == self.network


def cidr_error(host: str) -> str | None:
    """Why ``host`` (which contains ``/``) is not a valid CIDR block, or None when it is. The message starts as
    Kafka 4.4's does (``Invalid CIDR notation '…'``) and says what to fix."""
    block = f"Invalid CIDR notation '{host}'"
    address, _, length_text = host.partition("/")
    if ":" in address:
        if not length_text.isascii() or not length_text.isdigit():
            return f"{block}: the prefix length after '/' must be a number from 0 to 128"
        if int(length_text) > 128:
            return f"{block}: prefix length {int(length_text)} is out of range; an IPv6 block allows 0 to 128"
        try:
            ip = ipaddress.IPv6Address(address)
        except ValueError:
            return f"{block}: '{address}' is not an IPv6 address"
        if ip.ipv4_mapped is not None:
            return f"{block}: an IPv4-mapped IPv6 block is not allowed; write the IPv4 block, e.g. {ip.ipv4_mapped}/…"
        if ip.scope_id is not None:
            return f"{block}: an IPv6 block has no zone (%…)"
        return None
    found = _IPV4_BLOCK.fullmatch(host)
    if found is None:
        return (
            f"{block}: expected an IPv4 block such as 10.0.0.0/8 or an IPv6 block such as 2001:db8::/32 "
            "(host names are not allowed)"
        )
    for octet in found.groups()[:4]:
        if int(octet) > 255:
            return f"{block}: octet {int(octet)} is out of range 0 to 255"
    if int(found.group(5)) > 32:
        return f"{block}: prefix length {int(found.group(5))} is out of range; an IPv4 block allows 0 to 32"
    return None


@lru_cache(maxsize=65_536)
def parse_cidr(host: str) -> CidrBlock | None:
    """The block an ACL host names, or None when it is not a valid CIDR block (then it matches no client).
    Cached: the index parses each stored block once per rebuild, and rebuilds happen on every change."""
    if not is_cidr(host) or cidr_error(host) is not None:
        return None
    address, _, length_text = host.partition("/")
    length = int(length_text)
    if ":" in address:
        version, value = 6, int(ipaddress.IPv6Address(address))
    else:
        version = 4
        value = 0
        for octet in address.split("."):
            value = value << 8 | int(octet)
    return CidrBlock(version, length, value >> (_BITS[version] - length))


@lru_cache(maxsize=65_536)
def parse_address(address: str) -> tuple[int, int] | None:
    """A client address (Java's form) as (IP version, integer value), or None when it is not an IP address.
    Cached because a busy server sees the same few thousand clients again and again: a dict probe, not a parse."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return 4, int(ip.ipv4_mapped)
    return ip.version, int(ip)


def host_matches(acl_host: str, address: str) -> bool:
    """Whether an ACL's host covers the client ``address``: ``*``, the same string, or a CIDR block holding it.
    The slow path (explain, authorize_by_resource_type, who-can); the index answers the same in its own way."""
    if not is_cidr(acl_host):
        return acl_host in ("*", address)
    block = parse_cidr(acl_host)
    return block is not None and block.contains(address)
