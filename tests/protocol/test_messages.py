"""The typed protocol edge: generated message unions are current, every offered API has a handler typed with its
API's own kio classes, and building a response with a field no supported version declares raises."""

from __future__ import annotations

import runpy
import typing
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import NO_THROTTLE, build
from kafkaguard.protocol.codec import PreEncoded, response_schema
from kafkaguard.protocol.connection import CONNECTION_APIS
from kafkaguard.server.dispatch import HANDLERS
from kafkaguard.server.versions import SERVER_VERSIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_message_modules_are_up_to_date():
    script = runpy.run_path(str(ROOT / "scripts" / "gen_messages.py"))
    assert (ROOT / "src" / "kafkaguard" / "protocol" / "messages.py").read_text() == script["render"](), (
        "run: .venv/bin/python scripts/gen_messages.py"
    )
    assert (ROOT / "src" / "kafkaguard" / "proxy" / "messages.py").read_text() == script["render_proxy"](), (
        "run: .venv/bin/python scripts/gen_messages.py"
    )
    assert (ROOT / "src" / "kafkaguard" / "protocol" / "builders.py").read_text() == script["render_builders"](), (
        "run: .venv/bin/python scripts/gen_messages.py"
    )
    proxy_builders = (ROOT / "src" / "kafkaguard" / "proxy" / "builders.py").read_text()
    assert proxy_builders == script["render_builders"]("proxy"), "run: .venv/bin/python scripts/gen_messages.py"


def test_dispatch_is_exhaustive():
    assert set(HANDLERS) | CONNECTION_APIS == set(SERVER_VERSIONS)
    assert not set(HANDLERS) & CONNECTION_APIS


def members(annotation: Any) -> set[type[Any]]:
    return {a for a in typing.get_args(annotation) if a is not PreEncoded} or {annotation}


@pytest.mark.parametrize("api_key", sorted(HANDLERS), ids=lambda k: k.api_name)
def test_each_handler_takes_and_returns_its_apis_kio_classes_for_every_supported_version(api_key: ApiKey):
    hints = typing.get_type_hints(HANDLERS[api_key])
    low, high = SERVER_VERSIONS[api_key]
    versions = range(low, high + 1)
    assert members(hints["request"]) == {load_request_schema(int(api_key), v) for v in versions}
    returned = members(hints["return"]) - {PreEncoded}
    assert returned == {load_response_schema(int(api_key), v) for v in versions}


def test_build_keeps_what_the_version_declares_and_drops_what_only_others_declare():
    v0 = response_schema(ApiKey.DESCRIBE_CLUSTER, 0)  # endpoint_type arrived in v1
    built = build(v0, throttle_time=NO_THROTTLE, error_code=0, error_message=None, endpoint_type=1,
                  cluster_id="c", controller_id=1, brokers=(), cluster_authorized_operations=0)  # fmt: skip
    assert built.cluster_id == "c"
    assert not hasattr(built, "endpoint_type")


def test_build_refuses_a_field_no_supported_version_declares():
    cls = response_schema(ApiKey.DESCRIBE_CLUSTER, 1)
    with pytest.raises(TypeError, match="declares no field 'cluster_idd'"):
        build(cls, throttle_time=NO_THROTTLE, error_code=0, error_message=None, endpoint_type=1,
              cluster_idd="c", controller_id=1, brokers=(), cluster_authorized_operations=0)  # fmt: skip
