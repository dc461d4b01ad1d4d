"""``kafkaguard check``: may this principal, from this host, do this operation on this resource — and why?

Answered either offline, from an ACL file (an ``export``, kafkaguard's YAML or the ACL JSON format) with
kafkaguard's own ``StandardAuthorizer`` (Kafka's KRaft semantics), or by a running kafkaguard console through
``POST /api/authorize``. Exit code 0 when allowed, 1 when denied, 2 for a usage or connection error.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.cli.aclfile import AclFileError, load_acl_file
from kafkaguard.cli.output import fail
from kafkaguard.errors import InvalidConfigError, InvalidNameError, KafkaguardError
from kafkaguard.model import (
    CLUSTER_NAME,
    AclId,
    AclOperation,
    Action,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StoredAcl,
    principal_error,
)

_RESOURCE = "Resource (exactly one)"
_OFFLINE = "From an ACL file"
_ONLINE = "From a running console"


#: The resource options ``check`` and ``who-can`` share (name exactly one).
Topic = Annotated[str | None, typer.Option("--topic", help="A topic's name (the resource).", rich_help_panel=_RESOURCE)]
Group = Annotated[str | None, typer.Option("--group", help="A consumer group's id.", rich_help_panel=_RESOURCE)]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster (kafka-cluster).", rich_help_panel=_RESOURCE)]
TransactionalId = Annotated[
    str | None, typer.Option("--transactional-id", help="A transactional id.", rich_help_panel=_RESOURCE)
]
DelegationToken = Annotated[
    str | None, typer.Option("--delegation-token", help="A delegation token's id.", rich_help_panel=_RESOURCE)
]
UserPrincipal = Annotated[
    str | None,
    typer.Option("--user-principal", help="A user principal (the USER resource).", rich_help_panel=_RESOURCE),
]


def check(
    principal: Annotated[str, typer.Option("--principal", help="Who asks, e.g. User:alice.")],
    operation: Annotated[str, typer.Option("--operation", help="READ, WRITE, DESCRIBE... (or Read, Write...).")],
    host: Annotated[str, typer.Option("--host", help="The client's IP address as Kafka sees it.")] = "127.0.0.1",
    login_group: Annotated[
        list[str] | None,
        typer.Option(
            "--login-group",
            help="A group the caller's login brings (an OAUTHBEARER token's groups claim), e.g. payments; "
            "repeatable. Offline only.",
            rich_help_panel=_OFFLINE,
        ),
    ] = None,
    topic: Topic = None,
    group: Group = None,
    cluster: Cluster = False,
    transactional_id: TransactionalId = None,
    delegation_token: DelegationToken = None,
    user_principal: UserPrincipal = None,
    acls: Annotated[
        Path | None,
        typer.Option(
            "--acls",
            help="ACL file: kafkaguard's YAML or the ACL JSON format.",
            exists=True,
            dir_okay=False,
            rich_help_panel=_OFFLINE,
        ),
    ] = None,
    super_users: Annotated[
        str, typer.Option("--super-users", help="super.users, e.g. 'User:admin;User:ops'.", rich_help_panel=_OFFLINE)
    ] = "",
    allow_everyone_if_no_acl_found: Annotated[
        bool,
        typer.Option(
            "--allow-everyone-if-no-acl-found", help="Kafka's setting (default: deny).", rich_help_panel=_OFFLINE
        ),
    ] = False,
    console_url: Annotated[
        str | None,
        typer.Option(
            "--console-url", help="e.g. http://127.0.0.1:8080", envvar="KAFKAGUARD_CONSOLE_URL", rich_help_panel=_ONLINE
        ),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Console login (a SCRAM user).", rich_help_panel=_ONLINE)
    ] = None,
    password: Annotated[
        str | None,
        typer.Option(
            "--password",
            help="Console password (prompted when --user is given without it).",
            envvar="KAFKAGUARD_CONSOLE_PASSWORD",
            rich_help_panel=_ONLINE,
        ),
    ] = None,
    output_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
) -> None:
    """Decide one request offline (--acls FILE) or ask a running console (--console-url), and say why:
    the decision and the rule that made it (super user, a matching ACL, or the default rule)."""
    resource_type, name = resource_of(topic, group, cluster, transactional_id, delegation_token, user_principal)
    reason = principal_error(principal)
    if reason is not None:
        fail(reason, 2)
    try:
        op = AclOperation.from_string(operation)
    except InvalidNameError as e:
        fail(str(e), 2)
    if (acls is None) == (console_url is None):
        fail("give either --acls FILE (decide offline) or --console-url URL (ask a running console)", 2)
    groups = tuple(g if g.startswith("Group:") else f"Group:{g}" for g in login_group or ())
    if acls is not None:
        context = RequestContext(principal, host, groups)
        answer = _offline(acls, context, op, resource_type, name, super_users, allow_everyone_if_no_acl_found)
    elif groups:
        fail("--login-group is for deciding offline (--acls): the console decides for stored memberships only", 2)
    else:
        if user is not None and password is None:
            password = typer.prompt("Console password", hide_input=True)
        answer = _online(str(console_url), user, password, principal, host, op, resource_type, name)
    if output_json:
        typer.echo(json.dumps(answer, indent=2))
    else:
        typer.echo(f"{answer['decision']} by {answer['rule']}")
        typer.echo(answer["explanation"])
    if answer["decision"] != "ALLOWED":
        raise typer.Exit(code=1)


def resource_of(
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    delegation_token: str | None,
    user_principal: str | None,
) -> tuple[ResourceType, str]:
    given = [
        (t, n)
        for t, n in (
            (ResourceType.TOPIC, topic),
            (ResourceType.GROUP, group),
            (ResourceType.CLUSTER, CLUSTER_NAME if cluster else None),
            (ResourceType.TRANSACTIONAL_ID, transactional_id),
            (ResourceType.DELEGATION_TOKEN, delegation_token),
            (ResourceType.USER, user_principal),
        )
        if n is not None
    ]
    if len(given) != 1:
        fail(
            "name exactly one resource: --topic, --group, --cluster, --transactional-id, --delegation-token or "
            "--user-principal",
            2,
        )
    return given[0]


def _offline(
    path: Path,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    super_users: str,
    allow_everyone: bool,
) -> dict[str, Any]:
    try:
        bindings = load_acl_file(path)
        stored = [StoredAcl(AclId(f"{path.name}#{i + 1}"), b) for i, b in enumerate(bindings)]
        authorizer = StandardAuthorizer(super_users, allow_everyone, acls=stored)
        action = Action(operation, ResourcePattern(resource_type, name, PatternType.LITERAL))
        decision = authorizer.explain(context, action)
    except AclFileError as e:
        fail(f"{len(e.problems)} problem(s) in the ACL file:\n{e}", 2)
    except (InvalidConfigError, KafkaguardError) as e:
        fail(str(e), 2)
    return {"decision": str(decision.result), "rule": str(decision.rule), "explanation": decision.explanation()}


def _online(
    url: str,
    user: str | None,
    password: str | None,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> dict[str, Any]:
    body = {
        "principal": principal,
        "host": host,
        "operation": operation.name,
        "resource_type": resource_type.name,
        "resource_name": name,
    }
    endpoint = url.rstrip("/") + "/api/authorize"
    if not endpoint.startswith(("http://", "https://")):
        fail(f"--console-url {url!r} must start with http:// or https://", 2)
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        endpoint, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    if user is not None:
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = _detail(e)
        hint = {401: " (check --user/--password)", 403: " (the user needs DESCRIBE on the cluster)"}.get(e.code, "")
        fail(f"the console answered {e.code}: {detail}{hint}", 2)
    except (urllib.error.URLError, OSError, ValueError) as e:
        fail(f"cannot ask the console at {endpoint}: {getattr(e, 'reason', e)}", 2)
    rule = answer.get("rule")
    return {
        "decision": answer.get("decision"),
        "rule": rule.get("text") if isinstance(rule, dict) else rule,
        "explanation": answer.get("explanation"),
    }


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        payload = json.loads(error.read())
    except (ValueError, OSError):
        return str(error.reason)
    if isinstance(payload, dict):
        return str(payload.get("detail") or payload.get("message") or payload)
    return str(payload)
