"""kafkaguard's own command line (``acls``, ``configs``, ``export``, ``plan``, ``apply``, ``check``) against the
real Kafka broker, each result checked with independent clients: kafka-python for ACLs, confluent-kafka for SCRAM
credentials and logins, and Kafka's own AclCommand for the text of ``acls --list``."""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner, Result

from kafkaguard.cli.main import app
from tests.actors import ACTOR
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.java_tools import comparable_acl_output, run_tool, unique

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka.admin import (  # type: ignore[import-untyped]
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
        ResourceType,
    )

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

Acl = tuple[str, str, str, str, str, str, str]


@pytest.fixture(scope="module")
def admin_config(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kafka.client_properties(tmp_path_factory.mktemp("cli-kafka") / "admin.properties")


@pytest.fixture(scope="module")
def checker(kafka: KafkaBroker) -> Iterator[KafkaAdminClient]:
    """kafka-python as the super user: the second opinion on the broker's ACLs."""
    client = KafkaAdminClient(
        bootstrap_servers=kafka.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=ADMIN,
        sasl_plain_password=ADMIN_PASSWORD,
        request_timeout_ms=20000,
    )
    try:
        yield client
    finally:
        client.close()


def cluster_acls(checker: KafkaAdminClient, name: str | None = None) -> set[Acl]:
    acl_filter = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, name, ACLResourcePatternType.ANY),
    )
    found, error = checker.describe_acls(acl_filter)
    assert error.errno == 0, error
    return {
        (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
         a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name, a.permission_type.name)
        for a in found
    }  # fmt: skip


def of(acls: set[Acl], principal: str) -> set[Acl]:
    return {a for a in acls if a[3] == principal}


def eventually(probe: Callable[[], object], expected: object, timeout: float = 15.0) -> None:
    """The broker applies a committed ACL or credential change from its metadata log a moment after the controller
    answered: poll until ``probe()`` gives ``expected``."""
    deadline = time.monotonic() + timeout
    while (got := probe()) != expected:
        assert time.monotonic() < deadline, f"still {got!r}, expected {expected!r}"
        time.sleep(0.2)  # waiting for the broker's metadata image, bounded by the deadline


def cli(kafka: KafkaBroker, config: Path, command: str, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(
        app, [command, "--bootstrap-server", kafka.bootstrap, "--command-config", str(config), *args]
    )
    assert result.exit_code == code, result.output
    return result


def confluent_admin(kafka: KafkaBroker, user: str, password: str, mechanism: str) -> AdminClient:
    config: dict[str, Any] = {
        "bootstrap.servers": kafka.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.username": user, "sasl.password": password, "logger": logging.getLogger("rdkafka-test"),
    }  # fmt: skip
    return AdminClient(config)


def logs_in(kafka: KafkaBroker, user: str, password: str, mechanism: str) -> bool:
    admin = confluent_admin(kafka, user, password, mechanism)  # kept alive until the answer: no early destroy
    try:
        admin.describe_cluster(request_timeout=5).result(timeout=8)
    except Exception:  # noqa: BLE001 - any failure means "did not log in"
        return False
    return True


def scram_iterations(kafka: KafkaBroker, user: str) -> dict[str, int]:
    admin = confluent_admin(kafka, ADMIN, ADMIN_PASSWORD, "SCRAM-SHA-512")
    try:
        futures: Any = admin.describe_user_scram_credentials([user])  # a dict of futures when users are given
        described = futures[user].result(timeout=20)
    except Exception:  # noqa: BLE001 - RESOURCE_NOT_FOUND: no credentials
        return {}
    return {info.mechanism.name.replace("_", "-"): info.iterations for info in described.scram_credential_infos}


def test_acls_add_list_remove(kafka: KafkaBroker, admin_config: Path, checker: KafkaAdminClient) -> None:
    topic, group, tx = unique("cli-orders"), unique("cli-billing"), unique("cli-tx")
    alice, bob = unique("User:cli-alice"), unique("User:cli-bob")
    cli(kafka, admin_config, "acls", "--add", "--allow-principal", alice, "--producer", "--topic", topic,
        "--transactional-id", tx, "--idempotent")  # fmt: skip
    cli(kafka, admin_config, "acls", "--add", "--allow-principal", bob, "--consumer", "--topic", topic,
        "--group", group)  # fmt: skip
    cli(kafka, admin_config, "acls", "--add", "--deny-principal", bob, "--deny-host", "10.0.0.66",
        "--operation", "Read", "--topic", topic)  # fmt: skip
    eventually(lambda: len(of(cluster_acls(checker), bob)), 4)
    acls = cluster_acls(checker)
    assert of(acls, alice) == {
        ("TOPIC", topic, "LITERAL", alice, "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    } | {("TRANSACTIONAL_ID", tx, "LITERAL", alice, "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")} | {
        ("CLUSTER", "kafka-cluster", "LITERAL", alice, "*", "IDEMPOTENT_WRITE", "ALLOW")
    }
    assert of(acls, bob) == {
        ("TOPIC", topic, "LITERAL", bob, "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", bob, "*", "DESCRIBE", "ALLOW"),
        ("GROUP", group, "LITERAL", bob, "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", bob, "10.0.0.66", "READ", "DENY"),
    }

    # --list: JSON equals the broker's ACLs; the text equals Kafka's own AclCommand's against the same broker
    listed = json.loads(cli(kafka, admin_config, "acls", "--list", "--topic", topic, "--output", "json").stdout)
    assert {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"], a["operation"],
             a["permission_type"]) for a in listed["acls"]} == cluster_acls(checker, topic)  # fmt: skip
    for args in (["--topic", topic], ["--group", group], ["--principal", bob]):
        ours = cli(kafka, admin_config, "acls", "--list", *args).stdout
        theirs = run_tool(kafka, "kafka.admin.AclCommand", kafka.bootstrap, admin_config, "--list", *args)
        assert theirs.returncode == 0, theirs.stderr
        assert comparable_acl_output(ours, kafka.bootstrap) == comparable_acl_output(theirs.stdout, kafka.bootstrap)

    cli(kafka, admin_config, "acls", "--remove", "--allow-principal", bob, "--consumer", "--topic", topic,
        "--group", group, "--force")  # fmt: skip
    eventually(lambda: of(cluster_acls(checker), bob), {("TOPIC", topic, "LITERAL", bob, "10.0.0.66", "READ", "DENY")})
    cli(kafka, admin_config, "acls", "--remove", "--topic", topic, "--force")
    cli(kafka, admin_config, "acls", "--remove", "--transactional-id", tx, "--force")
    cli(kafka, admin_config, "acls", "--remove", "--allow-principal", alice, "--operation", "IdempotentWrite",
        "--cluster", "--force")  # fmt: skip
    eventually(lambda: of(cluster_acls(checker), alice) | of(cluster_acls(checker), bob), set())


def test_configs_scram_users(kafka: KafkaBroker, admin_config: Path) -> None:
    user = unique("cli-carol")
    base = ["--entity-type", "users", "--entity-name", user]
    added = cli(kafka, admin_config, "configs", "--alter", *base, "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=carol-secret]")  # fmt: skip
    assert added.stdout == f"Completed updating config for user {user}.\n"
    cli(kafka, admin_config, "configs", "--alter", *base, "--add-config", "SCRAM-SHA-512=[password=carol-512]")
    eventually(lambda: scram_iterations(kafka, user), {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 8192})
    eventually(lambda: logs_in(kafka, user, "carol-secret", "SCRAM-SHA-256"), True)
    eventually(lambda: logs_in(kafka, user, "carol-512", "SCRAM-SHA-512"), True)
    assert not logs_in(kafka, user, "wrong", "SCRAM-SHA-256")
    described = cli(kafka, admin_config, "configs", "--describe", *base)
    assert described.stdout == (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=8192\n"
    )
    every = cli(kafka, admin_config, "configs", "--describe", "--entity-type", "users").stdout
    assert f"'{user}' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=8192" in every
    assert f"user-principal '{ADMIN}'" in every
    cli(kafka, admin_config, "configs", "--alter", *base, "--delete-config", "SCRAM-SHA-256")
    eventually(lambda: scram_iterations(kafka, user), {"SCRAM-SHA-512": 8192})
    eventually(lambda: logs_in(kafka, user, "carol-secret", "SCRAM-SHA-256"), False)
    cli(kafka, admin_config, "configs", "--alter", *base, "--delete-config", "SCRAM-SHA-512")
    eventually(lambda: scram_iterations(kafka, user), {})


def test_export_plan_apply_check(kafka: KafkaBroker, admin_config: Path, checker: KafkaAdminClient,
                                 tmp_path: Path) -> None:  # fmt: skip
    """export → edit → plan → apply (--prune) → check, the ACLs-as-code cycle, on the whole shared broker: the file
    always starts from a fresh export, so other tests' ACLs are kept and only this test's principals change."""
    dan, eve = unique("User:cli-dan"), unique("User:cli-eve")
    topic, group = unique("cli-events"), unique("cli-readers")
    exported = tmp_path / "cluster.yaml"
    cli(kafka, admin_config, "export", "-o", str(exported))
    assert cli(kafka, admin_config, "plan", "-f", str(exported), "--detailed-exitcode", "--prune").exit_code == 0

    document: dict[str, Any] = yaml.safe_load(exported.read_text()) or {}
    principals = document.setdefault("principals", {}) or {}
    document["principals"] = principals
    principals[dan] = {"consumer": {"topics": [topic], "groups": [group]}}
    principals[eve] = {"acls": [{"topic": topic, "operations": ["Write", "Describe"]},
                                {"topic": topic, "operations": ["Read"], "permission": "deny"}]}  # fmt: skip
    wanted = tmp_path / "wanted.yaml"
    wanted.write_text(yaml.safe_dump(document))
    plan = cli(kafka, admin_config, "plan", "-f", str(wanted), "--detailed-exitcode", code=2).stdout
    assert dan in plan and eve in plan
    dry = cli(kafka, admin_config, "apply", "-f", str(wanted), "--dry-run")
    assert dan in dry.stdout and of(cluster_acls(checker), dan) == set()
    cli(kafka, admin_config, "apply", "-f", str(wanted))
    eventually(lambda: len(of(cluster_acls(checker), eve)), 3)
    acls = cluster_acls(checker)
    assert of(acls, dan) == {
        ("TOPIC", topic, "LITERAL", dan, "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", dan, "*", "DESCRIBE", "ALLOW"),
        ("GROUP", group, "LITERAL", dan, "*", "READ", "ALLOW"),
    }
    assert of(acls, eve) == {
        ("TOPIC", topic, "LITERAL", eve, "*", "WRITE", "ALLOW"),
        ("TOPIC", topic, "LITERAL", eve, "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", topic, "LITERAL", eve, "*", "READ", "DENY"),
    }
    assert cli(kafka, admin_config, "plan", "-f", str(wanted), "--detailed-exitcode").exit_code == 0

    # check answers from a fresh export of the broker, as the broker's StandardAuthorizer would
    now = tmp_path / "now.json"
    cli(kafka, admin_config, "export", "--format", "json", "-o", str(now))
    assert len(json.loads(now.read_text())["acls"]) == len(cluster_acls(checker))

    def check(principal: str, operation: str, *resource: str) -> str:
        result = CliRunner().invoke(app, ["check", "--principal", principal, "--operation", operation, *resource,
                                          "--acls", str(now), "--super-users", f"User:{ADMIN}", "--json"])  # fmt: skip
        return str(json.loads(result.stdout)["decision"])

    assert check(dan, "READ", "--topic", topic) == "ALLOWED"
    assert check(dan, "READ", "--group", group) == "ALLOWED"
    assert check(dan, "WRITE", "--topic", topic) == "DENIED"
    assert check(eve, "READ", "--topic", topic) == "DENIED"
    assert check(eve, "DESCRIBE", "--topic", topic) == "ALLOWED"
    assert check(f"User:{ADMIN}", "ALTER", "--cluster") == "ALLOWED"

    # remove eve again: a fresh export without her, applied with --prune, removes exactly her ACLs
    cli(kafka, admin_config, "export", "-o", str(exported))
    document = yaml.safe_load(exported.read_text())
    del document["principals"][eve]
    exported.write_text(yaml.safe_dump(document))
    pruned = cli(kafka, admin_config, "apply", "-f", str(exported), "--prune", "--force")
    assert eve in pruned.stdout
    eventually(lambda: (of(cluster_acls(checker), eve), len(of(cluster_acls(checker), dan))), (set(), 3))
    del document["principals"][dan]
    exported.write_text(yaml.safe_dump(document))
    cli(kafka, admin_config, "apply", "-f", str(exported), "--prune", "--force")
    eventually(lambda: of(cluster_acls(checker), dan), set())


def test_can_expands_patterns_to_the_topics_of_a_real_cluster(
    kafka: KafkaBroker, admin_config: Path, tmp_path: Path
) -> None:
    """``kafkaguard can --bootstrap-server``: kafkaguard's ACLs (a group's PREFIXED ALLOW, a DENY on one topic),
    expanded to the topics the real broker lists, each decided."""
    from confluent_kafka.cimpl import NewTopic

    from kafkaguard import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType
    from kafkaguard import ResourcePattern as Pattern
    from kafkaguard import ResourceType as Type
    from kafkaguard.bootstrap import build_services
    from kafkaguard.config import load_settings

    prefix = unique("ledger") + "-"
    topics = [prefix + "eu", prefix + "us", unique("other")]
    broker_admin = AdminClient(
        {"bootstrap.servers": kafka.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD}
    )  # fmt: skip
    for future in broker_admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(30)
    services = build_services(load_settings(None, data_dir=tmp_path))
    try:
        write = AccessControlEntry("Group:ledger", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        deny = AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.DENY)
        results = services.acls.create_acls(
            [
                AclBinding(Pattern(Type.TOPIC, prefix, PatternType.PREFIXED), write),
                AclBinding(Pattern(Type.TOPIC, prefix + "us", PatternType.LITERAL), deny),
            ],
            actor=ACTOR,
        )
        assert all(r.error is None for r in results)
        services.groups.add_members("ledger", ["User:alice"], actor=ACTOR)
    finally:
        services.close()
    result = CliRunner().invoke(
        app,
        ["can", "User:alice", "--data-dir", str(tmp_path), "--bootstrap-server", kafka.bootstrap,
         "--command-config", str(admin_config), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    decided = {t["resource_name"]: t for t in json.loads(result.stdout)["topics"]}
    assert set(decided) == {prefix + "eu", prefix + "us"}  # the other topic is reached by no pattern
    assert "WRITE" in decided[prefix + "eu"]["allowed"] and "WRITE" in decided[prefix + "us"]["denied"]
