"""Issue 40: ``kafkaguard audit`` decides super users as the server did, not as ordinary principals.

On the default config (``super_users: "User:admin"``) the log records the admin's requests ALLOWED by rule
``SuperUser``; a job that re-decides them without super users reported ``User:admin`` as the top denied principal.
The super users now come from the server's config file (``--config``), its environment (``KAFKAGUARD_*``) or what it
recorded in its data directory (``served-settings.json``); with none of them, a log with super-user decisions is
refused, naming the principals."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.audit.records import AuditRecord, to_json_line
from kafkaguard.cli.main import app
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from tests.audit.records.test_record import T

pytestmark = pytest.mark.spark

ACLS = {
    "acls": [
        {
            "id": "a1",
            "principal": "User:alice",
            "host": "*",
            "resource_type": "TOPIC",
            "resource_name": "orders",
            "pattern_type": "LITERAL",
            "operation": "READ",
            "permission_type": "ALLOW",
        }
    ]
}


def _record(k: int, principal: str, op: str, rtype: ResourceType, name: str, rule: str | None) -> AuditRecord:
    return AuditRecord(
        time=T + timedelta(seconds=k),
        principal=principal,
        host="127.0.0.1",
        api="Metadata",
        operation=AclOperation[op],
        resource_type=rtype,
        resource_name=name,
        decision=AuthorizationResult.ALLOWED if rule != "DefaultDeny" else AuthorizationResult.DENIED,
        rule=rule,
    )


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("superusers")
    rows = [_record(k, "User:admin", "CREATE", ResourceType.CLUSTER, "kafka-cluster", "SuperUser") for k in range(23)]
    rows += [_record(100 + k, "User:alice", "READ", ResourceType.TOPIC, "orders", None) for k in range(5)]
    rows += [_record(200 + k, "User:bob", "READ", ResourceType.TOPIC, "orders", "DefaultDeny") for k in range(2)]
    (root / "audit.log").write_text("\n".join(to_json_line(r) for r in rows) + "\n")
    (root / "acls.json").write_text(json.dumps(ACLS))
    # the repository's default config, as scripts/run serves it
    (root / "kafkaguard.yaml").write_text(
        (Path(__file__).parents[2] / "config" / "kafkaguard.yaml").read_text().replace("data_dir: data", "data_dir: d")
    )
    return root


def _usage(root: Path, out: str, *extra: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    args = ["audit", "usage", "--log", str(root / "audit.log"), "--acls", str(root / "acls.json")]
    result = CliRunner().invoke(app, [*args, "--out", str(root / out), *extra], env=env)
    return result.exit_code, result.stdout, result.stderr


def _denied(spark, root: Path, out: str) -> list[tuple[str, int]]:
    rows = spark.read.parquet(str(root / out / "top_denied_principals")).collect()
    return sorted((r.principal, r.requests) for r in rows)


def test_super_users_from_the_servers_config_file(spark, logged: Path) -> None:
    code, _, err = _usage(logged, "from-config", "--config", str(logged / "kafkaguard.yaml"))
    assert code == 0, err
    assert _denied(spark, logged, "from-config") == [("User:bob", 2)]
    assert "User:admin" in err and "kafkaguard.yaml" in err  # says where the super users came from


def test_super_users_from_the_environment(spark, logged: Path) -> None:
    code, _, err = _usage(
        logged, "from-env", "--data-dir", str(logged / "none"), env={"KAFKAGUARD_SUPER_USERS": "User:admin"}
    )
    assert code == 0, err
    assert _denied(spark, logged, "from-env") == [("User:bob", 2)]


def test_super_users_the_server_recorded_in_its_data_directory(spark, logged: Path) -> None:
    data = logged / "data"
    data.mkdir()
    record = {"super_users": "User:admin", "allow_everyone_if_no_acl_found": False, "served_by": "kafkaguard serve"}
    (data / "served-settings.json").write_text(json.dumps(record))
    code, _, err = _usage(logged, "from-data-dir", "--data-dir", str(data))
    assert code == 0, err
    assert _denied(spark, logged, "from-data-dir") == [("User:bob", 2)]
    assert "served-settings.json" in err


def test_no_known_super_users_but_the_log_has_super_user_decisions_is_refused(logged: Path) -> None:
    code, out, err = _usage(logged, "unknown", "--data-dir", str(logged / "nowhere"))
    assert code == 2, out
    assert "User:admin" in err and "23" in err and "--super-users" in err
    assert not (logged / "unknown" / "top_denied_principals").exists()


def test_explicit_super_users_win(spark, logged: Path) -> None:
    code, _, err = _usage(logged, "explicit", "--super-users", "User:admin", "--data-dir", str(logged / "nowhere"))
    assert code == 0, err
    assert _denied(spark, logged, "explicit") == [("User:bob", 2)]


def test_the_job_entry_point_alone_refuses_too(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafkaguard.pipeline.jobs.entry import main

    args = ["usage", "--log", str(logged / "audit.log"), "--acls", str(logged / "acls.json")]
    assert main([*args, "--out", str(logged / "direct")]) == 2
    assert "User:admin" in capsys.readouterr().err


@pytest.mark.integration
def test_usage_on_a_real_servers_log_from_its_directory(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The friction as met: a real server (super_users User:admin, audit_mode usage, data_dir ./data) whose admin
    made requests; ``kafkaguard audit usage`` run from the same directory, with no super-user flag."""
    import time

    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    from tests.serving import ADMIN, ADMIN_PASSWORD, sasl_server

    data = tmp_path / "data"
    with sasl_server(data, audit_log=data / "audit.log", audit_mode="usage", audit_usage_window_seconds=0.5) as server:
        host, port = server.sasl
        admin = AdminClient(
            {
                "bootstrap.servers": f"{host}:{port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": ADMIN,
                "sasl.password": ADMIN_PASSWORD,
            }
        )
        admin.describe_cluster(request_timeout=10).result(timeout=30)  # CLUSTER DESCRIBE, allowed as SuperUser
        topics = admin.create_topics([NewTopic("created-by-admin", 1, 1)], request_timeout=10)  # CLUSTER CREATE
        topics["created-by-admin"].result(timeout=30)
        time.sleep(1.5)  # a usage window (0.5 s here) ends and is written
        del admin, topics  # librdkafka's client ends before the server does
    events = [json.loads(line) for line in (data / "audit.log").read_text().splitlines() if line.strip()]
    logged = [e["data"] for e in events if str(e.get("type")).startswith("io.kafkaguard.authorization.")]
    assert any(r.get("principal") == "User:admin" and r.get("rule") == "SuperUser" for r in logged), logged
    (tmp_path / "acls.json").write_text(json.dumps(ACLS))
    monkeypatch.chdir(tmp_path)  # where the server's ./data is: no --data-dir, no --config, no --super-users
    # (absolute paths for Spark: the shared session's JVM keeps the directory it started in)
    log, out = str(data / "audit.log"), str(tmp_path / "out")
    result = CliRunner().invoke(app, ["audit", "usage", "--log", log, "--acls", "acls.json", "--out", out])
    assert result.exit_code == 0, result.output
    assert "User:admin" not in dict(_denied(spark, tmp_path, "out"))
    assert "served-settings.json" in result.stderr
