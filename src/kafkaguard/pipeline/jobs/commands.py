"""The Typer commands of the four jobs, defined once: ``kafkaguard audit <job>`` registers them
(``kafkaguard.cli.audit``) and each job's ``main()`` runs the same function for ``spark-submit`` /
``python -m kafkaguard.pipeline.jobs.<job>``.

Local input (log paths, ACL files) is checked before Spark starts. Bad input (missing file, invalid ACL JSON,
no Java) ends with one ``error: …`` line on stderr and exit code 2; a failure inside Spark with exit code 1;
never a traceback. pyspark is imported only when a command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from kafkaguard.errors import KafkaguardError
from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.jobs.common import AuthorizerOptions, JobResult, JobRun, load_acls
from kafkaguard.pipeline.readers import check_paths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class LogFormat(StrEnum):
    kafkaguard = "kafkaguard"
    kafka_log = "kafka-log"


LogOption = Annotated[
    list[str],
    typer.Option(
        "--log",
        metavar="PATH",
        help="Audit log file, directory or glob (gz allowed; local or any Hadoop path). Repeatable.",
    ),
]
OutOption = Annotated[str, typer.Option("--out", metavar="DIR", help="Output directory (Parquet tables, report.html).")]
FormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--format", help="kafkaguard: kafkaguard JSON lines (or Parquet); kafka-log: Kafka's kafka-authorizer.log."
    ),
]
MasterOption = Annotated[
    str | None, typer.Option("--master", metavar="URL", help="Spark master (default local[*] or spark-submit's).")
]
SuperUsersOption = Annotated[str, typer.Option("--super-users", help="super.users as on serve: 'User:admin;User:ops'.")]
AllowEveryoneOption = Annotated[
    bool,
    typer.Option("--allow-everyone-if-no-acl-found", help="Allow access to resources no ACL applies to (as on serve)."),
]

Body = Callable[["SparkSession", JobRun], JobResult]


def _fail(message: str, code: int) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg="red")
    return typer.Exit(code)


def _acls_loader(path: str, name: str, options: AuthorizerOptions) -> Callable[[SparkSession], AclSet]:
    """Load a local ACL file now (so errors come before Spark starts); a remote one once Spark runs."""
    if "://" in path and not path.startswith("file:"):
        return lambda spark: load_acls(spark, path, name, options)
    loaded = load_acls(None, path, name, options)
    return lambda _spark: loaded


def execute(job: str, logs: list[str], out: str, master: str | None, prepare: Callable[[], Body]) -> JobResult:
    """Check input, start (or reuse) the session, run the job, print its summary; errors → one line + exit."""
    try:
        check_paths(logs)
        body = prepare()
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession

        from kafkaguard.pipeline.session import start_spark

        created = SparkSession.getActiveSession() is None
        spark = start_spark(f"kafkaguard-audit-{job}", master)
        try:
            run = JobRun(job, out)
            result = body(spark, run)
        except (PySparkException, Py4JError) as e:
            text = str(e).strip()
            raise _fail("Spark failed: " + (text.splitlines()[0] if text else type(e).__name__), 1) from None
        finally:
            if created:
                spark.stop()
    except KafkaguardError as e:
        raise _fail(str(e), 2) from None
    run.print_summary(Console())
    return result


AclsOption = Annotated[str, typer.Option("--acls", metavar="FILE", help="ACL set (kafkaguard JSON export).")]
#: ``run(spark, logs, acls, out, fmt, job_run)`` of a job that reads one ACL set (replay, usage).
SingleSetRun = Callable[["SparkSession", list[str], AclSet, str, str, JobRun], JobResult]


def _execute_with_acl_set(
    name: str,
    log: list[str],
    acls: str,
    out: str,
    log_format: LogFormat,
    master: str | None,
    options: AuthorizerOptions,
    job_run: Callable[[], SingleSetRun],
) -> None:
    """Run a job that reads one ACL set; ``job_run`` imports the job lazily (pyspark loads only when it runs)."""

    def prepare() -> Body:
        load = _acls_loader(acls, "acls", options)

        def body(spark: SparkSession, run: JobRun) -> JobResult:
            return job_run()(spark, log, load(spark), out, log_format.value, run)

        return body

    execute(name, log, out, master, prepare)


def _replay_run() -> SingleSetRun:
    from kafkaguard.pipeline.jobs import replay as job

    return job.run


def _usage_run() -> SingleSetRun:
    from kafkaguard.pipeline.jobs import usage as job

    return job.run


def replay(
    log: LogOption,
    acls: AclsOption,
    out: OutOption,
    log_format: FormatOption = LogFormat.kafkaguard,
    master: MasterOption = None,
    super_users: SuperUsersOption = "",
    allow_everyone_if_no_acl_found: AllowEveryoneOption = False,
) -> None:
    """Decide every logged request under an ACL set; report how often the logged decision differs."""
    options = AuthorizerOptions(super_users, allow_everyone_if_no_acl_found)
    _execute_with_acl_set("replay", log, acls, out, log_format, master, options, _replay_run)


def simulate(
    log: LogOption,
    current: Annotated[str, typer.Option("--current", metavar="FILE", help="Current ACL set (JSON export).")],
    proposed: Annotated[str, typer.Option("--proposed", metavar="FILE", help="Proposed ACL set (JSON export).")],
    out: OutOption,
    log_format: FormatOption = LogFormat.kafkaguard,
    master: MasterOption = None,
    super_users: SuperUsersOption = "",
    allow_everyone_if_no_acl_found: AllowEveryoneOption = False,
) -> None:
    """Current vs proposed ACL set over the logged traffic: every access whose decision flips."""
    options = AuthorizerOptions(super_users, allow_everyone_if_no_acl_found)

    def prepare() -> Body:
        load_current = _acls_loader(current, "current", options)
        load_proposed = _acls_loader(proposed, "proposed", options)

        def body(spark: SparkSession, run: JobRun) -> JobResult:
            from kafkaguard.pipeline.jobs import simulate as job

            return job.run(spark, log, load_current(spark), load_proposed(spark), out, log_format.value, run)

        return body

    execute("simulate", log, out, master, prepare)


def usage(
    log: LogOption,
    acls: AclsOption,
    out: OutOption,
    log_format: FormatOption = LogFormat.kafkaguard,
    master: MasterOption = None,
    super_users: SuperUsersOption = "",
    allow_everyone_if_no_acl_found: AllowEveryoneOption = False,
) -> None:
    """Hits per ACL, never-used and shadowed ACLs, top denied principals and resources."""
    options = AuthorizerOptions(super_users, allow_everyone_if_no_acl_found)
    _execute_with_acl_set("usage", log, acls, out, log_format, master, options, _usage_run)


def recommend(
    log: LogOption,
    out: OutOption,
    principal: Annotated[
        str | None, typer.Option("--principal", help="Only this principal (Type:Name); default every principal.")
    ] = None,
    log_format: FormatOption = LogFormat.kafkaguard,
    master: MasterOption = None,
    super_users: SuperUsersOption = "",
) -> None:
    """The smallest ACL set allowing exactly each principal's observed allowed traffic (kafkaguard JSON)."""

    def prepare() -> Body:
        from kafkaguard.authorizer import parse_super_users
        from kafkaguard.errors import InvalidConfigError
        from kafkaguard.pipeline.errors import PipelineError

        try:
            skipped = parse_super_users(super_users)
        except InvalidConfigError as e:
            raise PipelineError(str(e)) from e

        def body(spark: SparkSession, run: JobRun) -> JobResult:
            from kafkaguard.pipeline.jobs import recommend as job

            return job.run(spark, log, out, log_format.value, principal, skipped, run)

        return body

    execute("recommend", log, out, master, prepare)


COMMANDS: dict[str, Callable[..., None]] = {
    "replay": replay,
    "simulate": simulate,
    "usage": usage,
    "recommend": recommend,
}


def register(app: typer.Typer) -> None:
    """Add the four job commands to a Typer app (``kafkaguard audit``)."""
    for name, command in COMMANDS.items():
        app.command(name)(command)


def run_single(job: str, args: list[str] | None = None) -> None:
    """Run one job's command with its flags from ``args`` (default ``sys.argv``): the spark-submit entry point."""
    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    app.command(job)(COMMANDS[job])
    app(args=args, prog_name=f"kafkaguard.pipeline.jobs.{job}")
