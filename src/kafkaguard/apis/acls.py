"""DescribeAcls, CreateAcls and DeleteAcls (API keys 29–31), SEMANTICS.md §7–§9 and §16.3.

Authorization: DESCRIBE on the cluster for DescribeAcls, ALTER for the other two; denied requests get
CLUSTER_AUTHORIZATION_FAILED (top level, or on every result). Changes go through the ACL service on a worker thread
(the store commits synchronously), so the event loop never waits on the disk. A refused CreateAcls or DeleteAcls is
recorded in the management history (``service.refused``: an ``acl.created`` event per binding as sent, an
``acl.deleted`` per filter, bounded per request and per principal), and so is a DeleteAcls filter refused for an
unknown code; the answer is the same either way.

Deliberate differences (§16.3): where Kafka closes the connection on the code 0 (UNKNOWN), kafkaguard answers
INVALID_REQUEST naming the field and the code. Codes that are merely unrecognised (a newer client's) are answered
as Kafka 3.9 answers them (measured by tests/kafka/differential): DescribeAcls matches nothing, CreateAcls and
DeleteAcls refuse that binding or filter with INVALID_REQUEST and Kafka's own message. Successful CreateAcls
results and DescribeAcls answers carry the empty message "", as Kafka's do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kio.schema.create_acls.v1.request import AclCreation as AclCreationV1
from kio.schema.create_acls.v2.request import AclCreation as AclCreationV2
from kio.schema.create_acls.v3.request import AclCreation as AclCreationV3
from kio.schema.delete_acls.v1.request import DeleteAclsFilter as DeleteAclsFilterV1
from kio.schema.delete_acls.v2.request import DeleteAclsFilter as DeleteAclsFilterV2
from kio.schema.delete_acls.v3.request import DeleteAclsFilter as DeleteAclsFilterV3

from kafkaguard.apis.acl_encoding import encode_describe_acls
from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.authorizer.results import AclDeleteResult
from kafkaguard.errors import InvalidAclError
from kafkaguard.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ItemError,
    KafkaErrorCode,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StoredAcl,
)
from kafkaguard.model.binding import unsupported_code
from kafkaguard.model.enums import KafkaEnum
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.builders import (
    acl_creation_result,
    create_acls_response,
    delete_acls_filter_result,
    delete_acls_matching_acl,
    delete_acls_response,
    describe_acls_response,
)
from kafkaguard.protocol.codec import PreEncoded, response_schema
from kafkaguard.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkaguard.protocol.scope import RequestScope
from kafkaguard.protocol.wire_errors import error_fields
from kafkaguard.service.events import acl_fields_event, acl_filter_event

#: A filter as the wire carries it: a DescribeAcls request is its own filter, a DeleteAcls request holds several.
WireFilter = DescribeAclsRequest | DeleteAclsFilterV1 | DeleteAclsFilterV2 | DeleteAclsFilterV3
#: One binding of a CreateAcls request, of any version.
WireCreation = AclCreationV1 | AclCreationV2 | AclCreationV3


def not_authorized_message(scope: RequestScope) -> str:
    return f"Request {scope.api_key.api_name} v{scope.api_version} is not authorized."


def _denied(scope: RequestScope) -> ItemError:
    return ItemError(KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED, not_authorized_message(scope))


def _invalid(message: str) -> ItemError:
    return ItemError(KafkaErrorCode.INVALID_REQUEST, message)


#: CreateAcls' success message (Kafka's generated classes default a nullable string to "").
SUCCESS_MESSAGE = ""


def _unknown_codes(**codes: tuple[int, type[KafkaEnum]]) -> str | None:
    """A message naming the first field holding the code 0 (UNKNOWN), where Kafka closes the connection (§16.3)."""
    for field, (code, _enum) in codes.items():
        if code == 0:
            return unsupported_code(field.replace("_", " "))
    return None


def _unrecognised(**codes: tuple[int, type[KafkaEnum]]) -> str | None:
    """The first field whose (non-zero) code this version does not know, or None."""
    for field, (code, enum) in codes.items():
        if enum.from_code(code).is_unknown:
            return field
    return None


def _filter_codes(request: WireFilter) -> dict[str, tuple[int, type[KafkaEnum]]]:
    return {
        "resource_type": (request.resource_type_filter, ResourceType),
        "pattern_type": (request.pattern_type_filter, PatternType),
        "operation": (request.operation, AclOperation),
        "permission_type": (request.permission_type, AclPermissionType),
    }


def _name(enum: type[KafkaEnum], code: int) -> str:
    """A wire code's name for an event: ``TOPIC``, or ``UNKNOWN(42)`` for a code this version does not know."""
    member = enum.from_code(code)
    return f"UNKNOWN({code})" if member.is_unknown else str(member.name)


def creation_fields(creation: WireCreation) -> dict[str, str | None]:
    """A CreateAcls creation's fields as sent, for the event of a refused one (never validated: it was refused)."""
    return {
        "principal": creation.principal,
        "host": creation.host,
        "resource_type": _name(ResourceType, creation.resource_type),
        "resource_name": creation.resource_name,
        "pattern_type": _name(PatternType, creation.resource_pattern_type),
        "operation": _name(AclOperation, creation.operation),
        "permission_type": _name(AclPermissionType, creation.permission_type),
    }


def filter_fields(wire: WireFilter) -> dict[str, str | None]:
    """A DeleteAcls filter's fields as sent (None: any), for the event of a refused one."""
    return {
        "principal": wire.principal_filter,
        "host": wire.host_filter,
        "resource_type": _name(ResourceType, wire.resource_type_filter),
        "resource_name": wire.resource_name_filter,
        "pattern_type": _name(PatternType, wire.pattern_type_filter),
        "operation": _name(AclOperation, wire.operation),
        "permission_type": _name(AclPermissionType, wire.permission_type),
    }


def filter_from_wire(request: WireFilter) -> AclBindingFilter | str:
    """A DescribeAcls/DeleteAcls filter, or the reason it cannot be one: the code 0 named (§16.3), or Kafka's
    DeleteAcls message for an unrecognised code ("Unknown patternFilter." before "Unknown entryFilter.")."""
    codes = _filter_codes(request)
    unknown = _unknown_codes(**codes)
    if unknown is not None:
        return unknown
    unrecognised = _unrecognised(**codes)
    if unrecognised is not None:
        return "Unknown patternFilter." if unrecognised in ("resource_type", "pattern_type") else "Unknown entryFilter."
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(request.resource_type_filter),
            request.resource_name_filter,
            PatternType.from_code(request.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            request.principal_filter,
            request.host_filter,
            AclOperation.from_code(request.operation),
            AclPermissionType.from_code(request.permission_type),
        ),
    )


async def describe_acls(scope: RequestScope, request: DescribeAclsRequest) -> DescribeAclsResponse | PreEncoded:
    cls: type[DescribeAclsResponse] = response_schema(ApiKey.DESCRIBE_ACLS, scope.api_version)
    if not scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_ACLS]).request_allowed:
        return describe_acls_response(
            cls,
            throttle_time=NO_THROTTLE,
            **error_fields(_denied(scope)),
            resources=(),
        )
    unknown = _unknown_codes(**_filter_codes(request))
    if unknown is not None:
        return describe_acls_response(cls, throttle_time=NO_THROTTLE, **error_fields(_invalid(unknown)), resources=())
    if _unrecognised(**_filter_codes(request)) is not None:
        # Kafka reads an unrecognised code as UNKNOWN, which matches no ACL: an empty, successful answer.
        return encode_describe_acls(scope.api_version, [])
    acl_filter = filter_from_wire(request)
    if isinstance(acl_filter, str):  # unreachable: both refusals were answered above
        raise TypeError(acl_filter)
    grouped: dict[ResourcePattern, list[StoredAcl]] = {}
    for acl in scope.snapshot.index.find(acl_filter):  # the request's one snapshot, as its authorization
        grouped.setdefault(acl.binding.pattern, []).append(acl)
    return encode_describe_acls(scope.api_version, list(grouped.items()))


def _binding_from_wire(creation: WireCreation) -> AclBinding | None:
    """A binding, or None when the creation holds a filter-only value (ANY, MATCH): Kafka fails the whole
    request with UNKNOWN_SERVER_ERROR then (SEMANTICS.md §8.1)."""
    try:
        return AclBinding(
            ResourcePattern(
                ResourceType.from_code(creation.resource_type),
                creation.resource_name,
                PatternType.from_code(creation.resource_pattern_type),
            ),
            AccessControlEntry(
                creation.principal,
                creation.host,
                AclOperation.from_code(creation.operation),
                AclPermissionType.from_code(creation.permission_type),
            ),
        )
    except InvalidAclError:
        return None


async def create_acls(scope: RequestScope, request: CreateAclsRequest) -> CreateAclsResponse:
    cls: type[CreateAclsResponse] = response_schema(ApiKey.CREATE_ACLS, scope.api_version)

    def every(error: ItemError) -> CreateAclsResponse:
        results = tuple(acl_creation_result(cls, **error_fields(error)) for _ in request.creations)
        return create_acls_response(cls, throttle_time=NO_THROTTLE, results=results)

    if not scope.authorize(REQUIREMENTS[ApiKey.CREATE_ACLS]).request_allowed:
        denied, actor = _denied(scope), scope.actor()
        creations: Sequence[WireCreation] = request.creations  # one version's tuple: mypy joins the union to object
        await scope.refuse(
            creations,
            lambda creation: acl_fields_event("acl.created", actor, creation_fields(creation), denied),
        )
        return every(denied)
    bindings = [_binding_from_wire(creation) for creation in request.creations]
    valid = [binding for binding in bindings if binding is not None]
    if len(valid) != len(bindings):
        return every(ItemError(KafkaErrorCode.UNKNOWN_SERVER_ERROR))
    # Each binding is validated by the service (``model.validate_new_binding``: Kafka's order and messages, the same
    # as the console's and the CLI's), an invalid one failing alone.
    actor = scope.actor()
    outcomes = await asyncio.to_thread(scope.services.acls.create_acls, valid, actor=actor) if valid else []
    results = tuple(acl_creation_result(cls, **error_fields(o.error, on_success=SUCCESS_MESSAGE)) for o in outcomes)
    return create_acls_response(cls, throttle_time=NO_THROTTLE, results=results)


async def delete_acls(scope: RequestScope, request: DeleteAclsRequest) -> DeleteAclsResponse:
    cls: type[DeleteAclsResponse] = response_schema(ApiKey.DELETE_ACLS, scope.api_version)
    actor = scope.actor()
    filters: Sequence[WireFilter] = request.filters  # one version's tuple: mypy joins the union to object
    if not scope.authorize(REQUIREMENTS[ApiKey.DELETE_ACLS]).request_allowed:
        error = _denied(scope)
        await scope.refuse(
            filters,
            lambda wire: acl_filter_event(actor, filter_fields(wire), error),
        )
        denied = error_fields(error)
        results = tuple(delete_acls_filter_result(cls, **denied, matching_acls=()) for _ in filters)
        return delete_acls_response(cls, throttle_time=NO_THROTTLE, filter_results=results)
    parsed = [filter_from_wire(wire) for wire in filters]
    valid = [acl_filter for acl_filter in parsed if not isinstance(acl_filter, str)]
    invalid: list[tuple[WireFilter, str]] = [
        (wire, reason) for wire, reason in zip(filters, parsed, strict=True) if isinstance(reason, str)
    ]
    if invalid:
        await scope.refuse(
            invalid,
            lambda item: acl_filter_event(actor, filter_fields(item[0]), _invalid(item[1])),
        )
    outcomes = iter(await asyncio.to_thread(scope.services.acls.delete_acls, valid, actor=actor) if valid else [])
    results_out = []
    for acl_filter in parsed:
        outcome = AclDeleteResult(error=_invalid(acl_filter)) if isinstance(acl_filter, str) else next(outcomes)
        if outcome.error is not None:
            results_out.append(delete_acls_filter_result(cls, **error_fields(outcome.error), matching_acls=()))
            continue
        matching = tuple(
            delete_acls_matching_acl(
                cls,
                **error_fields(None),
                resource_type=acl.binding.pattern.resource_type.code,
                resource_name=acl.binding.pattern.name,
                pattern_type=acl.binding.pattern.pattern_type.code,
                principal=acl.binding.entry.principal,
                host=acl.binding.entry.host,
                operation=acl.binding.entry.operation.code,
                permission_type=acl.binding.entry.permission_type.code,
            )
            for acl in outcome.removed_acls
        )
        results_out.append(delete_acls_filter_result(cls, **error_fields(None), matching_acls=matching))
    return delete_acls_response(cls, throttle_time=NO_THROTTLE, filter_results=tuple(results_out))
