"""``kafkaguard plan -f FILE``: what ``apply`` would change, and the order it would change it in.

The order is the one KIP-140 warns about getting wrong: changing ACLs is a sequence of separate requests, and
every intermediate state is live. ``apply`` therefore goes

1. add the new DENYs,   2. add the new ALLOWs,   3. remove the old ALLOWs,   4. remove the old DENYs

(3 and 4 only with ``--prune``). With Kafka's default ``allow.everyone.if.no.acl.found=false``, at every moment —
after each single ACL, not only after each step — a request is allowed only if the old or the new ACL set allows
it, and every request both sets allow stays allowed (``tests/cli/test_plan.py`` checks this against the real
authorizer). With ``allow.everyone.if.no.acl.found=true`` the first bound still holds; the second cannot hold for
any order, because the first ACL on a resource takes the default access away from everybody else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from kafkaguard.cli.aclfile import AclFileError, load_acl_file
from kafkaguard.cli.client import DEFAULT_TIMEOUT, CliError, KafkaAdmin
from kafkaguard.cli.connection import BootstrapServer, CommandConfig, Timeout, connect, require_bootstrap
from kafkaguard.cli.output import entry_text, fail, pattern_text, warn
from kafkaguard.model import AclBinding, AclBindingFilter, AclPermissionType

_FILE_HELP = "The desired ACLs: kafkaguard's YAML (see `kafkaguard export`) or the ACL JSON format."
#: The ACL file, as ``plan candidate.yaml`` (the rollout recipe) or ``plan -f candidate.yaml`` (kept): exactly one.
AclFileArgument = Annotated[
    Path | None,
    typer.Argument(
        help=_FILE_HELP + " Or -f FILE.", metavar="FILE", exists=True, dir_okay=False, readable=True, show_default=False
    ),
]
AclFileOption = Annotated[
    Path | None,
    typer.Option("-f", "--file", help=_FILE_HELP, exists=True, dir_okay=False, readable=True, show_default=False),
]
PruneOption = Annotated[
    bool, typer.Option("--prune", help="Also remove ACLs the cluster has and the file does not (default: only add).")
]


class StepKind(Enum):
    ADD = "add"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    permission: AclPermissionType
    bindings: tuple[AclBinding, ...]

    def describe(self) -> str:
        verb = "add" if self.kind is StepKind.ADD else "remove"
        return f"{verb} {len(self.bindings)} {self.permission} ACL(s)"


@dataclass(frozen=True, slots=True)
class AclPlan:
    """The difference between the cluster's ACLs and the file's, split by what ``apply`` does with each."""

    to_add: tuple[AclBinding, ...]
    to_remove: tuple[AclBinding, ...]
    unchanged: tuple[AclBinding, ...]

    @property
    def has_changes(self) -> bool:
        return bool(self.to_add or self.to_remove)

    def steps(self, prune: bool) -> list[Step]:
        """The safe order (module docstring); empty steps are left out."""
        allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
        steps = [
            Step(StepKind.ADD, deny, _only(self.to_add, deny)),
            Step(StepKind.ADD, allow, _only(self.to_add, allow)),
        ]
        if prune:
            steps += [
                Step(StepKind.REMOVE, allow, _only(self.to_remove, allow)),
                Step(StepKind.REMOVE, deny, _only(self.to_remove, deny)),
            ]
        return [step for step in steps if step.bindings]


def _only(bindings: tuple[AclBinding, ...], permission: AclPermissionType) -> tuple[AclBinding, ...]:
    return tuple(b for b in bindings if b.entry.permission_type is permission)


def sort_key(b: AclBinding) -> tuple[str, int, str, int, str, int, int]:
    p, e = b.pattern, b.entry
    return (
        e.principal,
        p.resource_type.code,
        p.name,
        p.pattern_type.code,
        e.host,
        e.operation.code,
        e.permission_type.code,
    )


def compute_plan(current: Iterable[AclBinding], desired: Iterable[AclBinding]) -> AclPlan:
    now, wanted = set(current), set(desired)
    return AclPlan(
        to_add=tuple(sorted(wanted - now, key=sort_key)),
        to_remove=tuple(sorted(now - wanted, key=sort_key)),
        unchanged=tuple(sorted(now & wanted, key=sort_key)),
    )


def render_plan(plan: AclPlan, prune: bool, console: Console, show_unchanged: bool = False) -> None:
    """The diff, per principal: ``+`` to add (green), ``-`` to remove (red), ``~`` would be removed only with
    ``--prune`` (yellow), ``=`` unchanged (dim, with ``--show-unchanged``); then the steps and a summary."""
    rows: list[tuple[AclBinding, str, str]] = [(b, "+", "green") for b in plan.to_add]
    rows += [(b, "-", "red") if prune else (b, "~", "yellow") for b in plan.to_remove]
    if show_unchanged:
        rows += [(b, "=", "dim") for b in plan.unchanged]
    principal = None
    for binding, mark, style in sorted(rows, key=lambda row: sort_key(row[0])):
        if binding.entry.principal != principal:
            principal = binding.entry.principal
            console.print(Text(principal, style="bold"))
        console.print(Text(f"  {mark} {pattern_text(binding.pattern)} {entry_text(binding.entry)}", style=style))
    if rows:
        console.print()
    for number, step in enumerate(plan.steps(prune), start=1):
        console.print(f"Step {number}: {step.describe()}")
    removals = len(plan.to_remove) if prune else 0
    console.print(
        Text(
            f"Plan: {len(plan.to_add)} to add, {removals} to remove, {len(plan.unchanged)} unchanged.",
            style="bold" if plan.has_changes else "",
        )
    )
    if plan.to_remove and not prune:
        console.print(
            Text(f"{len(plan.to_remove)} ACL(s) on the cluster are not in the file (~); --prune would remove them.")
        )


def read_cluster(admin: KafkaAdmin) -> list[AclBinding]:
    """Every ACL on the cluster that librdkafka can represent (warning about the others, which stay untouched)."""
    described = admin.describe_acls(AclBindingFilter.ANY)
    if described.unrepresentable:
        warn(
            f"{described.unrepresentable} ACL(s) on the cluster use a resource type or operation librdkafka 2.16 "
            "cannot decode (USER, DELEGATION_TOKEN, CREATE_TOKENS, DESCRIBE_TOKENS, AUTO_CREATE); they are left "
            "as they are and not compared"
        )
    return list(described.bindings)


def acl_file(positional: Path | None, option: Path | None) -> Path:
    """The one ACL file given, as an argument or with ``-f``; a clear error (exit 2) for none or two."""
    if positional is not None and option is not None and positional != option:
        fail(f"give the ACL file either as an argument or with -f, not both ({positional} and {option})", 2)
    chosen = positional or option
    if chosen is None:
        fail("no ACL file: give it as an argument (kafkaguard plan candidate.yaml) or with -f FILE", 2)
    return chosen


def load_desired(path: Path) -> list[AclBinding]:
    try:
        return load_acl_file(path)
    except AclFileError as e:
        fail(f"{len(e.problems)} problem(s) in the ACL file:\n{e}", 2)


def plan(
    file_argument: AclFileArgument = None,
    bootstrap_server: BootstrapServer = "",
    file: AclFileOption = None,
    command_config: CommandConfig = None,
    prune: PruneOption = False,
    show_unchanged: Annotated[bool, typer.Option("--show-unchanged", help="List unchanged ACLs too.")] = False,
    detailed_exitcode: Annotated[
        bool, typer.Option("--detailed-exitcode", help="Exit 0 when nothing would change, 2 when something would.")
    ] = False,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> None:
    """Show what `apply` would change on the cluster to match the ACL file, and in which order. Changes nothing."""
    desired = load_desired(acl_file(file_argument, file))
    bootstrap_server = require_bootstrap(bootstrap_server)
    try:
        current = read_cluster(connect(bootstrap_server, command_config, timeout))
    except CliError as e:
        fail(str(e), e.exit_code)
    result = compute_plan(current, desired)
    render_plan(result, prune, Console(soft_wrap=True, highlight=False), show_unchanged)
    if detailed_exitcode and (result.to_add or (prune and result.to_remove)):
        raise typer.Exit(code=2)
