"""Helpers for the real-Kafka tests: a kafkaguard server beside the broker, Kafka's Java tools against either,
and the normalization that makes their outputs comparable (addresses, ids, and Kafka's hash-map orders)."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafkaguard.config import SecurityProtocol
from tests.kafka.broker import KafkaBroker
from tests.serving import ServerHandle, sasl_server

TOOL_TIMEOUT = 120


@contextmanager
def kafkaguard_server(directory: Path) -> Iterator[ServerHandle]:
    """kafkaguard's server with one SASL_PLAINTEXT listener, super user User:admin (password admin-secret, both
    mechanisms, as on the broker), no auto-creation (as the broker's tests expect)."""
    with sasl_server(directory, auto_create_topics=False) as handle:
        yield handle


def kafkaguard_bootstrap(server: ServerHandle) -> str:
    return server.bootstrap(SecurityProtocol.SASL_PLAINTEXT)


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str


def run_tool(kafka: KafkaBroker, main_class: str, bootstrap: str, config: Path, *args: str) -> ToolRun:
    """One of Kafka's command-line tools (a main class from the broker's own jars) against ``bootstrap``."""
    command = kafka.java_command(main_class, "--bootstrap-server", bootstrap, "--command-config", str(config), *args)
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    return ToolRun(done.returncode, done.stdout, done.stderr)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def normalize_addresses(text: str, bootstrap: str) -> str:
    """The only per-target text: the bootstrap address (in error messages and echoed args) and UUIDs."""
    return _UUID.sub("<uuid>", text.replace(bootstrap, "<bootstrap>"))


def acl_blocks(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """AclCommand's output as (header, ACL lines) blocks, in order.

    AclCommand prints one block per resource (``Adding ACLs for resource `…`:``, ``Current ACLs for resource
    `…`:``, ``ACLs for principal `…```), each followed by one ``(principal=…, host=…, …)`` line per ACL.
    """
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("(principal=") and blocks:
            blocks[-1][1].append(stripped)
            continue
        blocks.append((stripped, []))
    return [(header, tuple(lines)) for header, lines in blocks]


def comparable_acl_output(text: str, bootstrap: str, names: tuple[str, ...] | None = None) -> list[tuple[str, ...]]:
    """AclCommand's stdout with Kafka's hash-map orders removed.

    The order of resources comes from a Scala ``groupBy`` (a HashMap) in AclCommand itself, and the order of ACLs
    inside a resource is the order of Kafka's DescribeAcls response, which SEMANTICS.md §7 and §15.13 record as a
    hash-map order (it follows the random ACL ids). So blocks are compared as a set, and the lines of one block as
    a set; every header and every line must still be equal. With ``names``, only blocks about one of them are kept,
    and of a resource not named (the cluster, ``*``) only the lines naming one of them (the session's broker also
    holds other tests' ACLs).
    """
    blocks = acl_blocks(normalize_addresses(text, bootstrap))
    if names is not None:
        kept = []
        for header, lines in blocks:
            if not any(n in header for n in names):  # a shared resource (the cluster, '*'): only our principals' ACLs
                lines = tuple(line for line in lines if any(n in line for n in names))
                if not lines:
                    continue
            kept.append((header, lines))
        blocks = kept
    return sorted((header, *sorted(lines)) for header, lines in blocks)


def comparable_config_output(text: str, bootstrap: str, users: tuple[str, ...] | None = None) -> list[str]:
    """ConfigCommand's stdout, with Kafka's hash-map orders removed: the users and, per user, the comma-separated
    credentials come in the order of DescribeUserScramCredentials' answer, which Kafka's ScramImage builds from
    HashMaps (by user name, and by the mechanism enum), SEMANTICS.md §15.13: so the lines are compared as a set
    and each line's credentials as a set. With ``users``, only lines about those users are kept (the session's
    broker also holds other tests' users)."""
    out = []
    prefix = "SCRAM credential configs for user-principal '"
    for line in normalize_addresses(text, bootstrap).splitlines():
        if users is not None and not any(f"'{u}'" in line for u in users):
            continue
        if line.startswith(prefix) and " are " in line:
            head, _, rest = line.partition(" are ")
            line = f"{head} are {', '.join(sorted(rest.split(', ')))}"
        out.append(line)
    return sorted(out)
