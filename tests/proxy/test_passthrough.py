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
from kafkaguard.errors import InvalidConfigError
from kafkaguard.proxy.dispatch import ProxyDispatcher, ProxyRoute
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.passthrough import (
    passed_mechanisms,
    passes_oauthbearer,
    passthrough_problem,
    sub_claim_disagreement,
    unsupported_by_broker,
)
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


OAUTH = PASSTHROUGH | {"sasl_mechanisms": ["SCRAM-SHA-512", "OAUTHBEARER"]}


def test_oauthbearer_passed_through_needs_no_jwks_but_kafkaguard_s_own_does(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path, **OAUTH)  # no sasl_oauthbearer_jwks_endpoint_url: the broker's
    sections = Sections.of(settings)
    assert passthrough_problem(sections) is None and passes_oauthbearer(sections)
    assert passed_mechanisms(sections) == ["SCRAM-SHA-512", "OAUTHBEARER"]
    assert sections.identity.oauthbearer is None  # nothing of kafkaguard's own checks tokens
    own = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
    with pytest.raises(InvalidConfigError, match="sasl_oauthbearer_jwks_endpoint_url is not set"):
        load_settings(None, data_dir=tmp_path, **(OAUTH | {"upstream_passthrough_mechanisms": own}))
    with pytest.raises(InvalidConfigError, match="sasl_oauthbearer_jwks_endpoint_url is not set"):
        load_settings(None, data_dir=tmp_path, **(OAUTH | {"upstream_authentication": "service_account"}))


def test_the_broker_s_sub_claim_must_be_kafkaguard_s(tmp_path: Path) -> None:
    sections = Sections.of(load_settings(None, data_dir=tmp_path, **OAUTH))
    assert sub_claim_disagreement(sections, {"sasl.oauthbearer.sub.claim.name": "sub"}, 1) is None
    assert sub_claim_disagreement(sections, {}, 1) is None  # not described: Kafka's default, "sub"
    problem = sub_claim_disagreement(sections, {"sasl.oauthbearer.sub.claim.name": "email"}, 3)
    assert problem == (
        "upstream_authentication passthrough: OAUTHBEARER principals would differ: broker 3 names them by the "
        "token's 'email' claim (sasl.oauthbearer.sub.claim.name), kafkaguard by 'sub' "
        "(sasl_oauthbearer_sub_claim_name); set sasl_oauthbearer_sub_claim_name: email"
    )
    ours = Sections.of(load_settings(None, data_dir=tmp_path, **(OAUTH | {"sasl_oauthbearer_sub_claim_name": "email"})))
    assert sub_claim_disagreement(ours, {"sasl.oauthbearer.sub.claim.name": "email"}, 3) is None
    assert sub_claim_disagreement(ours, {}, 3) is not None
