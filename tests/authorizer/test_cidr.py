"""CIDR host patterns (KIP-1276): the KIP's rules and edge cases, checked through the authorizer's decisions and
against an independent oracle (Python's ``ipaddress``, which shares no code with ``model.host``)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StandardAuthorizer,
    StoredAcl,
)
from kafkaguard.authorizer.index import AclIndex
from kafkaguard.authorizer.operations import allow_bit
from kafkaguard.model import cidr_error, host_matches, java_host, parse_cidr, validate_new_binding

TOPIC = ResourceType.TOPIC
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def binding(host: str, name: str = "orders", op: AclOperation = READ, perm=ALLOW, principal="User:alice"):
    return AclBinding(ResourcePattern(TOPIC, name), AccessControlEntry(principal, host, op, perm))


def allowed(authorizer: StandardAuthorizer, host: str, name: str = "orders", op: AclOperation = READ) -> bool:
    context = RequestContext("User:alice", host)
    [result] = authorizer.authorize(context, [Action(op, ResourcePattern(TOPIC, name))])
    return result is ALLOWED


def with_hosts(*hosts: str) -> StandardAuthorizer:
    authorizer = StandardAuthorizer()
    assert all(r.succeeded for r in authorizer.add_acls([binding(h) for h in hosts]))
    return authorizer


# ------------------------------------------------------------------------------------------ KIP-1276's rules


@pytest.mark.parametrize(
    ("block", "inside", "outside"),
    [
        ("10.0.0.0/8", ["10.0.0.0", "10.1.2.3", "10.255.255.255"], ["11.0.0.0", "9.255.255.255"]),
        # The network and broadcast addresses belong to an IPv4 block.
        ("192.168.1.0/24", ["192.168.1.0", "192.168.1.255", "192.168.1.17"], ["192.168.0.255", "192.168.2.0"]),
        ("10.0.0.0/31", ["10.0.0.0", "10.0.0.1"], ["10.0.0.2"]),
        ("10.0.0.7/32", ["10.0.0.7"], ["10.0.0.6", "10.0.0.8"]),
        ("0.0.0.0/0", ["0.0.0.0", "255.255.255.255", "10.1.2.3"], ["0:0:0:0:0:0:0:1"]),  # noqa: S104
        # Host bits are ignored: 10.1.2.3/8 is 10.0.0.0/8.
        ("10.1.2.3/8", ["10.0.0.1", "10.200.0.1"], ["11.1.2.3"]),
        # Leading zeros are decimal, as Java's SubnetUtils reads them.
        ("010.000.000.000/8", ["10.9.9.9"], ["8.9.9.9"]),
        ("2001:db8::/32", ["2001:db8:0:0:0:0:0:1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"], ["2001:db9:0:0:0:0:0:0"]),
        ("::/0", ["0:0:0:0:0:0:0:1", "2001:db8:0:0:0:0:0:1"], ["10.0.0.1"]),
        ("::1/128", ["0:0:0:0:0:0:0:1"], ["0:0:0:0:0:0:0:2"]),
        ("fe80::/10", ["fe80:0:0:0:0:0:0:1", "febf:0:0:0:0:0:0:1"], ["fec0:0:0:0:0:0:0:1"]),
    ],
)
def test_a_block_holds_exactly_the_addresses_whose_first_bits_it_names(block, inside, outside):
    authorizer = with_hosts(block)
    for host in inside:
        assert allowed(authorizer, host), (block, host)
        assert host_matches(block, host)
    for host in outside:
        assert not allowed(authorizer, host), (block, host)
        assert not host_matches(block, host)


def test_an_ipv4_mapped_client_is_matched_as_its_ipv4_address():
    # Java prints an IPv4-mapped client as the dotted quad; a raw mapped form is read the same way.
    authorizer = with_hosts("10.0.0.0/8")
    assert java_host("::ffff:10.1.2.3") == "10.1.2.3"
    assert allowed(authorizer, "::ffff:10.1.2.3")


def test_a_deny_on_a_block_denies_every_address_in_it_and_wins_over_an_exact_allow():
    authorizer = StandardAuthorizer()
    authorizer.add_acls(
        [binding("*", op=AclOperation.ALL), binding("10.9.0.0/16", perm=DENY), binding("10.9.0.5", op=READ)]
    )
    assert not allowed(authorizer, "10.9.0.5")
    assert not allowed(authorizer, "10.9.255.255")
    assert allowed(authorizer, "10.8.0.5")


def test_blocks_of_several_lengths_and_families_on_one_resource():
    authorizer = with_hosts("10.0.0.0/8", "172.16.0.0/12", "192.168.7.7/32", "2001:db8::/48")
    assert allowed(authorizer, "10.4.4.4")
    assert allowed(authorizer, "172.31.255.255")
    assert not allowed(authorizer, "172.32.0.0")
    assert allowed(authorizer, "192.168.7.7")
    assert allowed(authorizer, "2001:db8:0:ffff:0:0:0:1")
    assert not allowed(authorizer, "2001:db8:1:0:0:0:0:1")
    assert not allowed(authorizer, "not-an-address")


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("10.0.0.0/33", "prefix length 33 is out of range"),
        ("10.0.0.256/8", "octet 256 is out of range"),
        ("10.0.0/8", "expected an IPv4 block"),
        ("kafka.example.com/24", "host names are not allowed"),
        ("10.0.0.0/", "expected an IPv4 block"),
        ("10.0.0.0/-1", "expected an IPv4 block"),
        ("10.0.0.0/8/8", "expected an IPv4 block"),
        ("2001:db8::/129", "prefix length 129 is out of range"),
        ("2001:db8::/x", "must be a number from 0 to 128"),
        ("2001:db8:::/32", "is not an IPv6 address"),
        ("::ffff:10.0.0.0/104", "IPv4-mapped IPv6 block is not allowed"),
        ("fe80::%eth0/64", "no zone"),
        ("/8", "expected an IPv4 block"),
    ],
)
def test_an_invalid_block_is_refused_with_what_to_fix(host, says):
    error = cidr_error(host)
    assert error is not None and error.startswith(f"Invalid CIDR notation '{host}'") and says in error
    assert validate_new_binding(binding(host)) == error
    [result] = StandardAuthorizer().add_acls([binding(host)])
    assert result.error is not None and result.error.message == error
    assert parse_cidr(host) is None


def test_an_invalid_block_stored_anyway_matches_no_one():
    # Written by an older kafkaguard, or by hand into the store: loaded, listed, never matched.
    stored = StoredAcl(AclId("x"), binding("10.0.0.0/33"))
    authorizer = StandardAuthorizer(acls=[stored])
    assert authorizer.acls() == [stored.binding]
    for host in ("10.0.0.1", "0:0:0:0:0:0:0:1", "10.0.0.0/33"):
        assert not allowed(authorizer, host)


def test_filters_compare_host_strings_exactly_as_kafkas_do():
    authorizer = with_hosts("10.0.0.0/8", "10.1.0.0/16", "10.1.2.3")

    def listed(host: str) -> list[str]:
        entry = AccessControlEntryFilter(None, host, AclOperation.ANY, AclPermissionType.ANY)
        found = authorizer.acls(AclBindingFilter(ResourcePatternFilter.ANY, entry))
        return sorted(b.entry.host for b in found)

    assert listed("10.0.0.0/8") == ["10.0.0.0/8"]
    assert listed("10.1.2.3") == ["10.1.2.3"]
    assert listed("10.0.0.0/08") == []


def test_authorize_by_resource_type_honours_blocks():
    authorizer = StandardAuthorizer()
    authorizer.add_acls([binding("10.0.0.0/8", op=WRITE)])
    inside, outside = RequestContext("User:alice", "10.3.3.3"), RequestContext("User:alice", "11.3.3.3")
    assert authorizer.authorize_by_resource_type(inside, WRITE, TOPIC) is ALLOWED
    assert authorizer.authorize_by_resource_type(outside, WRITE, TOPIC) is DENIED
    authorizer.add_acls([binding("10.3.0.0/16", name="orders", op=WRITE, perm=DENY)])
    assert authorizer.authorize_by_resource_type(inside, WRITE, TOPIC) is DENIED


def test_explain_lists_the_block_that_matched():
    authorizer = with_hosts("10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16")
    decision = authorizer.explain(
        RequestContext("User:alice", "10.1.9.9"), Action(READ, ResourcePattern(TOPIC, "orders"))
    )
    assert decision.result is ALLOWED
    assert sorted(a.binding.entry.host for a in decision.matching_acls) == ["10.0.0.0/8", "10.1.0.0/16"]


def test_the_index_groups_blocks_by_family_and_prefix_length_instead_of_scanning_them():
    # 1,000 /24 blocks and 1,000 /32 blocks on one resource: two tables, so a decision costs two probes.
    acls = [
        StoredAcl(AclId(f"a{n}"), binding(f"10.{n // 256}.{n % 256}.0/24", principal=f"User:u{n}")) for n in range(1000)
    ] + [StoredAcl(AclId(f"b{n}"), binding(f"10.200.{n // 256}.{n % 256}/32")) for n in range(1000)]
    index = AclIndex.build(acls)
    [group] = index.relevant_groups(TOPIC, "orders")
    assert [(version, shift, len(table)) for version, shift, table in group.networks] == [(4, 0, 1000), (4, 8, 1000)]
    assert index.match_mask(TOPIC, "orders", "User:u300", "10.1.44.9") & allow_bit(READ)
    assert group.mask_for("User:u300", "10.1.45.9") == 0
    assert group.mask_for("User:u301", "10.1.44.9") == 0
    assert group.mask_for("User:alice", "10.200.1.9") & allow_bit(READ)


# ------------------------------------------------------------------------------ against the ipaddress oracle


@st.composite
def blocks_and_clients(draw: st.DrawFn) -> tuple[str, str]:
    """A block in any valid spelling (host bits set, compressed or exploded IPv6) and a client address of
    either family, half of the time inside the block."""
    version = draw(st.sampled_from((4, 6)))
    bits = 32 if version == 4 else 128
    length = draw(st.integers(0, bits))
    base = draw(st.integers(0, 2**bits - 1))
    address = ipaddress.ip_address(base) if version == 4 else ipaddress.IPv6Address(base)
    text = str(address) if version == 4 or draw(st.booleans()) else address.exploded
    block = f"{text}/{length}"
    if draw(st.booleans()):
        host_bits = draw(st.integers(0, 2 ** (bits - length) - 1))
        network = base >> (bits - length) << (bits - length) if length else 0
        client_value = network | host_bits
        client = ipaddress.IPv4Address(client_value) if version == 4 else ipaddress.IPv6Address(client_value)
    else:
        other = draw(st.sampled_from((4, 6)))
        value = draw(st.integers(0, 2 ** (32 if other == 4 else 128) - 1))
        client = ipaddress.IPv4Address(value) if other == 4 else ipaddress.IPv6Address(value)
    return block, java_host(str(client))


@given(blocks_and_clients())
def test_matching_equals_the_ipaddress_oracle(case):
    block, client = case
    assert cidr_error(block) is None
    network = ipaddress.ip_network(block, strict=False)
    client_ip = ipaddress.ip_address(client)
    expected = client_ip.version == network.version and client_ip in network
    assert host_matches(block, client) is expected
    authorizer = with_hosts(block)
    assert allowed(authorizer, client) is expected


@given(st.text(alphabet="0123456789abcdef.:/%x-", max_size=24))
def test_validation_accepts_what_ipaddress_reads_and_refuses_the_rest(text):
    host = text if "/" in text else text + "/8"
    address, _, length = host.partition("/")
    try:
        network = ipaddress.ip_network(f"{address}/{length}", strict=False)
        readable = network.version == 6 or all(len(o) <= 3 for o in address.split("."))
        readable = readable and length.isdigit() and not (network.version == 6 and "." in address)
        # Refused on purpose, with their own messages: IPv6 zones and IPv4-mapped IPv6 blocks (a hypothesis find).
        readable = readable and "%" not in address
        readable = readable and not (network.version == 6 and ipaddress.IPv6Address(address).ipv4_mapped is not None)
    except ValueError:
        readable = False
    if readable:
        assert cidr_error(host) is None, host
    # Whatever it says, a refused block matches no one and an accepted one agrees with the oracle.
    if cidr_error(host) is not None:
        assert parse_cidr(host) is None
