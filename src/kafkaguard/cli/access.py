"""``kafkaguard can`` and ``kafkaguard who-can``: who can do what, from the store of the data directory (or the
PostgreSQL store the config names), with the ACLs behind each answer (``authorizer.access``).

``can PRINCIPAL`` lists every resource pattern the principal's ACLs (its own, ``User:*``'s and its groups') name,
and the topics they reach, decided: the server's topic catalog, or the topics of a real cluster when
``--bootstrap-server`` is given (the proxy's upstream, say). ``who-can --topic NAME`` lists every principal and host
that can act on one resource, groups expanded to their members.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.authorizer.access import Decided, PrincipalAccess, ResourceHolders, access_of, who_can
from kafkaguard.cli.check import (
    Cluster,
    DelegationToken,
    Group,
    Topic,
    TransactionalId,
    UserPrincipal,
    resource_of,
)
from kafkaguard.cli.client import CliError, KafkaAdmin, client_config, load_properties
from kafkaguard.cli.groups import ConfigFile, DataDir, store_services
from kafkaguard.cli.output import fail
from kafkaguard.model import AclOperation, StoredAcl, principal_error
from kafkaguard.model.json_value import JsonObject

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]


def can(
    principal: Annotated[str, typer.Argument(help="The principal, e.g. User:alice.")],
    host: Annotated[
        str | None, typer.Option(help="The client's address (default: any; host-specific ACLs then listed only).")
    ] = None,
    bootstrap_server: Annotated[
        str | None,
        typer.Option(help="Expand patterns to the topics of this Kafka cluster (default: the server's catalog)."),
    ] = None,
    command_config: Annotated[
        Path | None, typer.Option(help="Client properties for --bootstrap-server (SASL, TLS).", exists=True)
    ] = None,
    data_dir: DataDir = None,
    config: ConfigFile = None,
    output_json: JsonFlag = False,
) -> None:
    """What PRINCIPAL can do: every resource pattern its ACLs name, and each known topic decided."""
    reason = principal_error(principal)
    if reason is not None:
        fail(reason, 2)
    with store_services(config, data_dir, as_served=True, quiet=output_json) as services:
        if bootstrap_server is not None:
            properties = load_properties(command_config) if command_config is not None else None
            try:
                topics = KafkaAdmin(client_config(bootstrap_server, properties)).topic_names()
            except CliError as e:
                fail(str(e), e.exit_code)
        else:
            topics = list(services.topics.catalog.by_name)
        answer = access_of(services.authorizer.snapshot, principal, host, topics)
    if output_json:
        typer.echo(json.dumps(access_json(answer), indent=2))
        return
    _print_access(answer)


def who_can_command(
    topic: Topic = None,
    group: Group = None,
    cluster: Cluster = False,
    transactional_id: TransactionalId = None,
    delegation_token: DelegationToken = None,
    user_principal: UserPrincipal = None,
    data_dir: DataDir = None,
    config: ConfigFile = None,
    output_json: JsonFlag = False,
) -> None:
    """Who can act on one resource: every principal and host its ACLs name (groups expanded), decided."""
    resource_type, name = resource_of(topic, group, cluster, transactional_id, delegation_token, user_principal)
    with store_services(config, data_dir, as_served=True, quiet=output_json) as services:
        answer = who_can(services.authorizer.snapshot, resource_type, name)
    if output_json:
        typer.echo(json.dumps(holders_json(answer), indent=2))
        return
    _print_holders(answer)


# -------------------------------------------------------------------------------------------------- output


def _acl_json(acl: StoredAcl) -> JsonObject:
    pattern, entry = acl.binding.pattern, acl.binding.entry
    return {
        "id": acl.id,
        "resource_type": pattern.resource_type.name,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission_type": entry.permission_type.name,
    }


def _decided_json(decided: Decided) -> JsonObject:
    return {
        "resource_type": decided.resource.resource_type.name,
        "resource_name": decided.resource.name,
        "allowed": [op.name for op in decided.allowed],
        "denied": [op.name for op in decided.denied],
    }


def access_json(answer: PrincipalAccess) -> JsonObject:
    """``can``'s answer as JSON (also the REST API's shape)."""
    return {
        "principal": answer.principal,
        "host": answer.host,
        "super_user": answer.super_user,
        "groups": list(answer.groups),
        "patterns": [
            {
                "resource_type": p.pattern.resource_type.name,
                "resource_name": p.pattern.name,
                "pattern_type": p.pattern.pattern_type.name,
                "allows": [op.name for op in p.allows],
                "denies": [op.name for op in p.denies],
                "acls": [_acl_json(acl) for acl in p.acls],
            }
            for p in answer.patterns
        ],
        "topics": [_decided_json(d) for d in answer.resources],
    }


def holders_json(answer: ResourceHolders) -> JsonObject:
    """``who-can``'s answer as JSON (also the REST API's shape)."""
    return {
        "resource_type": answer.resource.resource_type.name,
        "resource_name": answer.resource.name,
        "super_users": list(answer.super_users),
        "holders": [
            {
                "principal": h.principal,
                "host": h.host,
                "via": list(h.via),
                "allowed": [op.name for op in h.decided.allowed],
                "denied": [op.name for op in h.decided.denied],
                "acls": [_acl_json(acl) for acl in h.acls],
            }
            for h in answer.holders
        ],
    }


def _ops(ops: tuple[AclOperation, ...]) -> str:
    return ", ".join(op.name for op in ops) or "-"


def _print_access(answer: PrincipalAccess) -> None:
    where = f" from {answer.host}" if answer.host else ""
    typer.echo(f"{answer.principal}{where}")
    if answer.super_user:
        typer.echo("  super user: every operation on every resource is allowed, whatever the ACLs say")
    typer.echo(f"  groups: {', '.join(answer.groups) or 'none'}")
    if not answer.patterns:
        typer.echo("  no ACL names this principal, User:* or its groups")
    for p in answer.patterns:
        pattern = p.pattern
        typer.echo(
            f"  {pattern.resource_type}:{pattern.pattern_type}:{pattern.name}  allows {_ops(p.allows)}  "
            f"denies {_ops(p.denies)}"
        )
        for acl in p.acls:
            entry = acl.binding.entry
            typer.echo(
                f"      {entry.permission_type} {entry.operation} for {entry.principal} from {entry.host} [{acl.id}]"
            )
    if answer.resources:
        typer.echo("  topics (decided):")
    for decided in answer.resources:
        typer.echo(f"    {decided.resource.name}: allowed {_ops(decided.allowed)}; denied {_ops(decided.denied)}")


def _print_holders(answer: ResourceHolders) -> None:
    resource = answer.resource
    typer.echo(f"{resource.resource_type}:{resource.name}")
    if answer.super_users:
        typer.echo(f"  super users (every operation): {', '.join(answer.super_users)}")
    if not answer.holders:
        typer.echo("  no ACL applies to this resource")
    for h in answer.holders:
        who = "any principal (User:*)" if h.principal == "User:*" else h.principal
        if h.principal.startswith("Group:"):
            who = f"any login whose token brings {h.principal}"
        via = "" if list(h.via) == [h.principal] else f" via {', '.join(h.via)}"
        typer.echo(f"  {who} from {h.host}{via}: allowed {_ops(h.decided.allowed)}; denied {_ops(h.decided.denied)}")
