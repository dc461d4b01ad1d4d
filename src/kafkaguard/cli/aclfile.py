"""ACLs as code: the YAML file ``plan``/``apply`` read and ``export`` writes, and the ACL JSON format as input.

One section per principal; each lists explicit ACLs and/or kafka-acls.sh's producer/consumer shorthands::

    principals:
      User:alice:
        acls:
          - topic: orders              # one of topic, group, cluster, transactional_id, delegation_token, user
            pattern: literal           # literal (default) or prefixed
            operations: [Read, Describe]
            permission: allow          # allow (default) or deny
            hosts: ["*"]               # default ["*"]; quote "*" (a bare * is YAML syntax)
          - cluster: kafka-cluster
            operations: [IdempotentWrite]
        consumer:                      # READ, DESCRIBE on the topics; READ on the groups
          topics: [orders]
          groups: [billing]
        producer:                      # WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on the ids
          topics: [payments-]
          pattern: prefixed
          transactional_ids: [payments-tx]
          idempotent: true             # IDEMPOTENT_WRITE on the cluster

``producer`` and ``consumer`` also take a list of such blocks. Every problem in a file is reported at once, each
with its line and the path of the field (``acls.yaml:7: principals.User:alice.acls[0].operations[1]: ...``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information

from kafkaguard.authorizer.requests import SUPPORTED_OPERATIONS
from kafkaguard.errors import InvalidAclError, InvalidNameError, KafkaguardError
from kafkaguard.model import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    principal_error,
    validate_new_binding,
)
from kafkaguard.model.acl_json import acls_from_document

#: YAML key → resource type, in the order an entry is checked for one.
RESOURCE_KEYS: dict[str, ResourceType] = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.CLUSTER,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
    "delegation_token": ResourceType.DELEGATION_TOKEN,
    "user": ResourceType.USER,
}
_KEY_OF = {t: k for k, t in RESOURCE_KEYS.items()}
_ENTRY_KEYS = {*RESOURCE_KEYS, "pattern", "operations", "operation", "permission", "hosts", "host"}
_SHORTHAND_KEYS = {
    "consumer": {"topics", "groups", "pattern", "hosts"},
    "producer": {"topics", "transactional_ids", "idempotent", "pattern", "hosts"},
}
_O = AclOperation


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """Kafka's ``AclEntry.supportedOperations`` plus ALL (and AUTO_CREATE where kafkaguard checks it)."""
    extra = {_O.ALL} | ({_O.AUTO_CREATE} if resource_type in (ResourceType.TOPIC, ResourceType.CLUSTER) else set())
    return frozenset(SUPPORTED_OPERATIONS.get(resource_type, ())) | extra


@dataclass(frozen=True, slots=True)
class AclFileProblem:
    line: int
    path: str
    message: str


class AclFileError(KafkaguardError):
    """An ACL file that cannot be used; ``problems`` lists every problem with its line."""

    def __init__(self, source: str, problems: Iterable[AclFileProblem]) -> None:
        self.source = source
        self.problems = tuple(sorted(problems, key=lambda p: p.line))
        super().__init__(
            "\n".join(f"{source}:{p.line}: {p.path + ': ' if p.path else ''}{p.message}" for p in self.problems)
        )


def load_acl_file(path: Path) -> list[AclBinding]:
    """The bindings a YAML (this module's format) or JSON (``{"acls": [...]}``) file describes, deduplicated.

    :raises AclFileError: unreadable, not YAML/JSON, or any invalid entry (all are reported).
    """
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise AclFileError(str(path), [AclFileProblem(0, "", f"cannot read the file: {e.strerror or e}")]) from e
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            return list(dict.fromkeys(acls_from_document(json.loads(text))))
        except json.JSONDecodeError as e:
            raise AclFileError(str(path), [AclFileProblem(e.lineno, "", f"invalid JSON: {e.msg}")]) from e
        except InvalidAclError as e:
            raise AclFileError(str(path), [AclFileProblem(0, "", str(e))]) from e
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str = "<acls>") -> list[AclBinding]:
    """:raises AclFileError: see ``load_acl_file``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        alias = "alias" in str(e.problem) or "alphabetic or numeric" in str(e.problem)
        hint = " (quote '*' as \"*\": a bare * starts a YAML alias)" if alias else ""
        raise AclFileError(
            source, [AclFileProblem(mark.line + 1 if mark else 0, "", f"YAML syntax error: {e.problem}{hint}")]
        ) from e
    except yaml.YAMLError as e:
        raise AclFileError(source, [AclFileProblem(0, "", f"YAML error: {e}")]) from e
    reader = _Reader()
    bindings = reader.document(root)
    if reader.problems:
        raise AclFileError(source, reader.problems)
    return list(dict.fromkeys(bindings))


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


class _Reader:
    """Walks the composed node tree (not the constructed values) so that every problem keeps its line."""

    def __init__(self) -> None:
        self.problems: list[AclFileProblem] = []

    def problem(self, node: yaml.Node, path: str, message: str) -> None:
        self.problems.append(AclFileProblem(_line(node), path, message))

    def mapping(self, node: yaml.Node, path: str, allowed: set[str] | None = None) -> dict[str, yaml.Node] | None:
        if not isinstance(node, yaml.MappingNode):
            self.problem(node, path, "expected a mapping (key: value lines)")
            return None
        out: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None:
                self.problem(key_node, path, "keys must be plain strings")
            elif key in out:
                self.problem(key_node, f"{path}.{key}" if path else key, "duplicate key")
            elif allowed is not None and key not in allowed:
                self.problem(
                    key_node, f"{path}.{key}" if path else key, f"unknown key; expected {', '.join(sorted(allowed))}"
                )
            else:
                out[key] = value_node
        return out

    def string(self, node: yaml.Node, path: str) -> str | None:
        if not isinstance(node, yaml.ScalarNode):
            self.problem(node, path, "expected a single value")
            return None
        if node.value == "":
            self.problem(node, path, "must not be empty")
            return None
        return str(node.value)

    def strings(self, node: yaml.Node, path: str) -> list[str]:
        """A value or a list of values."""
        if isinstance(node, yaml.SequenceNode):
            values = [self.string(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
            if not node.value:
                self.problem(node, path, "must not be an empty list")
            return [v for v in values if v is not None]
        value = self.string(node, path)
        return [] if value is None else [value]

    def boolean(self, node: yaml.Node, path: str) -> bool:
        if isinstance(node, yaml.ScalarNode) and node.value.lower() in ("true", "yes", "on", "false", "no", "off"):
            return node.value.lower() in ("true", "yes", "on")
        self.problem(node, path, "expected true or false")
        return False

    def choice(
        self, node: yaml.Node | None, path: str, choices: dict[str, PatternType | AclPermissionType], default: str
    ) -> PatternType | AclPermissionType | None:
        text = default if node is None else self.string(node, path)
        if text is None:
            return None
        found = choices.get(text.lower())
        if found is None and node is not None:
            self.problem(node, path, f"{text!r} is not one of {', '.join(choices)}")
        return found

    # ---------------------------------------------------------------------------------------------- the document

    def document(self, root: yaml.Node | None) -> list[AclBinding]:
        if root is None:
            return []
        top = self.mapping(root, "", {"principals", "version"})
        if top is None:
            return []
        version = top.get("version")
        if version is not None and self.string(version, "version") not in ("1", None):
            self.problem(version, "version", "only version 1 is known")
        principals = top.get("principals")
        if principals is None:
            self.problem(root, "", "missing key: principals")
            return []
        sections = self.mapping(principals, "principals") or {}
        bindings: list[AclBinding] = []
        for principal, node in sections.items():
            path = f"principals.{principal}"
            reason = principal_error(principal)
            if reason is not None:
                self.problem(node, path, reason)
                continue
            if isinstance(node, yaml.ScalarNode) and node.value == "":
                continue  # a principal with no ACLs (the empty mapping written as nothing)
            section = self.mapping(node, path, {"acls", "consumer", "producer"})
            if section is None:
                continue
            if "acls" in section:
                bindings += self.entries(principal, section["acls"], f"{path}.acls")
            for kind in ("consumer", "producer"):
                if kind in section:
                    bindings += self.shorthands(principal, kind, section[kind], f"{path}.{kind}")
        return bindings

    def entries(self, principal: str, node: yaml.Node, path: str) -> list[AclBinding]:
        if not isinstance(node, yaml.SequenceNode):
            self.problem(node, path, "expected a list of ACL entries (- topic: ...)")
            return []
        out: list[AclBinding] = []
        for i, item in enumerate(node.value):
            out += self.entry(principal, item, f"{path}[{i}]")
        return out

    def entry(self, principal: str, node: yaml.Node, path: str) -> list[AclBinding]:
        fields = self.mapping(node, path, _ENTRY_KEYS)
        if fields is None:
            return []
        resources = [key for key in RESOURCE_KEYS if key in fields]
        if len(resources) != 1:
            self.problem(node, path, f"name exactly one resource: {', '.join(RESOURCE_KEYS)}")
            return []
        key = resources[0]
        name = self.string(fields[key], f"{path}.{key}")
        pattern = self.choice(fields.get("pattern"), f"{path}.pattern", _PATTERNS, "literal")
        permission = self.choice(fields.get("permission"), f"{path}.permission", _PERMISSIONS, "allow")
        if "operations" in fields and "operation" in fields:
            self.problem(node, path, "give operations or operation, not both")
            return []
        op_key = "operations" if "operations" in fields else "operation"
        if op_key not in fields:
            self.problem(node, path, "missing key: operations")
            return []
        operations = self.operations(fields[op_key], f"{path}.{op_key}")
        hosts = self.hosts(fields, path)
        if name is None or not isinstance(pattern, PatternType) or not isinstance(permission, AclPermissionType):
            return []
        return self.build(principal, RESOURCE_KEYS[key], name, pattern, operations, permission, hosts, node, path)

    def operations(self, node: yaml.Node, path: str) -> list[AclOperation]:
        """Any concrete operation on any resource type: Kafka stores e.g. WRITE on a group (it never matches
        anything), and an export must read back exactly what the cluster holds."""
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        out: list[AclOperation] = []
        for i, item in enumerate(items):
            item_path = f"{path}[{i}]" if isinstance(node, yaml.SequenceNode) else path
            text = self.string(item, item_path)
            if text is None:
                continue
            try:
                operation = AclOperation.from_string(text)
            except InvalidNameError as e:
                self.problem(item, item_path, str(e))
                continue
            if operation in (_O.ANY, _O.UNKNOWN):
                self.problem(item, item_path, f"{operation} is for filters; name an operation an ACL can hold")
                continue
            out.append(operation)
        if isinstance(node, yaml.SequenceNode) and not node.value:
            self.problem(node, path, "must not be an empty list")
        return out

    def hosts(self, fields: dict[str, yaml.Node], path: str) -> list[str]:
        if "hosts" in fields and "host" in fields:
            self.problem(fields["host"], path, "give hosts or host, not both")
        for key in ("hosts", "host"):
            if key in fields:
                return self.strings(fields[key], f"{path}.{key}")
        return [WILDCARD_HOST]

    def shorthands(self, principal: str, kind: str, node: yaml.Node, path: str) -> list[AclBinding]:
        blocks = list(enumerate(node.value)) if isinstance(node, yaml.SequenceNode) else [(None, node)]
        out: list[AclBinding] = []
        for i, block in blocks:
            block_path = path if i is None else f"{path}[{i}]"
            fields = self.mapping(block, block_path, _SHORTHAND_KEYS[kind])
            if fields is None:
                continue
            pattern = self.choice(fields.get("pattern"), f"{block_path}.pattern", _PATTERNS, "literal")
            hosts = self.hosts(fields, block_path)
            if not isinstance(pattern, PatternType):
                continue
            grants: list[tuple[ResourceType, str, tuple[AclOperation, ...]]] = []
            if kind == "consumer":
                grants += [
                    (ResourceType.TOPIC, "topics", (_O.READ, _O.DESCRIBE)),
                    (ResourceType.GROUP, "groups", (_O.READ,)),
                ]
            else:
                grants += [
                    (ResourceType.TOPIC, "topics", (_O.WRITE, _O.DESCRIBE, _O.CREATE)),
                    (ResourceType.TRANSACTIONAL_ID, "transactional_ids", (_O.WRITE, _O.DESCRIBE)),
                ]
            named = [key for _, key, _ in grants if key in fields]
            if not named:
                self.problem(block, block_path, f"name at least one of {', '.join(key for _, key, _ in grants)}")
                continue
            for resource_type, key, operations in grants:
                for j, name in enumerate(self.strings(fields[key], f"{block_path}.{key}") if key in fields else []):
                    item_path = f"{block_path}.{key}[{j}]"
                    out += self.build(
                        principal,
                        resource_type,
                        name,
                        pattern,
                        list(operations),
                        AclPermissionType.ALLOW,
                        hosts,
                        fields[key],
                        item_path,
                    )
            if "idempotent" in fields and self.boolean(fields["idempotent"], f"{block_path}.idempotent"):
                out += self.build(
                    principal,
                    ResourceType.CLUSTER,
                    CLUSTER_NAME,
                    PatternType.LITERAL,
                    [_O.IDEMPOTENT_WRITE],
                    AclPermissionType.ALLOW,
                    hosts,
                    fields["idempotent"],
                    f"{block_path}.idempotent",
                )
        return out

    def build(
        self,
        principal: str,
        resource_type: ResourceType,
        name: str,
        pattern_type: PatternType,
        operations: list[AclOperation],
        permission: AclPermissionType,
        hosts: list[str],
        node: yaml.Node,
        path: str,
    ) -> list[AclBinding]:
        out: list[AclBinding] = []
        for operation in operations:
            for host in hosts:
                binding = AclBinding(
                    ResourcePattern(resource_type, name, pattern_type),
                    AccessControlEntry(principal, host, operation, permission),
                )
                reason = validate_new_binding(binding)
                if reason is not None:
                    self.problem(node, path, reason)
                    return []
                out.append(binding)
        return out


_PATTERNS: dict[str, PatternType | AclPermissionType] = {
    "literal": PatternType.LITERAL,
    "prefixed": PatternType.PREFIXED,
}
_PERMISSIONS: dict[str, PatternType | AclPermissionType] = {
    "allow": AclPermissionType.ALLOW,
    "deny": AclPermissionType.DENY,
}


# -------------------------------------------------------------------------------------------------- writing


def dump_yaml(bindings: Iterable[AclBinding]) -> str:
    """The YAML file for ``bindings``: per principal, one entry per (resource, pattern, permission) and host set,
    operations merged. Parsing the result gives back exactly the same set of bindings."""
    by_host: dict[tuple[str, ResourceType, str, PatternType, AclPermissionType, str], set[AclOperation]] = {}
    for b in set(bindings):
        key = (
            b.entry.principal,
            b.pattern.resource_type,
            b.pattern.name,
            b.pattern.pattern_type,
            b.entry.permission_type,
            b.entry.host,
        )
        by_host.setdefault(key, set()).add(b.entry.operation)
    by_operations: dict[
        tuple[str, ResourceType, str, PatternType, AclPermissionType, frozenset[AclOperation]], list[str]
    ] = {}
    for (principal, rtype, name, ptype, permission, host), ops in by_host.items():
        by_operations.setdefault((principal, rtype, name, ptype, permission, frozenset(ops)), []).append(host)
    principals: dict[str, list[dict[str, object]]] = {}
    for merged in sorted(
        by_operations, key=lambda k: (k[0], k[1].code, k[2], k[3].code, k[4].code, sorted(o.code for o in k[5]))
    ):
        principal, rtype, name, ptype, permission, operations = merged
        entry: dict[str, object] = {_KEY_OF[rtype]: name}
        if ptype is not PatternType.LITERAL:
            entry["pattern"] = ptype.name.lower()
        entry["operations"] = [op.name for op in sorted(operations, key=lambda o: o.code)]
        if permission is not AclPermissionType.ALLOW:
            entry["permission"] = permission.name.lower()
        hosts = sorted(by_operations[merged])
        if hosts != [WILDCARD_HOST]:
            entry["hosts"] = hosts
        principals.setdefault(principal, []).append(entry)
    document = {"principals": {p: {"acls": entries} for p, entries in sorted(principals.items())}}
    header = "# kafkaguard ACLs: `kafkaguard plan -f FILE` shows the changes, `kafkaguard apply -f FILE` makes them.\n"
    body: str = yaml.safe_dump(document, sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)
    return header + body
