"""The client address the console authorizes and audits: the socket's peer, unless ``trusted_proxies`` names the
peer as a proxy; then the right-most ``X-Forwarded-For`` entry that is not itself a trusted proxy. A forged header
from anyone else neither opens nor closes a host-restricted ACL, and never reaches the audit log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kafkaguard.config import load_settings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.model import AccessControlEntry, AclBinding, AclOperation, AclPermissionType
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.console.conftest import ConsoleHandle, cluster_acl, start_console

#: The host the ACLs below are restricted to: a proxied client's address.
REMOTE = "10.0.0.66"
#: A second proxy in front of the console's own (trusted too in the ``proxied`` console).
INNER_PROXY = "10.0.0.5"
KAFKAGUARD = str(Path(sys.executable).parent / "kafkaguard")
EXPLAIN = {
    "principal": "User:x",
    "host": "1.2.3.4",
    "operation": "READ",
    "resource_type": "TOPIC",
    "resource_name": "t",
}


def audit_hosts(caplog: pytest.LogCaptureFixture) -> list[object]:
    return [json.loads(r.getMessage())["host"] for r in caplog.records if r.name == "kafkaguard.audit"]


def only_from(console: ConsoleHandle, user: str, host: str) -> None:
    """``user`` may read (DESCRIBE on the cluster) only from ``host``."""
    console.add_user(user, f"{user}-pw", (ScramMechanism.SCRAM_SHA_256,))
    allow = cluster_acl(f"User:{user}", AclOperation.DESCRIBE)
    restricted = AclBinding(allow.pattern, AccessControlEntry(allow.entry.principal, host, AclOperation.DESCRIBE,
                                                              AclPermissionType.ALLOW))  # fmt: skip
    console.services.acls.create_acls([restricted], actor=ACTOR)


def denied_from(console: ConsoleHandle, user: str, host: str) -> None:
    """``user`` may read from anywhere except ``host`` (a DENY for that host)."""
    console.add_user(user, f"{user}-pw", (ScramMechanism.SCRAM_SHA_256,))
    allow = cluster_acl(f"User:{user}", AclOperation.DESCRIBE)
    deny = AclBinding(allow.pattern, AccessControlEntry(allow.entry.principal, host, AclOperation.DESCRIBE,
                                                        AclPermissionType.DENY))  # fmt: skip
    console.services.acls.create_acls([allow, deny], actor=ACTOR)


def get_as(console: ConsoleHandle, user: str, forwarded_for: str | None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for is not None else {}
    with console.client(user, f"{user}-pw") as client:
        return client.get("/api/acls", headers=headers)


# ------------------------------------------------------------------------------------------- no trusted proxy


def test_a_forged_x_forwarded_for_does_not_open_a_host_restricted_acl(console: ConsoleHandle) -> None:
    only_from(console, "remote-only", REMOTE)
    assert get_as(console, "remote-only", REMOTE).status_code == 403  # the peer is 127.0.0.1, not REMOTE
    assert get_as(console, "remote-only", None).status_code == 403


def test_a_forged_x_forwarded_for_does_not_match_a_host_deny_nor_reach_the_audit_log(
    console: ConsoleHandle, caplog: pytest.LogCaptureFixture
) -> None:
    denied_from(console, "denied-remote", REMOTE)
    assert get_as(console, "denied-remote", REMOTE).status_code == 200
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    with console.client(None) as anonymous:
        assert anonymous.get("/api/acls", headers={"X-Forwarded-For": REMOTE}).status_code == 401
    assert audit_hosts(caplog) == ["127.0.0.1"]


def test_x_forwarded_proto_from_an_untrusted_peer_is_ignored(console: ConsoleHandle) -> None:
    """The scheme decides the console's own origin (CSRF check): a forged ``https`` must not change it."""
    with console.client() as admin:
        response = admin.post(
            "/api/authorize",
            json=EXPLAIN,
            headers={"X-Forwarded-Proto": "https", "Origin": console.url},
        )
    assert response.status_code == 200


# ------------------------------------------------------------------------------------------- a trusted proxy


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """A console behind a proxy on loopback, itself behind another proxy at INNER_PROXY."""
    handle = start_console(tmp_path_factory.mktemp("proxied"), trusted_proxies=["127.0.0.1/32", f"{INNER_PROXY}/32"])
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


def test_a_trusted_proxy_sets_the_client_address(proxied: ConsoleHandle) -> None:
    only_from(proxied, "remote-only", REMOTE)
    assert get_as(proxied, "remote-only", REMOTE).status_code == 200
    assert get_as(proxied, "remote-only", None).status_code == 403  # no header: the proxy's own address


def test_the_right_most_untrusted_entry_is_the_client(proxied: ConsoleHandle, caplog: pytest.LogCaptureFixture) -> None:
    only_from(proxied, "right-most", REMOTE)
    # A client may put anything on the left; each proxy appends the address it saw.
    assert get_as(proxied, "right-most", f"1.2.3.4, {REMOTE}, {INNER_PROXY}").status_code == 200
    assert get_as(proxied, "right-most", f"{REMOTE}, 10.0.0.7").status_code == 403  # 10.0.0.7 is the client
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    assert get_as(proxied, "right-most", f"{REMOTE}, 10.0.0.7, {INNER_PROXY}").status_code == 403
    assert audit_hosts(caplog) == ["10.0.0.7"]


def test_a_trusted_proxy_can_be_matched_by_a_host_deny(
    proxied: ConsoleHandle, caplog: pytest.LogCaptureFixture
) -> None:
    denied_from(proxied, "denied-remote", REMOTE)
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    response = get_as(proxied, "denied-remote", REMOTE)
    assert response.status_code == 403
    assert audit_hosts(caplog) == [REMOTE]
    assert get_as(proxied, "denied-remote", "10.0.0.8").status_code == 200


# ------------------------------------------------------------------------------------------- configuration


def test_trusted_proxies_come_from_flags_yaml_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(None, data_dir=tmp_path).trusted_proxies == []
    given = load_settings(None, data_dir=tmp_path, trusted_proxies=["10.0.0.0/8", "192.168.1.1", "::1"])
    assert given.trusted_proxies == ["10.0.0.0/8", "192.168.1.1/32", "::1/128"]
    config = tmp_path / "kafkaguard.yaml"
    config.write_text("trusted_proxies: ['172.16.0.0/12']\n")
    assert load_settings(config, data_dir=tmp_path).trusted_proxies == ["172.16.0.0/12"]
    monkeypatch.setenv("KAFKAGUARD_TRUSTED_PROXIES", "10.1.0.0/16, 10.2.0.1")
    assert load_settings(config, data_dir=tmp_path).trusted_proxies == ["10.1.0.0/16", "10.2.0.1/32"]


@pytest.mark.parametrize("bad", ["nonsense", "10.0.0.0/33", "10.0.0.1/8", "example.com"])
def test_an_invalid_trusted_proxy_is_a_config_error_naming_it(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidConfigError, match="trusted_proxies") as caught:
        load_settings(None, data_dir=tmp_path, trusted_proxies=["127.0.0.1", bad])
    assert repr(bad) in str(caught.value)


@pytest.mark.integration
@pytest.mark.parametrize("command", ["console", "serve"])
def test_the_trusted_proxies_flag_reports_an_invalid_value(tmp_path: Path, command: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    result = subprocess.run(
        [KAFKAGUARD, command, "--data-dir", str(tmp_path), "--http-listener", "127.0.0.1:0",
         "--trusted-proxies", "10.0.0.0/8", "--trusted-proxies", "10.0.0.300"],
        capture_output=True, text=True, timeout=30, env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "trusted_proxies" in result.stderr and "'10.0.0.300'" in result.stderr
