"""``kafkaguard acls``: kafka-acls.sh without a JVM — the same flags, defaults, checks and output (Kafka 4.x's
``org.apache.kafka.tools.AclCommand``), over confluent-kafka's AdminClient, so it works against kafkaguard and any
Apache Kafka cluster.

Differences, all deliberate: resources and entries are printed in a stable sorted order (Kafka prints hash order);
failures end with a non-zero exit code and one line per failed binding naming Kafka's error (Kafka prints a stack
trace); ``--output json`` prints the ACL JSON format for scripts.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer

from kafkaguard.cli.aclfile import supported_operations
from kafkaguard.cli.client import DEFAULT_TIMEOUT, CliError, Failure, KafkaAdmin
from kafkaguard.cli.connection import CommandConfig, OptionalBootstrapServer, Timeout, connect
from kafkaguard.cli.history import history
from kafkaguard.cli.output import adding_acls_text, binding_text, current_acls_text, entry_text, fail, warn
from kafkaguard.cli.output import pattern_filter_text as filter_text
from kafkaguard.errors import InvalidNameError
from kafkaguard.model import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    principal_error,
)
from kafkaguard.model.acl_json import acls_to_document

_O = AclOperation


class OutputFormat(StrEnum):
    kafka = "kafka"
    json = "json"


_RESOURCES = "Resources (repeatable; '*' is every resource of the type)"
_PRINCIPALS = "Principals and hosts"
_SHORTHANDS = "Producer and consumer shorthands"
_ACTIONS = "Action (exactly one)"
_CONNECTION = "Connection"

_USAGE = 2


app = typer.Typer(help="ACLs (kafka-acls.sh), and their history.")
app.command("history")(history)


@app.callback(invoke_without_command=True)
def acls(
    ctx: typer.Context,
    bootstrap_server: OptionalBootstrapServer = None,
    command_config: CommandConfig = None,
    add: Annotated[bool, typer.Option("--add", help="Add ACLs.", rich_help_panel=_ACTIONS)] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove ACLs.", rich_help_panel=_ACTIONS)] = False,
    list_: Annotated[
        bool, typer.Option("--list", help="List ACLs (of the given resources, or all).", rich_help_panel=_ACTIONS)
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Assume yes to every question (--remove).")] = False,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="Topic.", rich_help_panel=_RESOURCES)] = None,
    group: Annotated[
        list[str] | None, typer.Option("--group", help="Consumer group.", rich_help_panel=_RESOURCES)
    ] = None,
    cluster: Annotated[
        bool, typer.Option("--cluster", help="The cluster (kafka-cluster).", rich_help_panel=_RESOURCES)
    ] = False,
    transactional_id: Annotated[
        list[str] | None, typer.Option("--transactional-id", help="Transactional id.", rich_help_panel=_RESOURCES)
    ] = None,
    delegation_token: Annotated[
        list[str] | None, typer.Option("--delegation-token", help="Delegation token id.", rich_help_panel=_RESOURCES)
    ] = None,
    user_principal: Annotated[
        list[str] | None,
        typer.Option("--user-principal", help="A user as a resource (CREATE_TOKENS...).", rich_help_panel=_RESOURCES),
    ] = None,
    resource_pattern_type: Annotated[
        str,
        typer.Option(
            "--resource-pattern-type",
            help="LITERAL or PREFIXED (adding); also ANY (exact name, any pattern) or MATCH (every ACL that "
            "affects the name) for --list/--remove. MATCH with --remove deletes broadly: use with care.",
            rich_help_panel=_RESOURCES,
        ),
    ] = "LITERAL",
    allow_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-principal", help="Type:name, e.g. User:alice; User:* is everyone.", rich_help_panel=_PRINCIPALS
        ),
    ] = None,
    deny_principal: Annotated[
        list[str] | None,
        typer.Option("--deny-principal", help="Type:name. DENY rules take precedence.", rich_help_panel=_PRINCIPALS),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Host of --allow-principal (default *).", rich_help_panel=_PRINCIPALS),
    ] = None,
    deny_host: Annotated[
        list[str] | None,
        typer.Option("--deny-host", help="Host of --deny-principal (default *).", rich_help_panel=_PRINCIPALS),
    ] = None,
    principal: Annotated[
        list[str] | None,
        typer.Option("--principal", help="With --list: only this principal's ACLs.", rich_help_panel=_PRINCIPALS),
    ] = None,
    operation: Annotated[
        list[str] | None,
        typer.Option(
            "--operation",
            help="Operation allowed or denied (repeatable; Kafka's names, Read or READ). Default: All.",
            rich_help_panel=_PRINCIPALS,
        ),
    ] = None,
    producer: Annotated[
        bool,
        typer.Option(
            "--producer",
            help="WRITE, DESCRIBE, CREATE on --topic (and --transactional-id: WRITE, DESCRIBE).",
            rich_help_panel=_SHORTHANDS,
        ),
    ] = False,
    idempotent: Annotated[
        bool,
        typer.Option(
            "--idempotent", help="With --producer: IDEMPOTENT_WRITE on the cluster.", rich_help_panel=_SHORTHANDS
        ),
    ] = False,
    consumer: Annotated[
        bool,
        typer.Option("--consumer", help="READ, DESCRIBE on --topic and READ on --group.", rich_help_panel=_SHORTHANDS),
    ] = False,
    output: Annotated[
        OutputFormat, typer.Option("--output", help="kafka (kafka-acls.sh text) or json (the ACL JSON format).")
    ] = OutputFormat.kafka,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> None:
    """Add, remove or list ACLs, exactly as kafka-acls.sh --bootstrap-server does.

    Examples:

      kafkaguard acls --bootstrap-server localhost:9092 --command-config admin.properties --add
        --allow-principal User:alice --operation Read --operation Describe --topic orders

      kafkaguard acls --bootstrap-server localhost:9092 --command-config admin.properties --add
        --allow-principal User:bob --consumer --topic orders --group billing

      kafkaguard acls --bootstrap-server localhost:9092 --command-config admin.properties --list --topic orders
    """
    if ctx.invoked_subcommand is not None:
        return
    if bootstrap_server is None:
        fail("Missing option '--bootstrap-server' (or ask for: kafkaguard acls history)", _USAGE)
    args = _Args(
        topic=topic or [],
        group=group or [],
        cluster=cluster,
        transactional_id=transactional_id or [],
        delegation_token=delegation_token or [],
        user_principal=user_principal or [],
        allow_principal=allow_principal or [],
        deny_principal=deny_principal or [],
        allow_host=allow_host or [],
        deny_host=deny_host or [],
        operation=operation or ["All"],
        producer=producer,
        consumer=consumer,
        idempotent=idempotent,
    )
    try:
        pattern_type = PatternType.from_string(resource_pattern_type)
    except InvalidNameError:
        fail(
            f"Unknown resource-pattern-type: {resource_pattern_type}; expected LITERAL, PREFIXED, ANY or MATCH",
            _USAGE,
        )
    if pattern_type.is_unknown:
        fail(f"Unknown resource-pattern-type: {resource_pattern_type}", _USAGE)
    _check_args(add, remove, list_, principal or [], args, operation is not None)
    try:
        admin = connect(bootstrap_server, command_config, timeout, client_id="kafkaguard-acls")
        if add:
            _add(admin, args, pattern_type, output)
        elif remove:
            _remove(admin, args, pattern_type, force, output)
        else:
            _list(admin, args, pattern_type, principal or [], output)
    except CliError as e:
        fail(f"Error while executing ACL command: {e}", e.exit_code)


@dataclass(frozen=True, slots=True)
class _Args:
    topic: list[str]
    group: list[str]
    cluster: bool
    transactional_id: list[str]
    delegation_token: list[str]
    user_principal: list[str]
    allow_principal: list[str]
    deny_principal: list[str]
    allow_host: list[str]
    deny_host: list[str]
    operation: list[str]
    producer: bool
    consumer: bool
    idempotent: bool


def _check_args(
    add: bool, remove: bool, list_: bool, principals: list[str], args: _Args, operation_given: bool
) -> None:
    """AclCommandOptions.checkArgs, with Kafka's messages."""
    if sum((add, remove, list_)) != 1:
        fail("Command must include exactly one action: --list, --add, --remove.", _USAGE)
    given = {
        "--producer": args.producer,
        "--consumer": args.consumer,
        "--allow-host": bool(args.allow_host),
        "--allow-principal": bool(args.allow_principal),
        "--deny-host": bool(args.deny_host),
        "--deny-principal": bool(args.deny_principal),
        "--operation": operation_given,
    }
    if list_:
        for name in (
            "--producer",
            "--consumer",
            "--allow-host",
            "--allow-principal",
            "--deny-host",
            "--deny-principal",
        ):
            if given[name]:
                fail(f'Option "--list" can\'t be used with option "{name}"', _USAGE)
    for shorthand in ("--producer", "--consumer"):
        if given[shorthand]:
            for name in ("--operation", "--deny-principal", "--deny-host"):
                if given[name]:
                    fail(f'Option "{shorthand}" can\'t be used with option "{name}"', _USAGE)
    if principals and not list_:
        fail("The --principal option is only available if --list is set", _USAGE)
    if args.producer and not args.topic:
        fail("With --producer you must specify a --topic", _USAGE)
    if args.idempotent and not args.producer:
        fail("The --idempotent option is only available if --producer is set", _USAGE)
    if args.consumer and (
        not args.topic or not args.group or (not args.producer and (args.cluster or args.transactional_id))
    ):
        fail(
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified.",
            _USAGE,
        )
    for value in [*args.allow_principal, *args.deny_principal, *principals]:
        reason = principal_error(value.strip())
        if reason is not None:
            fail(reason, _USAGE)


def _resource_filters(args: _Args, pattern_type: PatternType, die_if_none: bool) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter."""
    filters: dict[ResourcePatternFilter, None] = {}
    for name in args.topic:
        filters[ResourcePatternFilter(ResourceType.TOPIC, name.strip(), pattern_type)] = None
    if pattern_type is PatternType.LITERAL and (args.cluster or args.idempotent):
        filters[ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = None
    for name in args.group:
        filters[ResourcePatternFilter(ResourceType.GROUP, name.strip(), pattern_type)] = None
    for name in args.transactional_id:
        filters[ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, name, pattern_type)] = None
    for name in args.delegation_token:
        filters[ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, name.strip(), pattern_type)] = None
    for name in args.user_principal:
        filters[ResourcePatternFilter(ResourceType.USER, name.strip(), pattern_type)] = None
    if not filters and die_if_none:
        fail(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>",
            _USAGE,
        )
    return list(filters)


def _entries(args: _Args, operations: set[AclOperation]) -> set[AccessControlEntry]:
    """AclCommand.getAcl: principals x operations x hosts, hosts defaulting to * when principals are given."""
    out: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for p in principals:
            for op in operations:
                for h in hosts or [WILDCARD_HOST]:
                    out.add(AccessControlEntry(p.strip(), h.strip(), op, permission))
    return out


def _filter_to_entries(args: _Args, pattern_type: PatternType) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """AclCommand.getResourceFilterToAcls, with the producer/consumer shorthands and validateOperation."""
    result: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        operations: set[AclOperation] = set()
        for name in args.operation:
            try:
                operations.add(AclOperation.from_string(name.strip()))
            except InvalidNameError as e:
                fail(str(e), _USAGE)
            if next(iter(operations & {_O.ANY, _O.UNKNOWN}), None) is not None:
                fail(f"{name!r} is a filter value, not an operation an ACL can name", _USAGE)
        entries = _entries(args, operations)
        for f in _resource_filters(args, pattern_type, True):
            result[f] = set(entries)
    if args.producer:
        filters = _resource_filters(args, pattern_type, True)
        for f in filters:
            if f.resource_type is ResourceType.TOPIC:
                result[f] = _entries(args, {_O.WRITE, _O.DESCRIBE, _O.CREATE})
            elif f.resource_type is ResourceType.TRANSACTIONAL_ID:
                result[f] = _entries(args, {_O.WRITE, _O.DESCRIBE})
        if args.idempotent:
            cluster_filter = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
            result[cluster_filter] = _entries(args, {_O.IDEMPOTENT_WRITE})
    if args.consumer:
        for f in _resource_filters(args, pattern_type, True):
            if f.resource_type is ResourceType.TOPIC:
                result.setdefault(f, set()).update(_entries(args, {_O.READ, _O.DESCRIBE}))
            elif f.resource_type is ResourceType.GROUP:
                result.setdefault(f, set()).update(_entries(args, {_O.READ}))
    for f, entries in result.items():
        valid = supported_operations(f.resource_type)
        if any(e.operation not in valid for e in entries):
            names = ", ".join(sorted(op.pascal_name for op in valid))
            fail(f"ResourceType {f.resource_type} only supports operations {names}", _USAGE)
    return result


def _add(admin: KafkaAdmin, args: _Args, pattern_type: PatternType, output: OutputFormat) -> None:
    if not pattern_type.is_specific:
        fail(f"A '--resource-pattern-type' value of '{pattern_type}' is not valid when adding acls.", _USAGE)
    to_add = _filter_to_entries(args, pattern_type)
    if any(not entries for entries in to_add.values()):
        fail("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.", _USAGE)
    failures: list[Failure] = []
    added: list[AclBinding] = []
    for f, entries in to_add.items():
        pattern = ResourcePattern(f.resource_type, f.name or "", pattern_type)
        existing = set(
            admin.describe_acls(AclBindingFilter(pattern.to_filter(), AccessControlEntryFilter.ANY)).bindings
        )
        new: list[AclBinding] = []
        for entry in sorted(entries, key=lambda e: (e.principal, e.host, e.operation.code, e.permission_type.code)):
            binding = AclBinding(pattern, entry)
            if binding in existing:
                if output is OutputFormat.kafka:
                    typer.echo(f"Acl {binding_text(binding)} already exists.")
            else:
                new.append(binding)
        if new:
            if output is OutputFormat.kafka:
                typer.echo(adding_acls_text(pattern, (b.entry for b in new)), nl=False)
            refused = admin.create_acls(new)
            failures += refused
            refused_subjects = {failure.subject for failure in refused}
            added += [b for b in new if binding_text(b) not in refused_subjects]
    if output is OutputFormat.json:
        _print_json(added, "added", failures)
    _exit_on(failures)


def _remove(admin: KafkaAdmin, args: _Args, pattern_type: PatternType, force: bool, output: OutputFormat) -> None:
    failures: list[Failure] = []
    removed: list[AclBinding] = []
    for f, entries in _filter_to_entries(args, pattern_type).items():
        if entries:
            listed = "\n".join(f"\t{entry_text(e)}" for e in sorted(entries, key=str))
            question = (
                f"Are you sure you want to remove ACLs: \n {listed}\n from resource filter `{filter_text(f)}`? (y/n)"
            )
            filters = [AclBindingFilter(f, e.to_filter()) for e in entries]
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{filter_text(f)}`? (y/n)"
            filters = [AclBindingFilter(f, AccessControlEntryFilter.ANY)]
        if not _confirm(question, force):
            continue
        gone, refused = admin.delete_acls(filters)
        removed += gone
        failures += refused
    if output is OutputFormat.json:
        _print_json(removed, "removed", failures)
    _exit_on(failures)


def _confirm(question: str, force: bool) -> bool:
    """AclCommand.confirmAction: print the question and read one line; only ``y`` (any case) is yes."""
    if force:
        return True
    typer.echo(question)
    return sys.stdin.readline().strip().lower() == "y"


def _list(
    admin: KafkaAdmin, args: _Args, pattern_type: PatternType, principals: list[str], output: OutputFormat
) -> None:
    filters = _resource_filters(args, pattern_type, False)
    found: dict[AclBinding, None] = {}
    unknown = 0
    for f in filters or [ResourcePatternFilter.ANY]:
        described = admin.describe_acls(AclBindingFilter(f, AccessControlEntryFilter.ANY))
        found.update(dict.fromkeys(described.bindings))
        unknown += described.unrepresentable
    if unknown:
        warn(
            f"{unknown} ACL(s) use a resource type or operation librdkafka 2.16 cannot decode (USER, "
            "DELEGATION_TOKEN, CREATE_TOKENS, DESCRIBE_TOKENS, AUTO_CREATE) and are not shown"
        )
    bindings = list(found)
    if output is OutputFormat.json:
        wanted = {p.strip() for p in principals}
        chosen = [b for b in bindings if not wanted or b.entry.principal in wanted]
        typer.echo(json.dumps(acls_to_document(_sorted(chosen)), indent=2))
        return
    if not principals:
        typer.echo(current_acls_text(bindings), nl=False)
        return
    for p in dict.fromkeys(p.strip() for p in principals):
        typer.echo(f"ACLs for principal `{p}`")
        typer.echo(current_acls_text(b for b in bindings if b.entry.principal == p), nl=False)


def _sorted(bindings: list[AclBinding]) -> list[AclBinding]:
    return sorted(
        bindings,
        key=lambda b: (
            b.pattern.resource_type.code,
            b.pattern.name,
            b.pattern.pattern_type.code,
            b.entry.principal,
            b.entry.host,
            b.entry.operation.code,
            b.entry.permission_type.code,
        ),
    )


def _print_json(bindings: list[AclBinding], key: str, failures: list[Failure]) -> None:
    document = {
        key: acls_to_document(_sorted(bindings))["acls"],
        "errors": [{"subject": f.subject, "error": f.error_name, "message": f.message} for f in failures],
    }
    typer.echo(json.dumps(document, indent=2))


def _exit_on(failures: list[Failure]) -> None:
    if not failures:
        return
    for failure in failures:
        typer.secho(f"Error while executing ACL command: {failure}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=1)
