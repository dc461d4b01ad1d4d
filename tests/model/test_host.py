"""``client_key``: what limits and budgets count a client by (IPv6 per block, issue 36 item 6)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.model import client_key


@pytest.mark.parametrize(
    ("address", "prefix", "key"),
    [
        ("10.0.0.7", 64, "10.0.0.7"),
        ("::ffff:10.0.0.7", 64, "10.0.0.7"),
        ("2001:db8:0:1:aaaa::1", 64, "2001:db8:0:1::/64"),
        ("2001:0db8:0000:0001:bbbb:0:0:2", 64, "2001:db8:0:1::/64"),
        ("2001:db8:0:1:aaaa::1", 48, "2001:db8::/48"),
        ("2001:db8::1", 128, "2001:db8:0:0:0:0:0:1"),
        ("fe80::1%eth0", 64, "fe80::/64"),
        ("not-an-address", 64, "not-an-address"),
    ],
)
def test_a_client_is_counted_by_its_ipv4_address_or_its_ipv6_block(address: str, prefix: int, key: str):
    assert client_key(address, prefix) == key


@given(st.integers(0, 2**128 - 1), st.integers(1, 127))
def test_two_ipv6_addresses_share_a_key_exactly_when_they_share_the_prefix(value: int, prefix: int):
    first = ipaddress.IPv6Address(value)
    if first.ipv4_mapped is not None:
        return
    other = ipaddress.IPv6Address(value ^ 1)  # differs in the last bit only: inside every prefix shorter than 128
    assert client_key(str(first), prefix) == client_key(str(other), prefix)
    flipped = ipaddress.IPv6Address(value ^ (1 << (128 - prefix)))  # differs in the prefix's last bit
    if flipped.ipv4_mapped is None:
        assert client_key(str(first), prefix) != client_key(str(flipped), prefix)
