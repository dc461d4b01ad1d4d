"""``handlers.fetch.without_body_tags``: the walk that lets a Fetch v16+ answer without ``node_endpoints`` pass on
unchanged agrees with kio's decoding on every response hypothesis makes (v13-v17), and never says "no tags" for an
answer that has them, is cut short, or has bytes after its end."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.proxy.handlers.fetch import without_body_tags

VERSIONS = list(range(13, 18))  # topics by id (the walk reads a 16-byte id per topic)
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))  # as tests/server/test_lengths.py


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_walk_agrees_with_kio(version: int, data: st.DataObject):
    schema = response_schema(ApiKey.FETCH, version)
    body: Any = data.draw(st.from_type(schema))
    payload = encode_response(ApiKey.FETCH, version, 7, body)[4:]
    has_endpoints = bool(getattr(body, "node_endpoints", ()))
    assert without_body_tags(payload) is (not has_endpoints)
    assert not without_body_tags(payload[:-1]), "cut short"
    assert not without_body_tags(payload + b"\x00"), "bytes after the end"
