"""A response encoded in slices is byte for byte the response encoded in one go, for every response schema kio
generates, and the loop is given a turn between slices."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.describe_groups.v5.response import DescribedGroup, DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.static.primitive import Records, i32, i32Timedelta

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.lengths import unwrap
from kafkaguard.protocol.slices import SLICE, encode_response_in_slices

st.register_type_strategy(Records, st.binary(max_size=16).map(Records))


def sliceable() -> list[tuple[type[Any], str]]:
    """(response schema, name of a top-level, untagged array of entities) for every API and version kio knows."""
    found = []
    for api_key in ApiKey:
        for version in range(30):
            try:
                schema = load_response_schema(int(api_key), version)
            except Exception:  # noqa: BLE001, S112 - kio raises several types for "no such API or version"
                continue
            for field in dataclasses.fields(schema):
                inner, is_array, _ = unwrap(field.type)
                if is_array and dataclasses.is_dataclass(inner) and field.metadata.get("tag") is None:
                    found.append((schema, field.name))
    return found


SLICEABLE = sliceable()


def test_most_responses_have_a_sliceable_array():
    assert len(SLICEABLE) > 200


@pytest.mark.parametrize(("schema", "name"), SLICEABLE, ids=lambda v: getattr(v, "__qualname__", str(v)))
@settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_slices_equal_one_go(schema: type[Any], name: str, data: st.DataObject):
    body = data.draw(st.from_type(schema))
    field = next(f for f in dataclasses.fields(schema) if f.name == name)
    element = data.draw(st.from_type(unwrap(field.type)[0]))
    count = data.draw(st.sampled_from([SLICE + 1, 3 * SLICE + 7]))
    long = dataclasses.replace(body, **{name: (element,) * count})
    api_key = ApiKey(schema.__api_key__)
    assert response_schema(api_key, schema.__version__) is schema
    expected = encode_response(api_key, schema.__version__, 7, long)
    assert asyncio.run(encode_response_in_slices(api_key, schema.__version__, 7, long, name)) == expected


def test_the_loop_serves_others_between_slices():
    element = DescribedGroup(
        error_code=ErrorCode.group_authorization_failed,
        group_id=GroupId("g"),
        group_state="",
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=i32(-2147483648),
    )
    body = DescribeGroupsResponse(throttle_time=i32Timedelta.parse(timedelta(0)), groups=(element,) * (10 * SLICE))
    turns = 0

    async def main() -> bytes:
        nonlocal turns

        async def other() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(other())
        await asyncio.sleep(0)
        turns = 0
        encoded = await encode_response_in_slices(ApiKey.DESCRIBE_GROUPS, 5, 1, body, "groups")
        ticker.cancel()
        return encoded

    assert asyncio.run(main()) == encode_response(ApiKey.DESCRIBE_GROUPS, 5, 1, body)
    assert turns >= 9  # one turn per slice: the other task ran while the answer was written
