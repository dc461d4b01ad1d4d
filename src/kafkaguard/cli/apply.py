"""``kafkaguard apply FILE`` (or ``-f FILE``): make the cluster's ACLs match the file, in the safe order of ``plan``.

Each step is one request (CreateAcls or DeleteAcls with exact filters). A failed step stops the run before the next
one, so a removal never happens after a failed addition: the cluster is left in an intermediate state that the
ordering guarantees is safe, and running ``apply`` again finishes the job.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from kafkaguard.cli.client import DEFAULT_TIMEOUT, CliError, Failure, KafkaAdmin
from kafkaguard.cli.connection import BootstrapServer, CommandConfig, Timeout, connect, require_bootstrap
from kafkaguard.cli.output import fail
from kafkaguard.cli.plan import (
    AclFileArgument,
    AclFileOption,
    PruneOption,
    Step,
    StepKind,
    acl_file,
    compute_plan,
    load_desired,
    read_cluster,
)
from kafkaguard.cli.plan import render_plan as render


def run_step(admin: KafkaAdmin, step: Step) -> list[Failure]:
    if step.kind is StepKind.ADD:
        return admin.create_acls(list(step.bindings))
    _, failures = admin.delete_acls([b.to_filter() for b in step.bindings])
    return failures


def apply(
    file_argument: AclFileArgument = None,
    bootstrap_server: BootstrapServer = "",
    file: AclFileOption = None,
    command_config: CommandConfig = None,
    prune: PruneOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and change nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Do not ask before removing ACLs (--prune).")] = False,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> None:
    """Make the cluster's ACLs match the file: add new DENYs, add new ALLOWs, then (with --prune) remove old
    ALLOWs and old DENYs, so that access is never wider than the old or the new ACLs allow."""
    desired = load_desired(acl_file(file_argument, file))
    bootstrap_server = require_bootstrap(bootstrap_server)
    console = Console(soft_wrap=True, highlight=False)
    try:
        admin = connect(bootstrap_server, command_config, timeout, client_id="kafkaguard-apply")
        plan = compute_plan(read_cluster(admin), desired)
        render(plan, prune, console)
        steps = plan.steps(prune)
        if dry_run:
            console.print("Dry run: nothing was changed.")
            return
        if not steps:
            console.print("Nothing to do: the cluster already matches the file.")
            return
        removals = sum(len(s.bindings) for s in steps if s.kind is StepKind.REMOVE)
        if removals and not force:
            typer.echo(f"Remove {removals} ACL(s) from the cluster? (y/n)")
            if sys.stdin.readline().strip().lower() != "y":
                fail("aborted: nothing was changed", 1)
        for number, step in enumerate(steps, start=1):
            failures = run_step(admin, step)
            if failures:
                for failure in failures:
                    typer.secho(f"error: {failure}", fg=typer.colors.RED, err=True)
                done = f"steps 1-{number - 1} were applied" if number > 1 else "nothing was changed"
                fail(f"step {number} ({step.describe()}) failed; stopped before the next step ({done})", 1)
            console.print(f"Step {number}: {step.describe()}: done")
        console.print("Apply complete.")
    except CliError as e:
        fail(str(e), e.exit_code)
