"""The hand-written SASL response writers (``protocol.sasl_encoding``) write what kio's writers write, for every
version they cover and any value of every field; and ``codec`` uses them."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse
from kio.serial import entity_writer
from kio.serial.errors import OutOfBoundValue

from kafkaguard.protocol import codec
from kafkaguard.protocol.sasl_encoding import SASL_WRITERS

SCHEMAS = sorted(SASL_WRITERS, key=lambda schema: (schema.__api_key__, schema.__version__))


def kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def our_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    SASL_WRITERS[type(entity)](buffer, entity)
    return buffer.getvalue()


def test_every_version_of_both_apis_is_covered():
    assert {(int(s.__api_key__), int(s.__version__)) for s in SCHEMAS} == {(17, 0), (17, 1), (36, 0), (36, 1), (36, 2)}


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.__name__}-v{s.__version__}")
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_bytes_are_kios(schema: type[Any], data: st.DataObject):
    entity = data.draw(st.from_type(schema))
    assert our_bytes(entity) == kio_bytes(entity)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.__name__}-v{s.__version__}")
def test_the_codec_writes_them(schema: type[Any]):
    assert codec.writer_for(schema) is SASL_WRITERS[schema]


def test_a_message_too_long_for_its_length_prefix_is_refused_as_kio_refuses_it():
    entity = SaslAuthenticateResponse(error_code=ErrorCode.sasl_authentication_failed, error_message="x" * 40_000,
                                      auth_bytes=b"")  # fmt: skip
    with pytest.raises(OutOfBoundValue):
        kio_bytes(entity)
    with pytest.raises(OutOfBoundValue):
        our_bytes(entity)
