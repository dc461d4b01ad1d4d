"""The ACL set as JSON: the one format of the store's export/import, the REST API and the audit pipeline.

::

    {"acls": [{"principal": "User:alice", "host": "*", "resource_type": "TOPIC", "resource_name": "orders",
               "pattern_type": "LITERAL", "operation": "READ", "permission_type": "ALLOW"}, ...]}

Output uses Kafka's upper-case names; input also accepts PascalCase (``Topic``, ``DescribeConfigs``). An ``id``
key is written when known and ignored on input. Parsing checks every entry and reports every bad one with its
position and reason, so that an import can refuse the whole file and say exactly what to fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kafkaguard.errors import InvalidAclError, InvalidNameError
from kafkaguard.model.binding import AclBinding, AclBindingFilter, StoredAcl, validate_new_binding
from kafkaguard.model.entry import AccessControlEntry
from kafkaguard.model.enums import AclOperation, AclPermissionType, KafkaEnum, PatternType, ResourceType
from kafkaguard.model.resource import ResourcePattern

_E = TypeVar("_E", bound=KafkaEnum)

FIELDS = ("principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission_type")


@dataclass(frozen=True, slots=True)
class AclJsonProblem:
    """One bad entry: its 0-based position in ``acls`` and what is wrong with it."""

    position: int
    reason: str

    def __str__(self) -> str:
        return f"acls[{self.position}]: {self.reason}"


class AclJsonError(InvalidAclError):
    """An ACL document with bad entries; ``problems`` lists every one of them."""

    def __init__(self, problems: Iterable[AclJsonProblem]) -> None:
        self.problems = tuple(problems)
        shown = "; ".join(str(p) for p in self.problems[:20])
        more = f" (and {len(self.problems) - 20} more)" if len(self.problems) > 20 else ""
        super().__init__(f"{len(self.problems)} invalid ACL(s): {shown}{more}")


def binding_to_dict(binding: AclBinding, acl_id: str | None = None) -> dict[str, str]:
    pattern, entry = binding.pattern, binding.entry
    out = {"id": acl_id} if acl_id is not None else {}
    out.update(
        principal=entry.principal,
        host=entry.host,
        resource_type=pattern.resource_type.name,
        resource_name=pattern.name,
        pattern_type=pattern.pattern_type.name,
        operation=entry.operation.name,
        permission_type=entry.permission_type.name,
    )
    return out


def filter_to_dict(acl_filter: AclBindingFilter) -> dict[str, str | None]:
    """A binding filter with ``binding_to_dict``'s keys: None where it matches any name, principal or host, ``ANY``
    (or ``MATCH``) as its enum fields say."""
    pattern, entry = acl_filter.pattern_filter, acl_filter.entry_filter
    return {
        "principal": entry.principal,
        "host": entry.host,
        "resource_type": pattern.resource_type.name,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "operation": entry.operation.name,
        "permission_type": entry.permission_type.name,
    }


def acls_to_document(acls: Iterable[AclBinding | StoredAcl]) -> dict[str, list[dict[str, str]]]:
    """The JSON document (a plain dict, ready for ``json.dumps``) for bindings or stored ACLs."""
    rows = []
    for acl in acls:
        if isinstance(acl, StoredAcl):
            rows.append(binding_to_dict(acl.binding, acl.id))
        else:
            rows.append(binding_to_dict(acl))
    return {"acls": rows}


def binding_from_dict(row: object) -> AclBinding:
    """One entry → a binding valid for creation; ``row`` is anything a parser gave (this checks its shape).

    :raises InvalidAclError: with a message naming the field and the accepted values.
    """
    if not isinstance(row, Mapping):
        raise InvalidAclError(f"expected an object with the fields {', '.join(FIELDS)}, got {type(row).__name__}")
    missing = [name for name in FIELDS if name not in row]
    if missing:
        raise InvalidAclError(f"missing field(s): {', '.join(missing)}")
    for name in FIELDS:
        if not isinstance(row[name], str):
            raise InvalidAclError(f"{name} must be a string, got {type(row[name]).__name__}")
    extra = sorted(set(row) - set(FIELDS) - {"id"})
    if extra:
        raise InvalidAclError(f"unknown field(s): {', '.join(extra)}; expected {', '.join(FIELDS)}")
    resource_type = _enum(ResourceType, row["resource_type"], "resource_type", filter_only=(ResourceType.ANY,))
    pattern_type = _enum(
        PatternType, row["pattern_type"], "pattern_type", filter_only=(PatternType.ANY, PatternType.MATCH)
    )
    operation = _enum(AclOperation, row["operation"], "operation", filter_only=(AclOperation.ANY,))
    permission = _enum(
        AclPermissionType, row["permission_type"], "permission_type", filter_only=(AclPermissionType.ANY,)
    )
    binding = AclBinding(
        ResourcePattern(resource_type, row["resource_name"], pattern_type),
        AccessControlEntry(row["principal"], row["host"], operation, permission),
    )
    reason = validate_new_binding(binding)
    if reason is not None:
        raise InvalidAclError(reason)
    return binding


def acls_from_document(document: object) -> list[AclBinding]:
    """Every binding of a parsed JSON document (whatever ``json.loads`` gave: this checks its shape), in order.

    :raises AclJsonError: the document is not ``{"acls": [...]}`` or any entry is bad (all are reported).
    """
    if not isinstance(document, Mapping) or not isinstance(document.get("acls"), list):
        raise AclJsonError([AclJsonProblem(-1, 'expected a JSON object {"acls": [ ... ]}')])
    bindings: list[AclBinding] = []
    problems: list[AclJsonProblem] = []
    for position, row in enumerate(document["acls"]):
        try:
            bindings.append(binding_from_dict(row))
        except InvalidAclError as e:
            problems.append(AclJsonProblem(position, str(e)))
    if problems:
        raise AclJsonError(problems)
    return bindings


def _enum(cls: type[_E], text: str, field: str, filter_only: tuple[_E, ...]) -> _E:
    try:
        value = cls.from_string(text)
    except InvalidNameError as e:
        raise InvalidAclError(f"{field}: {e}") from e
    if value in filter_only or value.is_unknown:
        allowed = ", ".join(m.name for m in cls if m not in filter_only and not m.is_unknown)
        raise InvalidAclError(f"{field} {text!r} cannot be stored in an ACL; expected one of {allowed}")
    return value
