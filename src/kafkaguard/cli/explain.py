"""``kafkaguard explain --from-audit LOG``: a decision taken straight from the audit log, decided again now, and why.

Picks the last refusal of the log files (``--last-denied``, the default; ``--principal`` narrows it): a DENIED record,
or in ``upstream_authentication: passthrough`` the broker's refusal of what kafkaguard allowed (a broker event,
``audit.records.broker_refusals``: it then says which side refused); or the record of one event (``--event ID``: a
CloudEvents envelope's ``id``), prints what was logged (decision, rule, time,
how many requests the record stands for, a permissive proxy's would-be denial) and decides the same request again
with kafkaguard's own authorizer: against the store of the server's data directory, with the super users and the
no-ACL rule it recorded (as ``kafkaguard can`` does), or against an ACL file (``--acls``). When the two decisions
differ, it says so: the ACLs, the groups or the super users changed since.

Cost: one pass over the log files, one JSON parse per line; the chosen record only is kept. Exit code 0 when a
record was explained, 2 for bad input or when no record matches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.audit.records.broker_refusals import BROKER_TYPE, BrokerRefusal, broker_refusal_of, explained
from kafkaguard.audit.records.record import AuditRecord, LineError, format_time, from_json_line, parse_time
from kafkaguard.authorizer import Decision, StandardAuthorizer
from kafkaguard.cli.aclfile import AclFileError, load_acl_file
from kafkaguard.cli.groups import ConfigFile, DataDir, store_services
from kafkaguard.cli.log_lines import log_lines
from kafkaguard.cli.output import fail, printable
from kafkaguard.errors import KafkaguardError
from kafkaguard.model import (
    AclId,
    AclOperation,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)


def _event_id(line: str) -> str | None:
    try:
        decoded = json.loads(line)
    except ValueError:
        return None
    found = decoded.get("id") if isinstance(decoded, dict) and "specversion" in decoded else None
    return found if isinstance(found, str) else None


def _broker_refusal(line: str) -> BrokerRefusal | None:
    if BROKER_TYPE not in line:  # no JSON parse for the other lines
        return None
    try:
        decoded = json.loads(line)
    except ValueError:
        return None
    return broker_refusal_of(decoded)


def _as_record(refusal: BrokerRefusal) -> AuditRecord | None:
    """kafkaguard's ALLOWED decision that a broker refusal names (None if its fields are no record's)."""
    time = parse_time(refusal.time)
    if time is None or refusal.operation not in AclOperation.__members__:
        return None
    if refusal.resource_type not in ResourceType.__members__:
        return None
    return AuditRecord(
        time=time,
        principal=refusal.principal,
        host=refusal.host,
        api=refusal.api,
        operation=AclOperation[refusal.operation],
        resource_type=ResourceType[refusal.resource_type],
        resource_name=refusal.resource_name,
        decision=AuthorizationResult.ALLOWED,
        rule=refusal.rule,
    )


#: The record picked, where it is (``file:line``) and, for a broker refusal, the broker's side.
Picked = tuple[AuditRecord, str, BrokerRefusal | None]


def pick(paths: list[Path], event: str | None, principal: str | None, bad: list[str] | None = None) -> Picked | None:
    """The record to explain, where it is (``file:line``) and the broker's refusal when it is one: the one of
    envelope ``event``, or the last refusal (a DENIED record, or in passthrough a broker's refusal of what kafkaguard
    allowed; of ``principal`` when given); None when no record matches. Lines that are no record (bad JSON, a record
    missing a field) are appended to ``bad`` as ``file:line: reason``."""
    chosen: Picked | None = None
    for source, number, line in log_lines(paths, exit_code=2):
        if not line.strip():
            continue
        if event is not None and _event_id(line) != event:
            continue
        refusal = _broker_refusal(line)
        if refusal is not None:
            refused = _as_record(refusal)
            if refused is None or (principal is not None and refused.principal != principal):
                continue
            chosen = refused, f"{source}:{number}", refusal
            if event is not None:
                return chosen
            continue
        record = from_json_line(line)
        if isinstance(record, LineError) and bad is not None:
            bad.append(f"{source}:{number}: {record.reason}")
        if not isinstance(record, AuditRecord):
            if event is not None:
                fail(f"{source}:{number}: event {event} is not an authorization record", 2)
            continue
        if principal is not None and record.principal != principal:
            continue
        if event is not None:
            return record, f"{source}:{number}", None
        if record.decision is AuthorizationResult.DENIED:
            chosen = record, f"{source}:{number}", None
    return chosen


def explain(
    from_audit: Annotated[
        list[Path],
        typer.Option(
            "--from-audit",
            help="Audit log file (kafkaguard JSON lines, plain or .gz); repeatable, read in the order given.",
            exists=True,
            dir_okay=False,
        ),
    ],
    last_denied: Annotated[
        bool, typer.Option("--last-denied", help="Explain the last DENIED record (the default).")
    ] = False,
    event: Annotated[str | None, typer.Option("--event", help="Explain the record of this event id instead.")] = None,
    principal: Annotated[str | None, typer.Option(help="Only records of this principal, e.g. User:bob.")] = None,
    acls: Annotated[
        Path | None,
        typer.Option("--acls", help="Decide against this ACL file instead of the store.", exists=True, dir_okay=False),
    ] = None,
    super_users: Annotated[
        str | None, typer.Option("--super-users", help="With --acls: super.users, e.g. 'User:admin'.")
    ] = None,
    data_dir: DataDir = None,
    config: ConfigFile = None,
    output_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
) -> None:
    """Explain a decision from the audit log: what was logged, what kafkaguard decides now, and why."""
    if last_denied and event is not None:
        fail("give --last-denied or --event ID, not both", 2)
    if super_users is not None and acls is None:
        fail("--super-users goes with --acls (the store's server recorded its own)", 2)
    bad: list[str] = []
    found = pick(from_audit, event, principal, bad)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        typer.secho(f"warning: {len(bad)} line(s) are not audit records: {bad[0]}{more}", fg="yellow", err=True)
    if found is None:
        which = f"event {event}" if event is not None else "DENIED record"
        whose = f" of {principal}" if principal is not None else ""
        fail(f"no {which}{whose} in {', '.join(str(p) for p in from_audit)}", 2)
    record, where, refusal = found
    context = RequestContext(record.principal, record.host, record.login_groups)
    action = Action(record.operation, ResourcePattern(record.resource_type, record.resource_name))
    if acls is not None:
        try:
            bindings = load_acl_file(acls)
            stored = [StoredAcl(AclId(f"{acls.name}#{i + 1}"), b) for i, b in enumerate(bindings)]
            decision = StandardAuthorizer(super_users or "", False, acls=stored).explain(context, action)
        except AclFileError as e:
            fail(f"{len(e.problems)} problem(s) in the ACL file:\n{e}", 2)
        except KafkaguardError as e:
            fail(str(e), 2)
        against = str(acls)
    else:
        with store_services(config, data_dir, as_served=True, quiet=output_json) as services:
            decision = services.authorizer.explain(context, action)
            against = f"the store of {services.settings.data_dir}"
    _print(record, where, decision, against, output_json, refusal)


def _print(
    record: AuditRecord,
    where: str,
    decision: Decision,
    against: str,
    output_json: bool,
    refusal: BrokerRefusal | None = None,
) -> None:
    logged = record.decision.name
    now = str(decision.result)
    if output_json:
        answer = {
            "record": where,
            "time": format_time(record.time),
            "principal": record.principal,
            "host": record.host,
            "api": record.api,
            "operation": record.operation.name,
            "resource_type": record.resource_type.name,
            "resource_name": record.resource_name,
            "logged_decision": logged,
            "logged_rule": record.rule,
            "requests": record.count,
            "enforced": record.enforced,
            "decision_now": now,
            "rule_now": str(decision.rule),
            "explanation": decision.explanation(),
            "decided_against": against,
            # who refused: kafkaguard (a DENIED record), the broker (passthrough: its own ACLs), or no one
            "refused_by": "broker" if refusal is not None else ("kafkaguard" if logged == "DENIED" else None),
            "broker_error": refusal.broker_error if refusal is not None else None,
        }
        typer.echo(json.dumps(answer, indent=2))
        return
    span = f", {record.count} requests until {format_time(record.last)}" if record.count > 1 else ""
    permissive = " (not enforced: a permissive proxy forwarded it)" if not record.enforced else ""
    lines = [
        f"record   {where}",
        f"request  {record.principal} from {record.host}: {record.operation.name} on "
        f"{record.resource_type.name}:{record.resource_name}" + (f" ({record.api})" if record.api else ""),
        f"logged   {logged} by {record.rule or 'an unrecorded rule'} at {format_time(record.time)}{span}{permissive}",
        *([f"refused  {explained(refusal)}"] if refusal is not None else []),
        f"now      {now} by {decision.rule} (decided against {against})",
        f"why      {decision.explanation()}",
    ]
    if now != logged:
        lines.append(
            "note     the decision differs from the logged one: the ACLs, the groups or the super users changed "
            "since it was logged"
        )
    for line in lines:
        typer.echo(printable(line))
