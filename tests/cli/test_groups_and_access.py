"""``kafkaguard groups``, ``kafkaguard can`` and ``kafkaguard who-can`` on a real data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern
from kafkaguard import ResourceType as T
from kafkaguard.bootstrap import build_services
from kafkaguard.cli.main import app
from kafkaguard.config import load_settings
from kafkaguard.service import NewTopic
from tests.actors import ACTOR

Op, ALLOW, DENY = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(principal, op, name, ptype=PatternType.LITERAL, perm=ALLOW, host="*") -> AclBinding:
    return AclBinding(ResourcePattern(T.TOPIC, name, ptype), AccessControlEntry(principal, host, op, perm))


def prepare(data_dir: Path) -> None:
    services = build_services(load_settings(None, data_dir=data_dir))
    try:
        results = services.acls.create_acls(
            [
                acl("Group:ops", Op.WRITE, "orders-", PatternType.PREFIXED),
                acl("User:alice", Op.READ, "orders-eu"),
                acl("User:alice", Op.WRITE, "orders-eu", perm=DENY),
                acl("User:*", Op.DESCRIBE, "*"),
                acl("User:bob", Op.READ, "orders-eu", host="10.0.0.0/8"),
            ],
            actor=ACTOR,
        )
        assert all(r.error is None for r in results)
        created = services.topics.create_topics(
            [NewTopic(name=name, num_partitions=1, replication_factor=1) for name in ("orders-eu", "orders-us", "x")],
            actor=ACTOR,
        )
        assert all(r.error is None for r in created)
    finally:
        services.close()


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_groups_add_list_remove_delete(tmp_path: Path) -> None:
    d = str(tmp_path)
    assert run("groups", "add", "ops", "User:alice", "User:bob", "--data-dir", d) == (
        0, "added User:alice, User:bob to Group:ops\n",
    )  # fmt: skip
    assert run("groups", "list", "--data-dir", d)[1] == "Group:ops: User:alice, User:bob\n"
    assert run("groups", "remove", "Group:ops", "User:bob", "--data-dir", d)[0] == 0
    code, out = run("groups", "list", "--json", "--data-dir", d)
    assert code == 0 and json.loads(out) == {"Group:ops": ["User:alice"]}
    assert run("groups", "delete", "ops", "--data-dir", d) == (0, "Group:ops had 1 member(s); it has none now\n")
    assert run("groups", "list", "--data-dir", d)[1] == "no principal groups\n"


def test_groups_refuse_bad_input_with_what_to_fix(tmp_path: Path) -> None:
    code, out = run("groups", "add", "ops", "Group:admins", "--data-dir", str(tmp_path))
    assert code == 2 and "groups do not nest" in out
    code, out = run("groups", "add", "*", "User:alice", "--data-dir", str(tmp_path))
    assert code == 2 and "write the ACL for User:*" in out


def test_can_lists_patterns_and_decides_the_catalog_topics(tmp_path: Path) -> None:
    prepare(tmp_path)
    assert run("groups", "add", "ops", "User:alice", "--data-dir", str(tmp_path))[0] == 0
    code, out = run("can", "User:alice", "--json", "--data-dir", str(tmp_path))
    assert code == 0, out
    answer = json.loads(out)
    assert answer["groups"] == ["Group:ops"]
    patterns = {(p["pattern_type"], p["resource_name"]): p for p in answer["patterns"]}
    assert set(patterns) == {("PREFIXED", "orders-"), ("LITERAL", "orders-eu"), ("LITERAL", "*")}
    assert patterns[("PREFIXED", "orders-")]["acls"][0]["principal"] == "Group:ops"
    topics = {t["resource_name"]: t for t in answer["topics"]}
    assert set(topics) == {"orders-eu", "orders-us", "x"}
    assert "WRITE" in topics["orders-us"]["allowed"] and "WRITE" in topics["orders-eu"]["denied"]
    assert topics["x"]["allowed"] == ["DESCRIBE"]
    code, text = run("can", "User:alice", "--data-dir", str(tmp_path))
    assert code == 0 and "groups: Group:ops" in text and "orders-us: allowed WRITE, DESCRIBE" in text


def test_who_can_expands_groups_and_names_cidr_rows(tmp_path: Path) -> None:
    prepare(tmp_path)
    assert run("groups", "add", "ops", "User:carol", "--data-dir", str(tmp_path))[0] == 0
    code, out = run("who-can", "--topic", "orders-eu", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert "User:carol from * via Group:ops: allowed WRITE, DESCRIBE" in out
    assert "User:alice from *: allowed READ, DESCRIBE; denied" in out
    assert "User:bob from 10.0.0.0/8: allowed READ, DESCRIBE" in out
    assert "any principal (User:*) from *: allowed DESCRIBE" in out
    code, out = run("who-can", "--topic", "a", "--group", "b", "--data-dir", str(tmp_path))
    assert code == 2 and "exactly one resource" in out


def record_as_a_server(data_dir: Path, **settings: object) -> None:
    """What ``serve`` and ``proxy`` do at start: record their authorization settings in the data directory."""
    from kafkaguard.config import record_served_settings

    record_served_settings(load_settings(None, data_dir=data_dir, **settings), "kafkaguard serve")


def test_who_can_lists_the_super_users_the_server_of_the_data_directory_runs_with(tmp_path: Path) -> None:
    prepare(tmp_path)
    code, out = run("who-can", "--topic", "orders-eu", "--data-dir", str(tmp_path))
    assert code == 0
    assert "no super users known: no server has recorded its settings" in out
    assert "super users (every operation)" not in out
    record_as_a_server(tmp_path, super_users="User:admin;User:ops")
    code, out = run("who-can", "--topic", "orders-eu", "--data-dir", str(tmp_path))
    assert code == 0
    assert "super users (every operation): User:admin, User:ops" in out
    assert "as kafkaguard serve recorded them in" in out
    code, out = run("can", "User:ops", "--data-dir", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["super_user"] is True


def test_settings_given_to_the_command_win_over_the_recorded_ones(tmp_path: Path) -> None:
    prepare(tmp_path)
    record_as_a_server(tmp_path, super_users="User:admin")
    config = tmp_path / "c.yaml"
    config.write_text(f"data_dir: {tmp_path}\nsuper_users: 'User:root'\n")
    code, out = run("who-can", "--topic", "orders-eu", "--config", str(config))
    assert code == 0
    assert "super users (every operation): User:root" in out
    assert "User:admin" not in out


def test_a_damaged_record_is_refused_with_what_to_do(tmp_path: Path) -> None:
    prepare(tmp_path)
    (tmp_path / "served-settings.json").write_text('{"super_users": 7}')
    code, out = run("who-can", "--topic", "orders-eu", "--data-dir", str(tmp_path))
    assert code == 2
    assert "served-settings.json is not a record of a server's settings" in out
    assert "start the server once to write it again" in out


def test_an_admin_password_without_an_admin_user_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """KAFKAGUARD_ADMIN_PASSWORD exported for scripts/run, then another command in the same shell."""
    monkeypatch.setenv("KAFKAGUARD_ADMIN_PASSWORD", "change-me")
    code, out = run("groups", "list", "--data-dir", str(tmp_path))
    assert code == 2
    assert "admin_password is set (KAFKAGUARD_ADMIN_PASSWORD?) but admin_user is not" in out
    assert "pass --config config/kafkaguard.yaml" in out and "unset KAFKAGUARD_ADMIN_PASSWORD" in out
