"""The one per-item error: its text, Kafka's two wire-message rules, and how a person reads it."""

from __future__ import annotations

import pytest

from kafkaguard.model import ItemError, KafkaErrorCode

NOT_FOUND = KafkaErrorCode.RESOURCE_NOT_FOUND


def test_the_text_is_the_items_own_message_else_kafkas_default() -> None:
    assert ItemError(NOT_FOUND, "no credential for alice").text == "no credential for alice"
    assert ItemError(NOT_FOUND).text == "A request illegally referred to a resource that does not exist."
    assert str(ItemError(NOT_FOUND, "x")) == "x"


def test_the_wire_message_is_null_for_the_default_text_as_apierror_from_throwable() -> None:
    assert ItemError(NOT_FOUND).wire_message is None
    assert ItemError(NOT_FOUND, NOT_FOUND.default_message).wire_message is None
    assert ItemError(NOT_FOUND, "no credential for alice").wire_message == "no credential for alice"


def test_unknown_server_error_never_carries_a_message_on_the_wire() -> None:
    """Kafka hides the text of an unexpected error from the client (it may describe the server's internals)."""
    assert ItemError(KafkaErrorCode.UNKNOWN_SERVER_ERROR, "NullPointerException at ...").wire_message is None


def test_the_summary_names_the_code_for_a_person() -> None:
    assert ItemError(NOT_FOUND, "gone").summary == "RESOURCE_NOT_FOUND: gone"


@pytest.mark.parametrize("code", [c for c in KafkaErrorCode if c is not KafkaErrorCode.NONE])
def test_every_failing_code_has_a_text(code: KafkaErrorCode) -> None:
    assert ItemError(code).text
