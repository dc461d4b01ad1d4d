"""Kafka's own command-line tools (``kafka.admin.AclCommand`` = kafka-acls.sh, ``kafka.admin.ConfigCommand`` =
kafka-configs.sh, from the broker's jars) run with the same arguments against the real broker and against
kafkaguard's server (and ``kafkaguard proxy`` in front of the broker): exit codes, stdout and stderr must be equal
once addresses, ids and Kafka's own hash-map orders are normalized (``tests.kafka.java_tools``). Each test then
checks both clusters' state the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.broker import KafkaBroker
from tests.kafka.java_tools import (
    comparable_acl_output,
    comparable_config_output,
    kafkaguard_bootstrap,
    kafkaguard_server,
    normalize_addresses,
    run_tool,
    unique,
)
from tests.kafka.proxy.conftest import start_proxy
from tests.serving import ServerHandle

pytestmark = pytest.mark.integration

ACL_COMMAND = "kafka.admin.AclCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.fixture(scope="module", params=["serve", "proxy"])
def kafkaguard(
    request: pytest.FixtureRequest, kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerHandle]:
    """kafkaguard's server, and kafkaguard's proxy in front of the broker (its ACL and SCRAM APIs are kafkaguard's
    own; Metadata and DescribeCluster come from the broker through it): Java's tools must see the same either way."""
    directory = tmp_path_factory.mktemp("kafkaguard-java-tools")
    if request.param == "serve":
        with kafkaguard_server(directory) as handle:
            yield handle
        return
    handle = start_proxy(directory, kafka)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


@pytest.fixture(scope="module")
def admin_config(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The super user's --command-config; the same admin/admin-secret exists on both clusters."""
    return kafka.client_properties(tmp_path_factory.mktemp("java-tools") / "admin.properties")


class Compare:
    """Runs one tool with the same arguments against both clusters and asserts equal normalized results."""

    def __init__(self, kafka: KafkaBroker, kafkaguard: ServerHandle, config: Path) -> None:
        self.kafka = kafka
        self.targets = {"kafka": kafka.bootstrap, "kafkaguard": kafkaguard_bootstrap(kafkaguard)}
        self.config = config
        self.commands = 0

    def acls(self, *args: str, names: tuple[str, ...] | None = None) -> str:
        """AclCommand; ``names`` keeps only blocks about this test's resources and principals."""
        results = {}
        for target, bootstrap in self.targets.items():
            run = run_tool(self.kafka, ACL_COMMAND, bootstrap, self.config, *args)
            results[target] = (
                run.returncode,
                comparable_acl_output(run.stdout, bootstrap, names),
                normalize_addresses(run.stderr, bootstrap),
            )
        self.commands += 1
        assert results["kafkaguard"] == results["kafka"], f"AclCommand {' '.join(args)}"
        return "\n".join(" | ".join(block) for block in results["kafka"][1])

    def config_runs(self, *args: str, users: tuple[str, ...] | None = None) -> dict[str, tuple[int, list[str], str]]:
        results = {}
        for target, bootstrap in self.targets.items():
            run = run_tool(self.kafka, CONFIG_COMMAND, bootstrap, self.config, *args)
            results[target] = (
                run.returncode,
                comparable_config_output(run.stdout, bootstrap, users),
                normalize_addresses(run.stderr, bootstrap),
            )
        self.commands += 1
        return results

    def configs(self, *args: str, users: tuple[str, ...] | None = None) -> list[str]:
        results = self.config_runs(*args, users=users)
        assert results["kafkaguard"] == results["kafka"], f"ConfigCommand {' '.join(args)}"
        return results["kafka"][1]


@pytest.fixture
def compare(kafka: KafkaBroker, kafkaguard: ServerHandle, admin_config: Path) -> Compare:
    return Compare(kafka, kafkaguard, admin_config)


def test_acl_command_add_list_remove(compare: Compare) -> None:
    topic, group, tx, prefix = unique("jt-orders"), unique("jt-billing"), unique("jt-tx"), unique("jt-pay")
    alice, bob = unique("User:jt-alice"), unique("User:jt-bob")
    ours = (topic, group, tx, prefix, alice, bob)

    compare.acls("--add", "--allow-principal", alice, "--producer", "--topic", topic, "--transactional-id", tx,
                 "--idempotent")  # fmt: skip
    compare.acls("--add", "--allow-principal", bob, "--consumer", "--topic", topic, "--group", group)
    compare.acls("--add", "--allow-principal", alice, "--producer", "--topic", prefix,
                 "--resource-pattern-type", "prefixed")  # fmt: skip
    compare.acls("--add", "--deny-principal", bob, "--deny-host", "10.0.0.66", "--operation", "Read",
                 "--operation", "Write", "--topic", topic)  # fmt: skip
    compare.acls("--add", "--allow-principal", bob, "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
                 "--operation", "Describe", "--group", group)  # fmt: skip
    compare.acls("--add", "--allow-principal", alice, "--operation", "DescribeConfigs", "--cluster")
    # refused by the tool itself, identically
    compare.acls("--add", "--allow-principal", alice, "--operation", "Read", "--topic", topic,
                 "--resource-pattern-type", "match")  # fmt: skip

    listed = compare.acls("--list", "--topic", topic)
    assert "operation=WRITE" in listed and f"principal={bob}" in listed
    compare.acls("--list", "--topic", prefix, "--resource-pattern-type", "prefixed")
    compare.acls("--list", "--topic", f"{prefix}.eu", "--resource-pattern-type", "match", names=ours)
    compare.acls("--list", "--topic", topic, "--resource-pattern-type", "any")
    compare.acls("--list", "--group", group)
    compare.acls("--list", "--transactional-id", tx)
    compare.acls("--list", "--principal", alice, names=ours)
    compare.acls("--list", "--principal", bob, "--topic", topic)
    everything = compare.acls("--list", names=ours)
    assert everything.count("Current ACLs for resource") == 5

    compare.acls("--remove", "--allow-principal", bob, "--consumer", "--topic", topic, "--group", group, "--force")
    compare.acls("--list", "--topic", topic)
    compare.acls("--remove", "--topic", prefix, "--resource-pattern-type", "prefixed", "--force")
    compare.acls("--remove", "--deny-principal", bob, "--deny-host", "10.0.0.66", "--operation", "Read",
                 "--topic", topic, "--force")  # fmt: skip
    compare.acls("--remove", "--topic", topic, "--force")
    compare.acls("--remove", "--group", group, "--transactional-id", tx, "--force")
    compare.acls("--remove", "--allow-principal", alice, "--idempotent", "--producer", "--topic", topic, "--force")
    compare.acls("--remove", "--allow-principal", alice, "--operation", "DescribeConfigs", "--cluster", "--force")
    left = compare.acls("--list", names=ours)
    assert left == ""


def test_acl_command_match_and_wildcards(compare: Compare) -> None:
    base = unique("jt-match")
    carol = unique("User:jt-carol")
    ours = (base, carol)
    compare.acls("--add", "--allow-principal", carol, "--operation", "Read", "--topic", f"{base}.orders")
    compare.acls("--add", "--allow-principal", carol, "--operation", "Write", "--topic", base,
                 "--resource-pattern-type", "prefixed")  # fmt: skip
    compare.acls("--add", "--allow-principal", "User:*", "--operation", "Describe", "--topic", f"{base}.",
                 "--resource-pattern-type", "prefixed")  # fmt: skip
    matched = compare.acls("--list", "--topic", f"{base}.orders", "--resource-pattern-type", "match", names=ours)
    # MATCH also returns the LITERAL '*' topic ACLs of other tests on the broker; both sides agree on ours
    assert f"name={base}.orders," in matched and f"name={base}," in matched
    compare.acls("--list", "--topic", f"{base}.other", "--resource-pattern-type", "match", names=ours)
    compare.acls("--list", "--principal", "User:*", names=ours)
    compare.acls("--remove", "--topic", f"{base}.orders", "--resource-pattern-type", "match", "--force")
    compare.acls("--list", names=ours)
    assert compare.acls("--list", "--topic", f"{base}.orders", "--resource-pattern-type", "match", names=ours) == ""


def test_config_command_scram_users(compare: Compare) -> None:
    dave, erin = unique("jt-dave"), unique("jt-erin")
    alter = ("--alter", "--entity-type", "users", "--entity-name")
    assert compare.configs(*alter, dave, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=dave-secret]") == [
        f"Completed updating config for user {dave}."
    ]
    compare.configs(*alter, dave, "--add-config", "SCRAM-SHA-512=[password=dave-secret]")
    # semantics.md "Deliberate differences" (SEMANTICS.md §16.6): KIP-554's own example, both mechanisms of one user in
    # one request, which the KRaft controller refuses and kafkaguard applies.
    both_mechanisms = "SCRAM-SHA-256=[iterations=4096,password=e1],SCRAM-SHA-512=[iterations=16384,password=e2]"
    both = compare.config_runs(*alter, erin, "--add-config", both_mechanisms)
    assert both["kafka"][0] == 1 and "DuplicateResourceException" in both["kafka"][2], both["kafka"]
    assert both["kafkaguard"] == (0, [f"Completed updating config for user {erin}."], ""), both["kafkaguard"]
    compare.configs(*alter, erin, "--add-config", "SCRAM-SHA-256=[iterations=4096,password=e1]")
    compare.configs(*alter, erin, "--add-config", "SCRAM-SHA-512=[iterations=16384,password=e2]")
    # rejected by the server: iterations outside 4096..16384
    compare.configs(*alter, erin, "--add-config", "SCRAM-SHA-256=[iterations=100,password=e1]")
    compare.configs(*alter, erin, "--delete-config", "SCRAM-SHA-256")
    compare.configs(*alter, erin, "--delete-config", "SCRAM-SHA-256")  # no longer exists
    compare.configs(*alter, dave, "--delete-config", "SCRAM-SHA-512")
    # leave no users behind on the shared broker
    compare.configs(*alter, dave, "--delete-config", "SCRAM-SHA-256")
    compare.configs(*alter, erin, "--delete-config", "SCRAM-SHA-512")


def test_config_command_describe_users(compare: Compare) -> None:
    """Needs DescribeClientQuotas: ConfigCommand describes a user's quotas and SCRAM credentials together."""
    frank, grace = unique("jt-frank"), unique("jt-grace")
    ours = (frank, grace)
    alter = ("--alter", "--entity-type", "users", "--entity-name")
    compare.configs(*alter, frank, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=f]")
    compare.configs(*alter, frank, "--add-config", "SCRAM-SHA-512=[password=f]")
    compare.configs(*alter, grace, "--add-config", "SCRAM-SHA-512=[iterations=10000,password=g]")
    one = compare.configs("--describe", "--entity-type", "users", "--entity-name", frank)
    assert one == [
        f"SCRAM credential configs for user-principal '{frank}' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    ]
    compare.configs("--describe", "--entity-type", "users", "--entity-name", unique("jt-nobody"))
    every = compare.configs("--describe", "--entity-type", "users", users=ours)
    assert len(every) == 2
    compare.configs("--alter", "--entity-type", "users", "--entity-name", frank, "--delete-config", "SCRAM-SHA-256")
    compare.configs("--describe", "--entity-type", "users", "--entity-name", frank)
    compare.configs("--describe", "--entity-type", "users", users=ours)
    compare.configs("--alter", "--entity-type", "users", "--entity-name", frank, "--delete-config", "SCRAM-SHA-512")
    compare.configs("--alter", "--entity-type", "users", "--entity-name", grace, "--delete-config", "SCRAM-SHA-512")
    assert compare.configs("--describe", "--entity-type", "users", users=ours) == []
