"""``server.wire_errors``: the one mapping from a per-item outcome to the wire's code and message."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.protocol.wire_errors import error_fields, wire_error


@pytest.mark.parametrize("code", [c for c in KafkaErrorCode if c is not KafkaErrorCode.NONE])
def test_every_code_maps_to_kios_code_of_the_same_name_and_number(code: KafkaErrorCode) -> None:
    wire = error_fields(ItemError(code))["error_code"]
    assert (wire.name.upper(), wire.value) == (code.name, code.value)
    assert wire_error(ItemError(code)) is wire


def test_a_success_is_code_none_with_the_apis_success_message() -> None:
    assert error_fields(None) == {"error_code": ErrorCode.none, "error_message": None}
    assert error_fields(None, on_success="") == {"error_code": ErrorCode.none, "error_message": ""}
    assert wire_error(None) is ErrorCode.none


def test_the_default_rule_nulls_kafkas_default_text_and_keeps_an_items_own() -> None:
    missing = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert error_fields(missing)["error_message"] is None
    own = ItemError(KafkaErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert error_fields(own)["error_message"] == "Duplicate topic name."


def test_the_fallback_rule_sends_the_default_text_when_the_item_has_none() -> None:
    """DeleteTopics and AlterClientQuotas on Kafka 3.9 send the default text instead of null (measured)."""
    missing = ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert (
        error_fields(missing, default_text=True)["error_message"] == "This server does not host this topic-partition."
    )
