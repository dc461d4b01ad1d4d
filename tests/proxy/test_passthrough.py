"""``upstream_authentication: passthrough`` refuses to start where it cannot work, each time saying why (an mTLS or
PLAINTEXT listener, an upstream without SASL, a mechanism that cannot pass through, none enabled, one the broker
does not enable); and a proxy connection in passthrough hands its logins to its own upstream connection."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kafkaguard.config import load_settings
from kafkaguard.config.sections import Sections
from kafkaguard.proxy.dispatch import ProxyDispatcher, ProxyRoute
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.passthrough import passed_mechanisms, passthrough_problem, unsupported_by_broker
from kafkaguard.proxy.quotas import QuotaMeter
from tests.proxy.memory_upstream import UPSTREAM, MemoryUpstream

PASSTHROUGH = {
    "upstream": "kafka:9092",
    "upstream_security_protocol": "SASL_PLAINTEXT",
    "upstream_user": "kafkaguard-proxy",
    "upstream_password": "service-secret",
    "upstream_authentication": "passthrough",
    "listeners": ["SASL_PLAINTEXT://127.0.0.1:19092"],
    "sasl_mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"],
    "sasl_plain_without_tls": True,
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"listeners": ["SSL://127.0.0.1:19092"]}, "listener SSL://127.0.0.1:19092 has none: its clients prove who "
                                                  "they are with a certificate"),
        ({"listeners": ["PLAINTEXT://127.0.0.1:19092"]}, "has none: its clients do not log in"),
        ({"upstream_security_protocol": "SSL"}, "upstream_security_protocol must be SASL_PLAINTEXT or SASL_SSL, "
                                                "not SSL"),
        ({"upstream_passthrough_mechanisms": ["OAUTHBEARER"]}, "OAUTHBEARER cannot be passed through"),
        ({"upstream_passthrough_mechanisms": ["GSSAPI", "PLAIN"]}, "GSSAPI cannot be passed through"),
        ({"upstream_passthrough_mechanisms": ["PLAIN"], "sasl_plain_without_tls": False},
         "no listener enables any of upstream_passthrough_mechanisms \\(PLAIN\\)"),
    ],
)  # fmt: skip
def test_what_cannot_pass_through_is_refused_at_start(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    settings = load_settings(None, data_dir=tmp_path, **(PASSTHROUGH | changes))
    problem = passthrough_problem(Sections.of(settings))
    assert problem is not None
    assert re.search(message, problem), problem
    assert "service-secret" not in problem


def test_the_service_account_default_and_a_working_passthrough_have_no_problem(tmp_path: Path) -> None:
    assert passthrough_problem(Sections.of(load_settings(None, data_dir=tmp_path, **(PASSTHROUGH | {
        "upstream_authentication": "service_account", "listeners": ["SSL://127.0.0.1:19092"]})))) is None  # fmt: skip
    settings = load_settings(None, data_dir=tmp_path, **PASSTHROUGH)
    assert passthrough_problem(Sections.of(settings)) is None
    assert passed_mechanisms(Sections.of(settings)) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]


def test_a_mechanism_the_broker_does_not_enable_is_refused_at_start(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path, **PASSTHROUGH)
    assert (
        unsupported_by_broker(Sections.of(settings), ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"]) is None
    )
    problem = unsupported_by_broker(Sections.of(settings), ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    assert (
        problem is not None and "the broker does not enable PLAIN (it offers SCRAM-SHA-256, SCRAM-SHA-512)" in problem
    )


def test_a_connection_in_passthrough_logs_in_through_its_own_upstream(tmp_path: Path) -> None:
    upstream = MemoryUpstream()
    nodes = NodeDirectory([UPSTREAM], "proxy.example")

    def dispatcher(passthrough: bool) -> ProxyDispatcher:
        route = ProxyRoute(node_id=None, nodes=nodes, versions={}, meter=QuotaMeter(None),  # type: ignore[arg-type]
                           dial=lambda _addresses: upstream, passthrough=passthrough)  # fmt: skip
        return ProxyDispatcher(None, route)  # type: ignore[arg-type]

    assert dispatcher(True).login_relay is upstream
    assert dispatcher(False).login_relay is None
