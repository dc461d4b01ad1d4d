"""The management history is the store's, not a node's: what one node writes to a shared PostgreSQL store,
``kafkaguard acls history`` on a second node (another process, another data directory) reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkaguard.bootstrap import build_services
from kafkaguard.config import load_settings
from kafkaguard.model import Actor
from tests.postgres import PASSWORD
from tests.store.helpers import acl

pytestmark = pytest.mark.integration

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
ALICE = Actor(principal="User:alice", address="10.1.2.3", interface="kafka:SASL_SSL", request_id="admin-1/42")


def test_a_second_node_reads_the_history_the_first_one_wrote(postgres_url: str, tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path / "node1", store=postgres_url, store_password=PASSWORD)
    services = build_services(settings)
    try:
        [created] = services.acls.create_acls([acl("pii-orders", "User:bob")], actor=ALICE)
        [refused] = services.acls.create_acls([acl("pii-orders", "bob")], actor=ALICE)  # not Type:Name
    finally:
        services.close()
    assert created.succeeded and not refused.succeeded

    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    env |= {"KAFKAGUARD_STORE": postgres_url, "KAFKAGUARD_STORE_PASSWORD": PASSWORD}
    second = subprocess.run(
        [str(KAFKAGUARD), "acls", "history", "--data-dir", str(tmp_path / "node2"), "--resource", "pii-orders",
         "--output", "json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    newest, oldest = (json.loads(line) for line in second.stdout.splitlines())
    assert oldest["data"]["action"] == newest["data"]["action"] == "acl.created"
    assert oldest["data"]["result"] == "SUCCESS" and oldest["data"]["acl"]["id"] == created.acl_id
    assert oldest["data"]["acl"]["principal"] == "User:bob"
    assert newest["data"]["result"] == "INVALID_REQUEST" and newest["data"]["acl"]["principal"] == "bob"
    for event in (newest, oldest):
        assert event["data"]["actor"] == {"principal": "User:alice", "address": "10.1.2.3",
                                          "interface": "kafka:SASL_SSL", "request_id": "admin-1/42"}  # fmt: skip
    table = subprocess.run(
        [str(KAFKAGUARD), "acls", "history", "--data-dir", str(tmp_path / "node2"), "--principal", "User:bob"],
        env=env | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "ALLOW User:bob READ from * on TOPIC:LITERAL:pii-orders" in table.stdout
    assert "User:alice" in table.stdout and "10.1.2.3" in table.stdout
