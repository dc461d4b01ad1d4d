"""The REST API's request and response bodies (pydantic), and their conversions to and from the model.

Enum fields take Kafka's names in upper case (``TOPIC``, ``TRANSACTIONAL_ID``) or PascalCase (``Topic``,
``TransactionalId``), through the model's ``from_string``; a name that is not one of them (``"denie"``) is a 422
whose message names the field and lists the accepted names. A value that exists but does not fit the place
(``"MATCH"`` as an ACL's pattern type, ``"ANY"`` as an operation to authorize) is a 422 too: nothing is ever
silently turned into something else. Responses always use the upper-case names.

Strings must be valid Unicode text (no lone surrogates): JSON can carry ``"\\ud800"``, which no store could keep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, SecretStr
from pydantic import WithJsonSchema as _WithJsonSchema
from pydantic_core import PydanticCustomError

from kafkaguard.authorizer import Decision, DefaultRule, MatchingAclRule, SuperUserRule
from kafkaguard.errors import InvalidNameError
from kafkaguard.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    HistoryQuery,
    KafkaEnum,
    ManagementEvent,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StoredAcl,
    principal_error,
)
from kafkaguard.model.acl_json import binding_to_dict
from kafkaguard.scram import DEFAULT_ITERATIONS

_E = TypeVar("_E", bound=KafkaEnum)

#: The longest string field accepted (names, principals, hosts); the body limit bounds the rest.
MAX_TEXT = 4096


def _valid_text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("invalid_text", "must be valid Unicode text (no lone surrogates)") from None
    return value


def _valid_secret(value: SecretStr) -> SecretStr:
    _valid_text(value.get_secret_value())
    return value


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_valid_text)]


def _names(members: Iterable[KafkaEnum]) -> list[str]:
    return [m.name for m in members]


def _enum_type(cls: type[_E], allowed: tuple[_E, ...], place: str) -> tuple[Callable[[object], _E], dict[str, Any]]:
    """A validator accepting ``allowed`` members by any of Kafka's names, and its JSON schema."""
    upper = _names(allowed)
    expected = ", ".join(upper)

    def parse(value: object) -> _E:
        if isinstance(value, cls) and value in allowed:
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("kafka_name", "expected a string, one of {expected}", {"expected": expected})
        try:
            member = cls.from_string(value)
        except InvalidNameError:
            raise PydanticCustomError(
                "kafka_name",
                "{value} is not a valid {kind} name; expected one of {expected}",
                {"value": repr(value), "kind": cls.__name__, "expected": expected},
            ) from None
        if member not in allowed:
            raise PydanticCustomError(
                "kafka_name",
                "{value} cannot be used {place}; expected one of {expected}",
                {"value": repr(value), "place": place, "expected": expected},
            )
        return member

    pascal = [m.pascal_name for m in allowed if m.pascal_name != m.name]
    schema: dict[str, Any] = {
        "type": "string",
        "enum": upper + pascal,
        "description": f"Kafka's name ({', '.join(upper)}); PascalCase is accepted on input.",
    }
    return parse, schema


def _name(member: KafkaEnum) -> str:
    return member.name


_RT, _PT, _OP, _PERM = ResourceType, PatternType, AclOperation, AclPermissionType
_CONCRETE_TYPES = tuple(t for t in _RT if t not in (_RT.ANY, _RT.UNKNOWN))
_CONCRETE_OPERATIONS = tuple(o for o in _OP if o not in (_OP.ANY, _OP.UNKNOWN))

_rt_acl, _rt_acl_schema = _enum_type(_RT, _CONCRETE_TYPES, "in an ACL")
_rt_filter, _rt_filter_schema = _enum_type(_RT, tuple(t for t in _RT if t is not _RT.UNKNOWN), "in a filter")
_pt_acl, _pt_acl_schema = _enum_type(_PT, (_PT.LITERAL, _PT.PREFIXED), "in an ACL (ANY and MATCH are for filters)")
_pt_filter, _pt_filter_schema = _enum_type(_PT, (_PT.ANY, _PT.MATCH, _PT.LITERAL, _PT.PREFIXED), "in a filter")
_op_acl, _op_acl_schema = _enum_type(_OP, _CONCRETE_OPERATIONS, "here (ANY is for filters)")
_op_filter, _op_filter_schema = _enum_type(_OP, tuple(o for o in _OP if o is not _OP.UNKNOWN), "in a filter")
_perm_acl, _perm_acl_schema = _enum_type(_PERM, (_PERM.DENY, _PERM.ALLOW), "in an ACL (ANY is for filters)")
_perm_filter, _perm_filter_schema = _enum_type(_PERM, (_PERM.ANY, _PERM.DENY, _PERM.ALLOW), "in a filter")

_OUT = PlainSerializer(_name, return_type=str)

ResourceTypeName = Annotated[ResourceType, PlainValidator(_rt_acl), _OUT, _WithJsonSchema(_rt_acl_schema)]
ResourceTypeFilterName = Annotated[ResourceType, PlainValidator(_rt_filter), _OUT, _WithJsonSchema(_rt_filter_schema)]
PatternTypeName = Annotated[PatternType, PlainValidator(_pt_acl), _OUT, _WithJsonSchema(_pt_acl_schema)]
PatternTypeFilterName = Annotated[PatternType, PlainValidator(_pt_filter), _OUT, _WithJsonSchema(_pt_filter_schema)]
OperationName = Annotated[AclOperation, PlainValidator(_op_acl), _OUT, _WithJsonSchema(_op_acl_schema)]
OperationFilterName = Annotated[AclOperation, PlainValidator(_op_filter), _OUT, _WithJsonSchema(_op_filter_schema)]
PermissionName = Annotated[AclPermissionType, PlainValidator(_perm_acl), _OUT, _WithJsonSchema(_perm_acl_schema)]
PermissionFilterName = Annotated[
    AclPermissionType, PlainValidator(_perm_filter), _OUT, _WithJsonSchema(_perm_filter_schema)
]


def _valid_principal(value: str) -> str:
    problem = principal_error(value)
    if problem is not None:
        raise PydanticCustomError("principal", "{problem}", {"problem": problem})
    return value


Principal = Annotated[Text, AfterValidator(_valid_principal), Field(examples=["User:alice"])]

# ------------------------------------------------------------------------------------------------------ ACLs


class AclBindingIn(BaseModel):
    """One ACL to create. ``pattern_type`` defaults to LITERAL and ``host`` to ``*`` (as kafka-acls does);
    ``permission_type`` must be given. An ``id`` (as exports carry) is ignored."""

    model_config = ConfigDict(extra="forbid")

    principal: Text = Field(examples=["User:alice"])
    host: Text = "*"
    resource_type: ResourceTypeName
    resource_name: Text = Field(examples=["orders"])
    pattern_type: PatternTypeName = PatternType.LITERAL
    operation: OperationName
    permission_type: PermissionName
    id: Text | None = Field(None, description="Ignored on input (exports carry it).")

    def to_binding(self) -> AclBinding:
        return AclBinding(
            ResourcePattern(self.resource_type, self.resource_name, self.pattern_type),
            AccessControlEntry(self.principal, self.host, self.operation, self.permission_type),
        )


class AclFilterIn(BaseModel):
    """A binding filter with Kafka's semantics (SEMANTICS.md §6). Every field is optional: an omitted name,
    principal or host matches any; an omitted enum field is ANY. With a name, pattern_type ANY matches LITERAL and
    PREFIXED ACLs with exactly that name, MATCH every ACL that applies to a resource of that name (the literal,
    the ``*`` wildcard and every matching prefix)."""

    model_config = ConfigDict(extra="forbid")

    resource_type: ResourceTypeFilterName = ResourceType.ANY
    resource_name: Text | None = None
    pattern_type: PatternTypeFilterName = PatternType.ANY
    principal: Text | None = None
    host: Text | None = None
    operation: OperationFilterName = AclOperation.ANY
    permission_type: PermissionFilterName = AclPermissionType.ANY

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(
            ResourcePatternFilter(self.resource_type, self.resource_name, self.pattern_type),
            AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type),
        )


class AclOut(BaseModel):
    id: str | None = Field(description="The stored ACL's id (null for a binding that was not stored).")
    principal: str
    host: str
    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission_type: str

    @classmethod
    def of(cls, binding: AclBinding, acl_id: str | None = None) -> AclOut:
        """The binding's fields as the JSON export writes them (``model.acl_json``), and its id (or null)."""
        return cls(id=acl_id, **binding_to_dict(binding))

    @classmethod
    def stored(cls, acl: StoredAcl) -> AclOut:
        return cls.of(acl.binding, acl.id)


class AclListOut(BaseModel):
    acls: list[AclOut]
    count: int


class AclCreateResultOut(BaseModel):
    ok: bool
    acl: AclOut
    error: str | None = Field(description="Why this binding was refused (Kafka's INVALID_REQUEST message).")


class AclCreateOut(BaseModel):
    """One result per binding, in order; a refused binding does not affect the others (SEMANTICS.md §8)."""

    results: list[AclCreateResultOut]
    created: int
    failed: int


class AclDeleteOut(BaseModel):
    deleted: list[AclOut]
    count: int


# ------------------------------------------------------------------------------------------------------ users

MechanismName = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]


class CredentialOut(BaseModel):
    mechanism: MechanismName
    iterations: int


class UserOut(BaseModel):
    """A user's SCRAM credentials: mechanism and iterations only (salts and keys never leave the store)."""

    name: str
    credentials: list[CredentialOut]


class UserListOut(BaseModel):
    users: list[UserOut]
    count: int


class PasswordIn(BaseModel):
    """Set a password: the server salts it and derives the SCRAM keys; the password itself is never stored."""

    model_config = ConfigDict(extra="forbid")

    mechanism: MechanismName = "SCRAM-SHA-256"
    iterations: int = Field(DEFAULT_ITERATIONS, ge=4096, le=16384)
    password: Annotated[SecretStr, Field(min_length=1, max_length=1024), AfterValidator(_valid_secret)]


class UserDeletedOut(BaseModel):
    name: str
    deleted: list[MechanismName]


# -------------------------------------------------------------------------------------------------- authorize


class AuthorizeIn(BaseModel):
    """The question "may this principal, from this host, do this operation on this resource?"."""

    model_config = ConfigDict(extra="forbid")

    principal: Principal
    host: Text = Field(examples=["10.0.0.7"], description="The client's IP address as Kafka sees it.")
    operation: OperationName
    resource_type: ResourceTypeName
    resource_name: Text = Field(examples=["orders"])


class MatchingAclOut(AclOut):
    decisive: bool = Field(description="This ACL is the deciding rule.")


class RuleOut(BaseModel):
    kind: Literal["SuperUser", "DefaultAllow", "DefaultDeny", "MatchingAcl"]
    text: str = Field(description="The rule as Kafka's audit log prints it.")
    acl: AclOut | None = None


class AuthorizeOut(BaseModel):
    decision: Literal["ALLOWED", "DENIED"]
    rule: RuleOut
    matching_acls: list[MatchingAclOut] = Field(
        description="Every ACL that matches the principal, host, operation and resource (ALLOW and DENY), most "
        "specific first."
    )
    relevant_acl_count: int = Field(description="ACLs on the resource for anyone (0: the default rule decides).")
    explanation: str

    @classmethod
    def of(cls, decision: Decision) -> AuthorizeOut:
        rule = decision.rule
        decisive_id = rule.acl.id if isinstance(rule, MatchingAclRule) else None
        kind: Literal["SuperUser", "DefaultAllow", "DefaultDeny", "MatchingAcl"]
        if isinstance(rule, SuperUserRule):
            kind = "SuperUser"
        elif isinstance(rule, DefaultRule):
            kind = "DefaultAllow" if decision.allowed else "DefaultDeny"
        else:
            kind = "MatchingAcl"
        return cls(
            decision="ALLOWED" if decision.allowed else "DENIED",
            rule=RuleOut(
                kind=kind,
                text=str(rule),
                acl=AclOut.stored(rule.acl) if isinstance(rule, MatchingAclRule) else None,
            ),
            matching_acls=[
                MatchingAclOut(**AclOut.stored(acl).model_dump(), decisive=acl.id == decisive_id)
                for acl in decision.matching_acls
            ],
            relevant_acl_count=decision.relevant_acl_count,
            explanation=decision.explanation(),
        )


# ------------------------------------------------------------------------------------------------------ other


class ErrorOut(BaseModel):
    detail: str


class HealthOut(BaseModel):
    status: Literal["ok", "degraded", "draining"] = Field(
        description="draining (HTTP 503): the node is shutting down; its open connections finish, send it nothing new."
    )
    store: Literal["ok", "unreachable"] = Field(
        description="unreachable: the store does not answer (while draining: its last known state, not asked again)."
    )
    acls: int
    enforcement: Literal["enforcing", "permissive"] = Field(
        "enforcing",
        description="permissive: a proxy in this process forwards what its ACLs deny (audited as would-be denials).",
    )
    shadow_acls: int | None = Field(
        None, description="ACLs of the shadow (candidate) set decided beside the active one; null when none."
    )


# ------------------------------------------------------------------------------------------- principal groups


class GroupOut(BaseModel):
    """A principal group: ``Group:<name>`` in an ACL applies to every member."""

    name: str = Field(description="The group's name; ACLs name it as Group:<name>.")
    principal: str = Field(description="Group:<name>")
    members: list[str]


class GroupListOut(BaseModel):
    groups: list[GroupOut]
    count: int


class MembersIn(BaseModel):
    """Principals to add to a group."""

    model_config = ConfigDict(extra="forbid")

    members: list[Principal] = Field(min_length=1, max_length=1000, examples=[["User:alice", "User:bob"]])


# ------------------------------------------------------------------------------------------- who can do what


class PatternAccessOut(BaseModel):
    resource_type: str
    resource_name: str
    pattern_type: str
    allows: list[str] = Field(description="Operations some matching ALLOW grants (implications included).")
    denies: list[str] = Field(description="Operations some matching DENY denies.")
    acls: list[AclOut]


class DecidedOut(BaseModel):
    resource_type: str
    resource_name: str
    allowed: list[str] = Field(description="Operations the authorizer decides ALLOWED.")
    denied: list[str] = Field(description="Operations the authorizer decides DENIED.")


class PrincipalAccessOut(BaseModel):
    """What one principal can do: the patterns its ACLs (its own, User:*'s, its groups') name, and each topic of
    the catalog they reach, decided."""

    principal: str
    host: str | None
    super_user: bool
    groups: list[str]
    patterns: list[PatternAccessOut]
    topics: list[DecidedOut]


class HolderOut(BaseModel):
    principal: str = Field(description="A principal, or User:* for any principal without ACLs of its own.")
    host: str
    via: list[str] = Field(description="The ACL principals that reach it: itself, User:*, its groups.")
    allowed: list[str]
    denied: list[str]
    acls: list[AclOut]


class ResourceHoldersOut(BaseModel):
    """Who can act on one resource: super users, and every principal and host the relevant ACLs name."""

    resource_type: str
    resource_name: str
    super_users: list[str]
    holders: list[HolderOut]


# ------------------------------------------------------------------------------------- management history


class HistoryFilterIn(BaseModel):
    """Which management events to list (``GET /api/history``), newest first."""

    model_config = ConfigDict(extra="forbid")

    principal: Text | None = Field(
        None, description="The principal concerned (the ACL's, the SCRAM user, the member) or the actor."
    )
    resource_type: Text | None = Field(None, description="TOPIC, GROUP, CLUSTER ... (ACLs and topics).")
    resource: Text | None = Field(None, description="The resource name (an ACL's or a topic's).")
    action: Text | None = Field(None, description="An action or its prefix: acl., acl.created, scram. ...")
    since: datetime | None = Field(None, description="Only events at or after this time (ISO 8601; UTC if no offset).")
    limit: int = Field(100, ge=1, le=1000, description="At most this many events (the newest).")

    def to_query(self) -> HistoryQuery:
        since = self.since
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return HistoryQuery(
            principal=self.principal,
            resource_type=self.resource_type.upper() if self.resource_type else None,
            resource_name=self.resource,
            action=self.action,
            since=since,
            limit=self.limit,
        )


class ActorOut(BaseModel):
    principal: str
    address: str | None = Field(
        description="The client's address; local for a CLI command that wrote the store itself (users, groups, "
        "store migrate); null for kafkaguard's own changes (the bootstrap admin)."
    )
    interface: str = Field(
        description="kafka:<listener>, rest, cli, migrate, internal (the door the change came through)."
    )
    request_id: str | None = Field(description="The request's id in that interface (Kafka: client id/correlation id).")


class HistoryEventOut(BaseModel):
    """One management event: an item of one change (never a secret: SCRAM events carry mechanism and iterations)."""

    seq: int
    time: datetime
    action: str = Field(examples=["acl.created"])
    actor: ActorOut
    subject: str = Field(examples=["TOPIC:LITERAL:pii-orders"])
    principal: str | None
    resource_type: str | None
    resource_name: str | None
    result: str = Field(description="SUCCESS, or Kafka's error name for a refused item.")
    error_message: str | None
    data: dict[str, Any] = Field(description="The event's data as the audit trail carries it (schema version 1).")

    @classmethod
    def of(cls, event: ManagementEvent) -> HistoryEventOut:
        actor = event.actor
        return cls(
            seq=event.seq or 0,
            time=event.time,
            action=event.action,
            actor=ActorOut(
                principal=actor.principal,
                address=actor.address,
                interface=actor.interface,
                request_id=actor.request_id,
            ),
            subject=event.subject,
            principal=event.principal,
            resource_type=event.resource_type,
            resource_name=event.resource_name,
            result=event.result,
            error_message=event.error_message,
            data=event.data(),
        )


class HistoryOut(BaseModel):
    events: list[HistoryEventOut]
    count: int


# -------------------------------------------------------------------------------------------------- denials


class DenialsFilterIn(BaseModel):
    """Which recent decisions of the audit log to list (``GET /api/denials``), newest first."""

    model_config = ConfigDict(extra="forbid")

    principal: Text | None = Field(None, description="Only this principal's, e.g. User:alice (exact).")
    limit: int = Field(100, ge=1, le=500, description="At most this many decisions (the newest).")


class DenialOut(BaseModel):
    """One decision of the audit log: a denial, a permissive proxy's would-be denial, a shadow flip, or the
    broker's refusal of what kafkaguard allowed (passthrough)."""

    kind: Literal["denied", "permissive", "shadow", "broker"] = Field(
        description="denied: the client was refused; permissive: DENIED but forwarded (not enforced); shadow: the "
        "candidate ACL set (shadow_acls) would decide it the other way; broker: kafkaguard allowed it and the broker "
        "refused it (upstream_authentication passthrough: both must allow)."
    )
    time: str = Field(
        description="When its first request was made (ISO 8601 UTC).", examples=["2026-01-01T09:26:53.104Z"]
    )
    last_time: str = Field(description="When its last request was made (time, when it stands for one).")
    count: int = Field(description="How many requests it stands for (identical denials are collapsed).")
    principal: str
    host: str
    api: str | None = Field(description="Kafka's request name (Metadata, Produce ...), null when unknown.")
    operation: str
    resource_type: str
    resource_name: str
    decision: str = Field(description="The active ACLs' decision (for a shadow flip: what the client got).")
    rule: str | None = Field(description="The deciding rule, as the audit log wrote it.")
    shadow_decision: str | None = Field(description="A shadow flip's: the candidate set's decision.")
    shadow_rule: str | None = Field(description="A shadow flip's: the candidate set's deciding rule.")
    broker_error: str | None = Field(
        None, description="A broker refusal's: the error the broker answered, e.g. TOPIC_AUTHORIZATION_FAILED."
    )
    explanation: str | None = Field(None, description="A broker refusal's: which side refused, in a sentence.")


class DenialsOut(BaseModel):
    configured: bool = Field(description="False: this node writes no audit_log file, so there is nothing to list.")
    message: str | None = Field(description="Why the list is empty or partial, in a sentence; null when all is well.")
    denials: list[DenialOut]
    count: int
    read_bytes: int = Field(description="How many bytes of the log's end were read.")
    complete: bool = Field(description="True when the whole log was read (nothing older is left out).")
