r"""The PROXY protocol, versions 1 and 2 (HAProxy's ``doc/proxy-protocol.txt``): the header a load balancer sends
first on a connection it relays, naming the client it relays for. The parser is I/O-free; ``read_proxy_header``
takes exactly the header's bytes off an accepted socket and leaves the rest in the kernel.

Worked example (``data`` is everything the connection has sent so far)::

    parse_proxy_header(b"")                                    -> Incomplete()  nothing to decide on yet
    parse_proxy_header(b"\x00\x00\x00\x2a\x00\x12...")          -> NoHeader()    a Kafka frame: decided on byte 1
    parse_proxy_header(b"\x16\x03\x01\x02\x00...")             -> NoHeader()    a TLS ClientHello: likewise
    parse_proxy_header(b"PROXY TCP4 203.0.113.7 10.0.0.5 40")  -> Incomplete()  no CRLF yet: all 34 bytes are header
    parse_proxy_header(b"PROXY TCP4 203.0.113.7 10.0.0.5 40000 9092\r\n\x00\x00\x00\x2a...")
        -> ProxyHeader(version=1, command=PROXY, family=TCP4, source=("203.0.113.7", 40000),
                       destination=("10.0.0.5", 9092), length=44, tlvs=())    the Kafka frame starts at data[44]
    parse_proxy_header(b"PROXY TCP4 203.0.113.7 10.0.0.5 70000 9092\r\n")   -> raises ProxyHeaderError (the port)

**Decided on the first byte.** A header begins ``P`` (v1, ``PROXY ``) or ``\r`` (v2's 12-byte signature). A Kafka
frame begins with its big-endian int32 size, and those first bytes would announce at least 0x0D000000 bytes
(218 MB, above the 100 MiB ``max_request_bytes`` default); a TLS record begins 0x16. So any other first byte is
``NoHeader``, and a first byte of ``P`` or ``\r`` commits the connection to a header: a later mismatch is a
``ProxyHeaderError``, never ``NoHeader``.

**Incomplete's guarantee.** ``Incomplete`` means: every byte of ``data`` belongs to the header. For non-empty
``data``: any continuation either yields a ``ProxyHeader`` whose ``length`` is more than ``len(data)`` or raises
``ProxyHeaderError``, never ``NoHeader`` (``b""`` is Incomplete vacuously: it has no bytes, and may still turn out
to be ``NoHeader``). A caller may therefore consume those bytes and parse again with
them kept in front, as ``read_proxy_header`` does, so that a peer trickling bytes cannot make it re-read the kernel
queue. In every result, ``length <= len(data)``.

**Bounds.** A v1 line is at most 107 bytes with its CRLF (the spec's worst case); a v2 header at most
``MAX_HEADER_BYTES``, checked from its 16-byte fixed part before a byte of its address block is needed. Neither
copies more than that.

**No address: use the socket's.** ``source`` and ``destination`` are None for v1 ``UNKNOWN``, for v2 ``LOCAL``
(a health check of the load balancer's own: the address block, TLVs included, is discarded, as the spec says), for
v2 ``UNSPEC`` (its block is opaque: no TLVs are read from it) and for v2 ``AF_UNIX``. AF_UNIX is accepted rather
than refused because the spec asks receivers to fall back to UNSPEC for valid combinations they do not implement;
a Unix path could never be a Kafka host ACL's host anyway. Its 216-byte address block must be there; TLVs after it
are read. UDP over IPv4/IPv6 (valid combinations, if odd in front of Kafka) carry their addresses like TCP.

Not implemented: the CRC32C TLV (0x03) is returned, not verified (the spec lets a receiver not support it); the
SSL TLV's sub-TLVs are not unpacked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kafkaguard.protocol.errors import ProtocolError

#: A v2 header's largest total size (16-byte fixed part included) accepted. The format allows 16 + 65,535 bytes,
#: but what load balancers send is far smaller: TCP over IPv6 needs 36 bytes of addresses, AF_UNIX 216, and the TLVs
#: in use are short (AWS's VPC endpoint id 0xEA ~25 bytes, Azure's Private Link id 0xEE 5, GCP's PSC id 0xE0 8, an
#: ALPN or authority a few dozen, a unique id at most 128, HAProxy's SSL TLV with version, cipher and CN a few
#: hundred): under 1 KiB altogether. The spec also says the whole header fits in one MSS (~1,460 bytes). The cap
#: leaves room for that while bounding what an unauthenticated connection makes us buffer.
MAX_HEADER_BYTES: Final = 2048
#: A v1 line's longest form, CRLF included: ``PROXY UNKNOWN <39-char IPv6> <39-char IPv6> 65535 65535\r\n``.
MAX_V1_BYTES: Final = 107

_V1_PREFIX: Final = b"PROXY "
_V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
_V2_FIXED_BYTES: Final = 16
_TLV_HEAD_BYTES: Final = 3
_V1_PROTOCOLS: Final = (b"TCP4", b"TCP6", b"UNKNOWN")
_V1_IPV4 = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}", re.ASCII)
_V1_IPV6 = re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*", re.ASCII)  # inet_ntop's forms, ::ffff:1.2.3.4 included
_V1_PORT = re.compile(r"0|[1-9][0-9]{0,4}", re.ASCII)


class ProxyHeaderError(ProtocolError):
    """A malformed or refused PROXY protocol header; the connection is closed."""

    #: The header came from a trusted proxy, not from the client it relays: penalizing the proxy's address would
    #: refuse everyone behind it.
    sent_by_client = False


class ProxyCommand(Enum):
    """v2's command nibble (v1 headers are all PROXY)."""

    LOCAL = 0x0
    PROXY = 0x1


class ProxyFamily(Enum):
    """v2's address family and transport byte; v1's TCP4, TCP6 and UNKNOWN (as UNSPEC) map onto it."""

    UNSPEC = 0x00
    TCP4 = 0x11
    UDP4 = 0x12
    TCP6 = 0x21
    UDP6 = 0x22
    UNIX_STREAM = 0x31
    UNIX_DGRAM = 0x32


#: The address block each family needs in v2: two addresses and, for IP, two ports.
_ADDRESS_BYTES: Final = {
    ProxyFamily.UNSPEC: 0,
    ProxyFamily.TCP4: 12,
    ProxyFamily.UDP4: 12,
    ProxyFamily.TCP6: 36,
    ProxyFamily.UDP6: 36,
    ProxyFamily.UNIX_STREAM: 216,
    ProxyFamily.UNIX_DGRAM: 216,
}
_FAMILIES: Final = {family.value: family for family in ProxyFamily}

#: ``(ip, port)``; the ip in Python's ``ipaddress`` spelling (IPv6 compressed, lower case), as ``getpeername``'s.
Address = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyHeader:
    """A complete, valid header. ``source``/``destination`` None: use the socket's own addresses."""

    version: int
    command: ProxyCommand
    family: ProxyFamily
    source: Address | None
    destination: Address | None
    #: Bytes the header took at the start of ``data``; what follows belongs to the protocol it precedes.
    length: int
    #: v2's TLVs as ``(type, value)``, in order, duplicates kept.
    tlvs: tuple[tuple[int, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Incomplete:
    """More bytes are needed, and every byte so far belongs to the header (the module's guarantee)."""


@dataclass(frozen=True, slots=True)
class NoHeader:
    """The connection does not begin with a PROXY header; nothing of it belongs to one."""


def parse_proxy_header(data: bytes) -> ProxyHeader | Incomplete | NoHeader:
    """The header at the start of ``data`` (what the connection has sent so far), or what is known without one.

    :raises ProxyHeaderError: the bytes began a header but are not a valid one (the message says where and why).
    """
    if not data:
        return Incomplete()
    if data[0] == _V1_PREFIX[0]:
        return _parse_v1(data)
    if data[0] == _V2_SIGNATURE[0]:
        return _parse_v2(data)
    return NoHeader()


# ------------------------------------------------------------------------------------------------------------ v1


def _parse_v1(data: bytes) -> ProxyHeader | Incomplete:
    end = data.find(b"\r\n", 0, MAX_V1_BYTES)
    if end < 0:
        _check_v1_start(data[:MAX_V1_BYTES], complete=False)
        if len(data) >= MAX_V1_BYTES:
            raise ProxyHeaderError(f"a PROXY v1 line without CRLF in its first {MAX_V1_BYTES} bytes")
        return Incomplete()
    line = data[:end]
    _check_v1_start(line, complete=True)
    fields = line.decode("ascii").split(" ")  # ASCII: checked above
    if len(fields) < 2:
        raise ProxyHeaderError(f"a PROXY v1 line {line!r} ends before its protocol")
    if fields[1] == "UNKNOWN":  # the rest of the line is to be ignored (spec 2.1)
        return ProxyHeader(
            version=1,
            command=ProxyCommand.PROXY,
            family=ProxyFamily.UNSPEC,
            source=None,
            destination=None,
            length=end + 2,
        )
    if len(fields) != 6 or fields[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError(
            f"a PROXY v1 line of {len(fields)} fields separated by single spaces; 6 expected, the 2nd TCP4 or TCP6"
        )
    family = ProxyFamily[fields[1]]
    return ProxyHeader(
        version=1,
        command=ProxyCommand.PROXY,
        family=family,
        source=(_v1_ip(fields[2], family, "source"), _v1_port(fields[4], "source")),
        destination=(_v1_ip(fields[3], family, "destination"), _v1_port(fields[5], "destination")),
        length=end + 2,
    )


def _check_v1_start(text: bytes, *, complete: bool) -> None:
    """Refuse as early as possible what no v1 line can begin with: ``text`` is the line so far (``complete``: the
    whole line), without its CRLF."""
    start = text[: len(_V1_PREFIX)]
    if start != _V1_PREFIX[: len(start)]:
        raise ProxyHeaderError(f"a connection beginning {start!r} is neither a PROXY header nor Kafka")
    body = text[:-1] if not complete and text.endswith(b"\r") else text  # a last CR may be the CRLF's
    for offset, byte in enumerate(body):
        if not 0x20 <= byte <= 0x7E:
            raise ProxyHeaderError(f"byte 0x{byte:02x} at offset {offset} of a PROXY v1 line (printable ASCII only)")
    word = body[len(_V1_PREFIX) :].split(b" ", 1)
    known = any(p == word[0] if len(word) > 1 else p.startswith(word[0]) for p in _V1_PROTOCOLS)
    if not known:
        raise ProxyHeaderError(f"PROXY v1 protocol {word[0]!r}: TCP4, TCP6 or UNKNOWN expected")


def _v1_ip(text: str, family: ProxyFamily, which: str) -> str:
    pattern, kind = (_V1_IPV4, "IPv4") if family is ProxyFamily.TCP4 else (_V1_IPV6, "IPv6")
    try:
        if pattern.fullmatch(text) is None:
            raise ValueError(text)
        ip = ipaddress.IPv4Address(text) if family is ProxyFamily.TCP4 else ipaddress.IPv6Address(text)
    except ValueError as e:
        raise ProxyHeaderError(f"PROXY v1 {which} address {text!r} is not an {kind} address ({family.name})") from e
    return str(ip)


def _v1_port(text: str, which: str) -> int:
    if _V1_PORT.fullmatch(text) is None or int(text) > 0xFFFF:
        raise ProxyHeaderError(f"PROXY v1 {which} port {text!r}: a decimal 0-65535 without leading zeros expected")
    return int(text)


# ------------------------------------------------------------------------------------------------------------ v2


def _parse_v2(data: bytes) -> ProxyHeader | Incomplete:
    start = data[: len(_V2_SIGNATURE)]
    if start != _V2_SIGNATURE[: len(start)]:
        raise ProxyHeaderError(f"a connection beginning {start!r} is neither a PROXY header nor Kafka")
    if len(data) > 12:
        version, command_code = data[12] >> 4, data[12] & 0x0F
        if version != 2:
            raise ProxyHeaderError(f"PROXY v2 header of version {version}; 2 expected")
        if command_code > ProxyCommand.PROXY.value:
            raise ProxyHeaderError(f"PROXY v2 command 0x{command_code:x}: LOCAL (0) or PROXY (1) expected")
    if len(data) > 13 and data[13] not in _FAMILIES:
        raise ProxyHeaderError(f"PROXY v2 address family and transport 0x{data[13]:02x} are not a known combination")
    if len(data) < _V2_FIXED_BYTES:
        return Incomplete()
    command, family = ProxyCommand(data[12] & 0x0F), _FAMILIES[data[13]]
    block_length = int.from_bytes(data[14:16], "big")
    total = _V2_FIXED_BYTES + block_length
    if total > MAX_HEADER_BYTES:
        raise ProxyHeaderError(f"PROXY v2 header of {total} bytes exceeds the limit of {MAX_HEADER_BYTES} bytes")
    needed = _ADDRESS_BYTES[family]
    if command is ProxyCommand.PROXY and block_length < needed:
        raise ProxyHeaderError(f"PROXY v2 address block of {block_length} bytes; {family.name} needs {needed}")
    if len(data) < total:
        return Incomplete()
    if command is ProxyCommand.LOCAL or family is ProxyFamily.UNSPEC:
        return ProxyHeader(version=2, command=command, family=family, source=None, destination=None, length=total)
    block = data[_V2_FIXED_BYTES:total]
    source: Address | None = None
    destination: Address | None = None
    if needed in (12, 36):
        size = (needed - 4) // 2
        ip = ipaddress.IPv4Address if size == 4 else ipaddress.IPv6Address
        ports = block[2 * size : needed]
        source = (str(ip(block[:size])), int.from_bytes(ports[:2], "big"))
        destination = (str(ip(block[size : 2 * size])), int.from_bytes(ports[2:], "big"))
    return ProxyHeader(
        version=2,
        command=command,
        family=family,
        source=source,
        destination=destination,
        length=total,
        tlvs=_parse_tlvs(block, needed),
    )


def _parse_tlvs(block: bytes, offset: int) -> tuple[tuple[int, bytes], ...]:
    """The TLVs filling ``block[offset:]`` exactly (offsets in messages count from the header's first byte)."""
    tlvs: list[tuple[int, bytes]] = []
    while offset < len(block):
        if len(block) - offset < _TLV_HEAD_BYTES:
            raise ProxyHeaderError(
                f"PROXY v2 TLV at offset {_V2_FIXED_BYTES + offset} cut after {len(block) - offset} of its "
                f"{_TLV_HEAD_BYTES} type and length bytes"
            )
        kind, size = block[offset], int.from_bytes(block[offset + 1 : offset + 3], "big")
        start = offset + _TLV_HEAD_BYTES
        if start + size > len(block):
            raise ProxyHeaderError(
                f"PROXY v2 TLV 0x{kind:02x} at offset {_V2_FIXED_BYTES + offset} of {size} bytes overruns the "
                f"header by {start + size - len(block)} bytes"
            )
        tlvs.append((kind, block[start : start + size]))
        offset = start + size
    return tuple(tlvs)


# ---------------------------------------------------------------------------------------------------- the socket


async def read_proxy_header(sock: socket.socket) -> ProxyHeader | None:
    """Take the PROXY header off an accepted socket, or None when the connection does not begin with one.

    Bytes are looked at with ``MSG_PEEK`` and only the header's are consumed: what follows it (a Kafka request,
    a TLS ClientHello) stays in the kernel for the transport built afterwards, and with None nothing was consumed.
    An ``Incomplete`` prefix is consumed at once (its bytes are the header's), so each wakeup of the loop's reader
    brings new bytes or an end: a peer trickling bytes costs one wakeup per segment, never a busy loop. Reads use
    ``MSG_DONTWAIT``, so the loop is never blocked even if ``sock`` is blocking. No timeout here: wrap the call in
    the connection's deadline.

    :raises ProxyHeaderError: a malformed or oversized header.
    :raises ConnectionError: the peer closed (or reset) the connection before the header was complete.
    """
    taken = b""  # the consumed prefix: Incomplete, so every byte of it is the header's
    while True:
        peeked = await _receive(sock, max(MAX_HEADER_BYTES - len(taken), 1), socket.MSG_PEEK)
        if not peeked:
            raise ConnectionError(f"connection closed after {len(taken)} bytes of a PROXY header")
        result = parse_proxy_header(taken + peeked)
        if isinstance(result, NoHeader):
            return None  # decided on the first byte, so ``taken`` is empty
        if isinstance(result, ProxyHeader):
            await _consume(sock, result.length - len(taken))
            return result
        taken += await _consume(sock, len(peeked))


async def _receive(sock: socket.socket, size: int, flags: int = 0) -> bytes:
    """``sock.recv(size, flags)`` without blocking: when nothing is queued, wait until the socket is readable."""
    while True:
        try:
            return sock.recv(size, flags | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            await _readable(sock)


async def _consume(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes, which the caller has seen queued (so they are all there)."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = await _receive(sock, size)
        if not chunk:
            raise ConnectionError("connection closed inside a PROXY header")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()
    loop.add_reader(fd, _wake, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
