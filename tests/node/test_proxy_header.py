"""The PROXY protocol header (``node.proxy_header``): spec vectors, each hostile case, properties of the parser,
and ``read_proxy_header`` on real loopback sockets (only the header's bytes are consumed)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
from collections.abc import Awaitable, Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.node.proxy_header import (
    MAX_HEADER_BYTES,
    MAX_V1_BYTES,
    Incomplete,
    NoHeader,
    ProxyCommand,
    ProxyFamily,
    ProxyHeader,
    ProxyHeaderError,
    parse_proxy_header,
    read_proxy_header,
)
from kafkaguard.protocol.framing import encode_frame
from tests.node.proxy_relay import ProxyRelay, encode_v1, encode_v2

SIGNATURE = bytes.fromhex("0d0a0d0a000d0a515549540a")
#: An ApiVersions v3 request (api key 18, correlation id 7, client id "test"), framed: what follows a header.
KAFKA_FRAME = encode_frame(struct.pack(">hhih", 18, 3, 7, 4) + b"test" + b"\x00\x05kgd\x03\x300\x00")
#: The first bytes of a TLS 1.2+ ClientHello record.
CLIENT_HELLO = bytes.fromhex("160301020001000100fc0303") + bytes(32)

PROXY, LOCAL = ProxyCommand.PROXY, ProxyCommand.LOCAL


def header(
    version: int,
    command: ProxyCommand,
    family: ProxyFamily,
    source: tuple[str, int] | None,
    destination: tuple[str, int] | None,
    length: int,
    tlvs: Sequence[tuple[int, bytes]] = (),
) -> ProxyHeader:
    return ProxyHeader(
        version=version, command=command, family=family, source=source, destination=destination, length=length,
        tlvs=tuple(tlvs),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------- vectors

#: haproxy 2.x ``send-proxy-v2`` before an HTTP request (its hex dump in seriousben/experiment-proxy-protocol).
HAPROXY_V2_TCP4 = bytes.fromhex("0d0a0d0a000d0a515549540a 2111000c ac130001 ac130003 a652 0050")
AWS_VPCE = b"\x01vpce-08d2bf15fac5001c9"  # 0xEA: subtype 0x01, the VPC endpoint id
AZURE_LINK = b"\x01\x8b\xc7\xa4\x21"  # 0xEE: subtype 0x01, the Private Link id (little endian)
GCP_PSC = bytes.fromhex("0000000000003039")  # 0xE0: the Private Service Connect connection id
V2_TCP6_TLVS = (
    SIGNATURE
    + bytes.fromhex("2121 0051")  # PROXY, TCP over IPv6, 36 + 26 + 8 + 11 = 81 bytes follow
    + bytes.fromhex("20010db8000000000000000000000007 20010db8000000000000000000000005 9c40 2384")
    + b"\xea\x00\x17" + AWS_VPCE
    + b"\xee\x00\x05" + AZURE_LINK
    + b"\xe0\x00\x08" + GCP_PSC
)  # fmt: skip
V1_TCP6_MAX = b"PROXY TCP6 " + b"ffff:" * 7 + b"ffff " + b"ffff:" * 7 + b"ffff 65535 65535\r\n"
V1_UNKNOWN_MAX = b"PROXY UNKNOWN " + b"ffff:" * 7 + b"ffff " + b"ffff:" * 7 + b"ffff 65535 65535\r\n"
ALL_ONES_6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"

VECTORS = {
    "v1 TCP4 (the spec's example)": (
        b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n",
        header(1, PROXY, ProxyFamily.TCP4, ("192.168.0.1", 56324), ("192.168.0.11", 443), 47),
    ),
    "v1 TCP4 longest (56 bytes)": (
        b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
        header(1, PROXY, ProxyFamily.TCP4, ("255.255.255.255", 65535), ("255.255.255.255", 65535), 56),
    ),
    "v1 TCP4 zeros": (
        b"PROXY TCP4 0.0.0.0 10.0.0.5 0 9092\r\n",
        header(1, PROXY, ProxyFamily.TCP4, ("0.0.0.0", 0), ("10.0.0.5", 9092), 36),  # noqa: S104 (an address, not a bind)
    ),
    "v1 TCP6": (
        b"PROXY TCP6 2001:db8::7 2001:db8::5 40000 9092\r\n",
        header(1, PROXY, ProxyFamily.TCP6, ("2001:db8::7", 40000), ("2001:db8::5", 9092), 47),
    ),
    "v1 TCP6 uncompressed upper case (normalized)": (
        b"PROXY TCP6 2001:0DB8:0000:0000:0000:0000:0000:0007 ::1 40000 9092\r\n",
        header(1, PROXY, ProxyFamily.TCP6, ("2001:db8::7", 40000), ("::1", 9092), 67),
    ),
    "v1 TCP6 longest (104 bytes)": (
        V1_TCP6_MAX,
        header(1, PROXY, ProxyFamily.TCP6, (ALL_ONES_6, 65535), (ALL_ONES_6, 65535), 104),
    ),
    "v1 UNKNOWN": (b"PROXY UNKNOWN\r\n", header(1, PROXY, ProxyFamily.UNSPEC, None, None, 15)),
    "v1 UNKNOWN longest, the rest ignored (107 bytes)": (
        V1_UNKNOWN_MAX,
        header(1, PROXY, ProxyFamily.UNSPEC, None, None, 107),
    ),
    "v2 TCP4 from haproxy": (
        HAPROXY_V2_TCP4,
        header(2, PROXY, ProxyFamily.TCP4, ("172.19.0.1", 42578), ("172.19.0.3", 80), 28),
    ),
    "v2 TCP6 with AWS, Azure and GCP TLVs": (
        V2_TCP6_TLVS,
        header(
            2,
            PROXY,
            ProxyFamily.TCP6,
            ("2001:db8::7", 40000),
            ("2001:db8::5", 9092),
            97,
            [(0xEA, AWS_VPCE), (0xEE, AZURE_LINK), (0xE0, GCP_PSC)],
        ),
    ),
    "v2 TCP4 with an empty NOOP TLV": (
        SIGNATURE + bytes.fromhex("2111 000f cb007107 0a000005 9c40 2384 040000"),
        header(2, PROXY, ProxyFamily.TCP4, ("203.0.113.7", 40000), ("10.0.0.5", 9092), 31, [(0x04, b"")]),
    ),
    "v2 UDP4 (its addresses, like TCP)": (
        SIGNATURE + bytes.fromhex("2112 000c cb007107 0a000005 9c40 2384"),
        header(2, PROXY, ProxyFamily.UDP4, ("203.0.113.7", 40000), ("10.0.0.5", 9092), 28),
    ),
    "v2 LOCAL (a health check)": (
        SIGNATURE + bytes.fromhex("2000 0000"),
        header(2, LOCAL, ProxyFamily.UNSPEC, None, None, 16),
    ),
    "v2 LOCAL with an address block, skipped": (
        SIGNATURE + bytes.fromhex("2011 000c cb007107 0a000005 9c40 2384"),
        header(2, LOCAL, ProxyFamily.TCP4, None, None, 28),
    ),
    "v2 LOCAL with TLVs, discarded": (
        SIGNATURE + bytes.fromhex("2000 0005 01000268 32"),
        header(2, LOCAL, ProxyFamily.UNSPEC, None, None, 21),
    ),
    "v2 PROXY UNSPEC (no address), its block opaque": (
        SIGNATURE + bytes.fromhex("2100 0002 ffff"),
        header(2, PROXY, ProxyFamily.UNSPEC, None, None, 18),
    ),
    "v2 AF_UNIX stream (no address), its TLVs read": (
        SIGNATURE + bytes.fromhex("2131 00dd") + b"/run/a.sock".ljust(108, b"\0") + bytes(108) + b"\x01\x00\x02h2",
        header(2, PROXY, ProxyFamily.UNIX_STREAM, None, None, 16 + 221, [(0x01, b"h2")]),
    ),
}


@pytest.mark.parametrize(("data", "expected"), VECTORS.values(), ids=VECTORS.keys())
def test_a_spec_vector_is_parsed_and_what_follows_it_is_left(data: bytes, expected: ProxyHeader) -> None:
    assert parse_proxy_header(data) == expected
    assert parse_proxy_header(data + KAFKA_FRAME) == expected
    assert parse_proxy_header(data + CLIENT_HELLO) == expected


@pytest.mark.parametrize(("data", "expected"), VECTORS.values(), ids=VECTORS.keys())
def test_a_vector_truncated_at_every_byte_offset_is_incomplete(data: bytes, expected: ProxyHeader) -> None:
    assert expected.length == len(data)
    for end in range(len(data)):
        assert parse_proxy_header(data[:end]) == Incomplete(), f"{data[:end]!r}"


def test_the_module_docstring_example_holds() -> None:
    example = b"PROXY TCP4 203.0.113.7 10.0.0.5 40000 9092\r\n"
    assert parse_proxy_header(example[:34]) == Incomplete()
    assert parse_proxy_header(example + KAFKA_FRAME) == header(
        1, PROXY, ProxyFamily.TCP4, ("203.0.113.7", 40000), ("10.0.0.5", 9092), 44
    )
    with pytest.raises(ProxyHeaderError, match="port '70000'"):
        parse_proxy_header(example.replace(b"40000", b"70000"))


@pytest.mark.parametrize(
    "data",
    [KAFKA_FRAME, CLIENT_HELLO, b"\x00", b"\x16", b"GET / HTTP/1.1\r\n", b"proxy TCP4 ", b"\n\r\n"],
    ids=["kafka frame", "tls client hello", "zero byte", "tls byte", "http", "lower case proxy", "lf"],
)
def test_anything_else_is_no_header_from_its_first_byte(data: bytes) -> None:
    assert parse_proxy_header(data) == NoHeader()
    assert parse_proxy_header(data[:1]) == NoHeader()


def test_nothing_yet_is_incomplete() -> None:
    assert parse_proxy_header(b"") == Incomplete()


# ----------------------------------------------------------------------------------------------- hostile, v1

V1_ERRORS = {
    "not PROXY after P": (b"PX", "neither a PROXY header nor Kafka"),
    "no space after PROXY": (b"PROXY\r\n", "ends before its protocol"),
    "unknown protocol": (b"PROXY TCP5 ", "protocol b'TCP5'"),
    "UNKNOWN glued": (b"PROXY UNKNOWNX\r\n", "protocol b'UNKNOWNX'"),
    "protocol cut by CRLF": (b"PROXY TCP\r\n", "6 expected"),
    "nothing after PROXY": (b"PROXY \r\n", "6 expected"),
    "missing port": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "5 fields"),
    "extra field": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "7 fields"),
    "two spaces": (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", "7 fields"),
    "trailing space": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", "7 fields"),
    "port above 65535": (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "source port '65536'"),
    "port with a leading zero": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 0443\r\n", "destination port '0443'"),
    "negative port": (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "source port '-1'"),
    "port in hex": (b"PROXY TCP4 1.2.3.4 5.6.7.8 0x10 2\r\n", "source port '0x10'"),
    "octet above 255": (b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", "source address '1.2.3.256'"),
    "octet with a leading zero": (b"PROXY TCP4 192.168.000.1 5.6.7.8 1 2\r\n", "source address '192.168.000.1'"),
    "three octets": (b"PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", "source address '1.2.3'"),
    "IPv6 under TCP4": (b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", "not an IPv4 address"),
    "IPv4 under TCP6": (b"PROXY TCP6 ::1 5.6.7.8 1 2\r\n", "destination address '5.6.7.8' is not an IPv6"),
    "IPv6 scope id": (b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", "source address 'fe80::1%eth0'"),
    "IPv6 too long": (b"PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n", "source address"),
    "a host name": (b"PROXY TCP4 localhost 5.6.7.8 1 2\r\n", "source address 'localhost'"),
    "bare LF": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "byte 0x0a at offset 30"),
    "CR before CRLF": (b"PROXY UNKNOWN\r\r\n", "byte 0x0d at offset 13"),
    "bare CR inside": (b"PROXY TCP4\r1", "byte 0x0d at offset 10"),
    "a tab": (b"PROXY TCP4\t", "byte 0x09"),
    "a zero byte": (b"PROXY UNKNOWN \x00", "byte 0x00"),
    "non-ASCII": ("PROXY UNKNOWN é".encode(), "byte 0xc3"),
    "107 bytes without CRLF": (b"PROXY UNKNOWN " + b"f" * 93, "without CRLF in its first 107 bytes"),
    "CRLF just after 107 bytes": (V1_UNKNOWN_MAX[:-2] + b"f\r\n", "without CRLF in its first 107 bytes"),
}


@pytest.mark.parametrize(("data", "message"), V1_ERRORS.values(), ids=V1_ERRORS.keys())
def test_a_malformed_v1_line_is_refused_saying_why(data: bytes, message: str) -> None:
    with pytest.raises(ProxyHeaderError) as refused:
        parse_proxy_header(data)
    assert message in str(refused.value)
    # with more bytes after it, the same verdict: never NoHeader, never a header
    with pytest.raises(ProxyHeaderError):
        parse_proxy_header(data + b"\r\n" + KAFKA_FRAME)


def test_a_v1_line_just_under_the_limit_is_still_incomplete() -> None:
    assert parse_proxy_header(b"PROXY UNKNOWN " + b"f" * 92) == Incomplete()
    assert len(V1_UNKNOWN_MAX) == MAX_V1_BYTES


# ----------------------------------------------------------------------------------------------- hostile, v2

V2_ERRORS = {
    "version 1 nibble": (SIGNATURE + b"\x11", "version 1; 2 expected"),
    "version 3 nibble": (SIGNATURE + b"\x31", "version 3; 2 expected"),
    "version 0 nibble": (SIGNATURE + b"\x01\x11", "version 0"),
    "command 2": (SIGNATURE + b"\x22", "command 0x2"),
    "command 0xf": (SIGNATURE + b"\x2f\x11\x00\x0c", "command 0xf"),
    "family 4": (SIGNATURE + b"\x21\x41", "0x41 are not a known combination"),
    "INET with UNSPEC transport": (SIGNATURE + b"\x21\x10", "0x10"),
    "UNSPEC with STREAM": (SIGNATURE + b"\x21\x01", "0x01"),
    "transport 3": (SIGNATURE + b"\x21\x13", "0x13"),
    "LOCAL with an unknown family": (SIGNATURE + b"\x20\xff", "0xff"),
    "a length above the cap": (SIGNATURE + b"\x21\x11\xff\xff", "header of 65551 bytes exceeds the limit"),
    "one byte above the cap": (
        SIGNATURE + b"\x21\x11" + (MAX_HEADER_BYTES - 15).to_bytes(2, "big"),
        f"header of {MAX_HEADER_BYTES + 1} bytes exceeds the limit of {MAX_HEADER_BYTES} bytes",
    ),
    "TCP4 block short of 12": (SIGNATURE + b"\x21\x11\x00\x0b" + bytes(11), "11 bytes; TCP4 needs 12"),
    "TCP6 block short of 36": (SIGNATURE + b"\x21\x21\x00\x0c" + bytes(12), "12 bytes; TCP6 needs 36"),
    "AF_UNIX block short of 216": (SIGNATURE + b"\x21\x31\x00\x0c" + bytes(12), "UNIX_STREAM needs 216"),
    "TLV head cut after 1 byte": (SIGNATURE + b"\x21\x11\x00\x0d" + bytes(12) + b"\x04", "cut after 1 of its 3"),
    "TLV head cut after 2 bytes": (SIGNATURE + b"\x21\x11\x00\x0e" + bytes(12) + b"\x04\x00", "cut after 2 of its 3"),
    "TLV overrunning by 1": (
        SIGNATURE + b"\x21\x11\x00\x11" + bytes(12) + b"\x01\x00\x03h2",
        "overruns the header by 1",
    ),
    "TLV overrunning the block": (
        SIGNATURE + b"\x21\x11\x00\x13" + bytes(12) + b"\x04\x00\x00" + b"\xea\xff\xff\x01",
        "TLV 0xea at offset 31 of 65535 bytes",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("data", "message"), V2_ERRORS.values(), ids=V2_ERRORS.keys())
def test_a_malformed_v2_header_is_refused_saying_why_as_soon_as_its_bytes_show_it(data: bytes, message: str) -> None:
    with pytest.raises(ProxyHeaderError) as refused:
        parse_proxy_header(data)  # no more bytes than the case needs: refused before the rest arrives
    assert message in str(refused.value)
    with pytest.raises(ProxyHeaderError):
        parse_proxy_header(data + bytes(MAX_HEADER_BYTES) + KAFKA_FRAME)


@pytest.mark.parametrize("index", range(1, 12))
def test_a_bad_signature_byte_is_refused(index: int) -> None:
    data = bytearray(HAPROXY_V2_TCP4)
    data[index] ^= 0x40
    with pytest.raises(ProxyHeaderError, match="neither a PROXY header nor Kafka"):
        parse_proxy_header(bytes(data[: index + 1]))


def test_a_header_of_exactly_the_cap_is_accepted() -> None:
    padding = MAX_HEADER_BYTES - 16 - 12 - 3
    data = SIGNATURE + b"\x21\x11" + (MAX_HEADER_BYTES - 16).to_bytes(2, "big") + bytes(12)
    data += b"\x04" + padding.to_bytes(2, "big") + bytes(padding)
    parsed = parse_proxy_header(data + KAFKA_FRAME)
    assert isinstance(parsed, ProxyHeader)
    assert parsed.length == MAX_HEADER_BYTES
    assert parsed.tlvs == ((0x04, bytes(padding)),)


# ------------------------------------------------------------------------------------------------- properties

PORTS = st.integers(0, 0xFFFF)
IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(str)
TLVS = st.lists(st.tuples(st.integers(0, 0xFF), st.binary(max_size=64)), max_size=6)
TAILS = st.sampled_from([b"", KAFKA_FRAME, CLIENT_HELLO, b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n", HAPROXY_V2_TCP4])


@st.composite
def valid_headers(draw: st.DrawFn) -> tuple[bytes, ProxyHeader]:
    """A header's bytes (from ``proxy_relay``'s encoders, written apart from the parser) and its parse."""
    version = draw(st.sampled_from([1, 2]))
    kind = draw(st.sampled_from(["4", "6", "none", "local"] if version == 2 else ["4", "6", "none"]))
    if kind in ("none", "local"):
        local = kind == "local"
        tlvs = draw(TLVS) if version == 2 else []
        data = encode_v1(None) if version == 1 else encode_v2(None, local=local, tlvs=tlvs)
        return data, header(version, LOCAL if local else PROXY, ProxyFamily.UNSPEC, None, None, len(data))
    ips = IPV4 if kind == "4" else IPV6
    source, destination = (draw(ips), draw(PORTS)), (draw(ips), draw(PORTS))
    family = ProxyFamily.TCP4 if kind == "4" else ProxyFamily.TCP6
    tlvs = draw(TLVS) if version == 2 else []
    data = encode_v1(source, destination) if version == 1 else encode_v2(source, destination, tlvs=tlvs)

    def normal(address: tuple[str, int]) -> tuple[str, int]:
        return str(ipaddress.ip_address(address[0])), address[1]

    return data, header(version, PROXY, family, normal(source), normal(destination), len(data), tlvs)


@st.composite
def mutated_headers(draw: st.DrawFn) -> bytes:
    """A valid header and what follows it, with a few bytes flipped, dropped, inserted or set to a boundary value."""
    data, _ = draw(valid_headers())
    mutable = bytearray(data + draw(TAILS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(mutable) - 1))
        match draw(st.sampled_from(["flip", "drop", "insert", "boundary", "cut"])):
            case "flip":
                mutable[at] ^= 1 << draw(st.integers(0, 7))
            case "drop":
                del mutable[at]
            case "insert":
                mutable.insert(at, draw(st.integers(0, 0xFF)))
            case "boundary":
                mutable[at] = draw(st.sampled_from([0x00, 0x0A, 0x0D, 0x20, 0x30, 0x3A, 0x7F, 0xFF]))
            case _:
                del mutable[at:]
        if not mutable:
            break
    return bytes(mutable)


def check(data: bytes) -> ProxyHeader | Incomplete | NoHeader | None:
    """``parse_proxy_header(data)``, None for a ProxyHeaderError: any other exception fails the test."""
    try:
        result = parse_proxy_header(data)
    except ProxyHeaderError as e:
        assert str(e)
        return None
    if isinstance(result, ProxyHeader):
        assert 0 < result.length <= len(data)
        assert result.length <= (MAX_V1_BYTES if result.version == 1 else MAX_HEADER_BYTES)
    return result


@given(st.binary(max_size=300))
def test_random_bytes_raise_nothing_but_proxy_header_error(data: bytes) -> None:
    check(data)


@given(
    st.sampled_from([b"P", b"PROXY ", b"PROXY TCP4 ", b"PROXY UNKNOWN ", SIGNATURE, SIGNATURE + b"\x21\x11"]),
    st.binary(max_size=300),
)
def test_random_bytes_after_a_header_s_start_raise_nothing_but_proxy_header_error(start: bytes, rest: bytes) -> None:
    assert check(start + rest) != NoHeader()


@given(mutated_headers())
def test_mutated_headers_raise_nothing_but_proxy_header_error(data: bytes) -> None:
    check(data)


@given(valid_headers(), TAILS)
def test_every_prefix_of_a_header_is_incomplete_and_the_whole_is_exactly_the_header(
    valid: tuple[bytes, ProxyHeader], tail: bytes
) -> None:
    data, expected = valid
    stream = data + tail
    for end in range(len(data)):
        assert check(stream[:end]) == Incomplete()
    for end in (len(data), len(stream)):
        assert check(stream[:end]) == expected


@given(st.one_of(mutated_headers(), st.binary(max_size=120)), st.binary(max_size=120))
def test_incomplete_bytes_all_belong_to_the_header_whatever_follows(data: bytes, more: bytes) -> None:
    """The guarantee that lets a caller consume an Incomplete prefix: no continuation makes it NoHeader, or a
    header that ends inside it. (``b""`` is Incomplete too, vacuously: it has no bytes to consume.)"""
    if not data or check(data) != Incomplete():
        return
    later = check(data + more)
    assert not isinstance(later, NoHeader)
    if isinstance(later, ProxyHeader):
        assert later.length > len(data)


# ------------------------------------------------------------------------------------------- on real sockets


class WatchedSocket(socket.socket):
    """The accepted socket, counting ``recv`` calls and recording what is consumed (not peeked)."""

    def __init__(self, accepted: socket.socket) -> None:
        super().__init__(accepted.family, accepted.type, accepted.proto, fileno=accepted.detach())
        self.calls = 0
        self.consumed = bytearray()
        self.progress = asyncio.Event()

    def recv(self, bufsize: int, flags: int = 0, /) -> bytes:
        self.calls += 1
        data = super().recv(bufsize, flags)
        if not flags & socket.MSG_PEEK:
            self.consumed += data
            self.progress.set()
        return data


def run(scenario: Callable[[socket.socket, WatchedSocket], Awaitable[None]]) -> None:
    """``scenario(client, server)`` over a loopback TCP connection; ``server`` is the accepted, non-blocking end."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        client = socket.create_connection(listening.getsockname())
        accepted, _ = listening.accept()
    with client, WatchedSocket(accepted) as server:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server.setblocking(False)
        asyncio.run(asyncio.wait_for(scenario(client, server), 10))


def rest_of(client: socket.socket, server: socket.socket) -> bytes:
    """Everything still queued on ``server`` once ``client`` has finished sending."""
    client.shutdown(socket.SHUT_WR)
    server.settimeout(5)
    chunks = []
    while chunk := server.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(("data", "expected"), [VECTORS["v1 TCP6"], VECTORS["v2 TCP6 with AWS, Azure and GCP TLVs"]])
def test_a_header_sent_with_a_kafka_frame_is_taken_alone(data: bytes, expected: ProxyHeader) -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        client.sendall(data + KAFKA_FRAME)
        assert await read_proxy_header(server) == expected
        assert bytes(server.consumed) == data
        assert rest_of(client, server) == KAFKA_FRAME

    run(scenario)


@pytest.mark.parametrize(
    ("data", "expected"), [VECTORS["v1 TCP4 (the spec's example)"], VECTORS["v2 TCP4 from haproxy"]]
)
def test_a_header_trickled_byte_by_byte_is_consumed_as_it_comes_and_the_frame_stays(
    data: bytes, expected: ProxyHeader
) -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        reading = asyncio.create_task(read_proxy_header(server))
        for end in range(len(data) - 1):
            server.progress.clear()
            client.sendall(data[end : end + 1])
            await server.progress.wait()  # taken off the socket before the next byte is sent
            assert bytes(server.consumed) == data[: end + 1]
        client.sendall(data[-1:] + KAFKA_FRAME)
        assert await reading == expected
        assert bytes(server.consumed) == data
        # per byte: a peek, a consume and a peek that finds nothing (then a wait): no polling
        assert server.calls <= 3 * len(data)
        assert rest_of(client, server) == KAFKA_FRAME

    run(scenario)


def test_a_stalled_header_is_waited_for_without_spinning_and_the_wait_is_cancellable() -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        reading = asyncio.create_task(read_proxy_header(server))
        client.sendall(b"PROX")
        await server.progress.wait()
        calls = server.calls
        done, _ = await asyncio.wait([reading], timeout=0.2)  # an observation window, not a synchronization
        assert not done
        assert server.calls <= calls + 1  # a spinning reader would have made thousands
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert not asyncio.get_running_loop().remove_reader(server.fileno())  # the reader was removed

    run(scenario)


@pytest.mark.parametrize("data", [KAFKA_FRAME, CLIENT_HELLO], ids=["kafka frame", "tls client hello"])
def test_no_header_consumes_nothing(data: bytes) -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        client.sendall(data)
        assert await read_proxy_header(server) is None
        assert server.consumed == b""
        assert rest_of(client, server) == data

    run(scenario)


@pytest.mark.parametrize("sent", [0, 1, 10, 27], ids=lambda n: f"after {n} bytes")
def test_an_end_of_stream_inside_the_header_raises_connection_error(sent: int) -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        client.sendall(HAPROXY_V2_TCP4[:sent])
        client.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError, match=f"after {sent} bytes"):
            await read_proxy_header(server)

    run(scenario)


def test_a_malformed_header_raises_proxy_header_error() -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        client.sendall(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n" + KAFKA_FRAME)
        with pytest.raises(ProxyHeaderError, match="destination port '65536'"):
            await read_proxy_header(server)

    run(scenario)


def test_an_oversized_v2_header_is_refused_from_its_16_bytes() -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        client.sendall(SIGNATURE + b"\x21\x11\xff\xff")
        with pytest.raises(ProxyHeaderError, match="exceeds the limit"):
            await read_proxy_header(server)

    run(scenario)


def test_a_blocking_socket_does_not_block_the_loop() -> None:
    async def scenario(client: socket.socket, server: WatchedSocket) -> None:
        server.setblocking(True)
        # sent by the loop only after read_proxy_header has found the socket empty: a blocking recv would hang there
        asyncio.get_running_loop().call_soon(client.sendall, HAPROXY_V2_TCP4 + KAFKA_FRAME)
        assert await read_proxy_header(server) == VECTORS["v2 TCP4 from haproxy"][1]
        assert server.calls >= 2  # it did look before the bytes were there
        assert rest_of(client, server) == KAFKA_FRAME

    run(scenario)


@pytest.mark.parametrize("version", [1, 2])
def test_the_relay_s_header_is_read_and_the_client_s_bytes_follow(version: int) -> None:
    """``ProxyRelay`` in front of a listener reading with ``read_proxy_header``: the source is the relay's."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        with socket.create_server(("127.0.0.1", 0)) as listening:
            listening.setblocking(False)
            target = listening.getsockname()
            async with ProxyRelay(target, version=version, source=("203.0.113.7", 40000)) as relay:
                _, writer = await asyncio.open_connection("127.0.0.1", relay.port)
                writer.write(KAFKA_FRAME)
                accepted, _ = await loop.sock_accept(listening)
                with accepted:
                    got = await read_proxy_header(accepted)
                    assert got is not None
                    assert (got.version, got.source, got.destination) == (
                        version,
                        ("203.0.113.7", 40000),
                        ("127.0.0.1", relay.port),
                    )
                    received = b""
                    while len(received) < len(KAFKA_FRAME) and (chunk := await loop.sock_recv(accepted, 65536)):
                        received += chunk
                    assert received == KAFKA_FRAME
                writer.close()
                await writer.wait_closed()

    asyncio.run(asyncio.wait_for(scenario(), 10))
