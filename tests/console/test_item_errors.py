"""``console.item_errors``: one table from Kafka's per-item errors to HTTP, answered in the console's JSON shapes."""

from __future__ import annotations

import asyncio
import json

import pytest

from kafkaguard.console.app import _domain_error
from kafkaguard.console.item_errors import HTTP_STATUS, ItemRefusedError, raise_for
from kafkaguard.model import ItemError, KafkaErrorCode


def answer(error: ItemError) -> tuple[int, object]:
    response = asyncio.run(_domain_error(None, ItemRefusedError(error)))  # type: ignore[arg-type]
    return response.status_code, json.loads(bytes(response.body))


def test_a_success_raises_nothing() -> None:
    raise_for(None)


def test_input_to_fix_is_a_422_in_the_shape_of_every_422() -> None:
    status, body = answer(ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
    message = "UNACCEPTABLE_CREDENTIAL: Too few iterations"
    assert (status, body) == (422, {"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}],
                                    "message": message})  # fmt: skip


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (KafkaErrorCode.RESOURCE_NOT_FOUND, 404),
        (KafkaErrorCode.DUPLICATE_RESOURCE, 409),
        (KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED, 403),
        (KafkaErrorCode.LEADER_NOT_AVAILABLE, 503),
        (KafkaErrorCode.SECURITY_DISABLED, 400),  # not in the table: a client error
    ],
)
def test_other_codes_answer_with_their_status_and_the_code_named(code: KafkaErrorCode, status: int) -> None:
    assert answer(ItemError(code, "why")) == (status, {"detail": f"{code.name}: why"})


def test_every_code_the_table_names_is_a_failure_with_a_plausible_status() -> None:
    assert KafkaErrorCode.NONE not in HTTP_STATUS
    assert all(400 <= status < 600 for status in HTTP_STATUS.values())
