"""The jobs' one command line, shared by every way of running them::

    python -m kafkaguard.pipeline.jobs <job> [flags]           # local[*], or --master / --remote
    spark-submit "$(python -m kafkaguard.pipeline.jobs --path)" <job> [flags]
    kafkaguard audit <job> [flags]                              # the CLI forwards its arguments here

argparse rather than Typer: a job must run where only ``kafkaguard[spark]`` is installed (a cluster's Python has
no CLI framework), so the flags are defined here, once, and ``kafkaguard.cli.audit`` passes its arguments through.

Local input (log paths, ACL files) is checked before Spark starts. Bad input (missing file, invalid ACL JSON,
no Java, a bad flag) ends with one ``error: …`` line on stderr and exit code 2; a failure inside Spark with exit
code 1; never a traceback. pyspark is imported only once a job runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from kafkaguard.errors import KafkaguardError
from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.jobs.common import (
    AuthorizerOptions,
    JobResult,
    JobRun,
    load_acls,
    require_known_super_users,
)
from kafkaguard.pipeline.readers import check_paths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS = ("kafkaguard", "kafka-log")

#: job name → its one-line description (``--help`` and ``kafkaguard audit --help``).
JOBS = {
    "replay": "Decide every logged request under an ACL set; report how often the logged decision differs.",
    "simulate": "Current vs proposed ACL set over the logged traffic: every access whose decision flips.",
    "usage": "Hits per ACL, never-used and shadowed ACLs, top denied principals and resources.",
    "recommend": "The smallest ACL set allowing exactly each principal's observed allowed traffic (kafkaguard JSON).",
}

Body = Callable[["SparkSession", JobRun], JobResult]


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one ``error: …`` line and exit 2, as every other input error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _common(parser: argparse.ArgumentParser, acl_options: bool = True) -> None:
    parser.add_argument(
        "--log",
        metavar="PATH",
        action="append",
        required=True,
        help="Audit log file, directory or glob (gz allowed; local or any Hadoop path). Repeatable.",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="Output directory (Parquet tables, report.html).")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="kafkaguard",
        help="kafkaguard: kafkaguard JSON lines (or Parquet); kafka-log: Kafka's kafka-authorizer.log.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", metavar="URL", help="Spark master (default local[*] or spark-submit's).")
    where.add_argument("--remote", metavar="URL", help="Spark Connect server (sc://host:port) instead of a master.")
    parser.add_argument(
        "--super-users",
        default=None,
        help="super.users as on serve: 'User:admin;User:ops' ('' for none). Default: kafkaguard audit reads them "
        "as the server does (--config, KAFKAGUARD_* variables, the data directory's served-settings.json); "
        "unknown, a log that records super-user decisions is refused.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="The server's YAML config file, for its super_users and allow_everyone_if_no_acl_found "
        "(kafkaguard audit only: it needs the cli extra).",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="The server's data directory, for the settings it recorded (served-settings.json; default: "
        "the config's data_dir, ./data) (kafkaguard audit only).",
    )
    if acl_options:
        parser.add_argument(
            "--allow-everyone-if-no-acl-found",
            action="store_true",
            help="Allow access to resources no ACL applies to (as on serve).",
        )


def parser() -> argparse.ArgumentParser:
    root = _Parser(prog="kafkaguard audit", description="Audit-log analytics on Spark.")
    root.add_argument("--path", action="store_true", help="Print this entry point's file (for spark-submit) and exit.")
    jobs = root.add_subparsers(dest="job", metavar="JOB", parser_class=_Parser)
    for name, description in JOBS.items():
        job = jobs.add_parser(name, help=description, description=description)
        _common(job, acl_options=name != "recommend")
        if name in ("replay", "usage"):
            job.add_argument("--acls", metavar="FILE", required=True, help="ACL set (kafkaguard JSON export).")
        if name == "simulate":
            job.add_argument("--current", metavar="FILE", required=True, help="Current ACL set (JSON export).")
            job.add_argument("--proposed", metavar="FILE", required=True, help="Proposed ACL set (JSON export).")
        if name == "usage":
            job.add_argument(
                "--state",
                metavar="DIR",
                help="Incremental runs: keep the hits in DIR and read only log files not processed before.",
            )
            job.add_argument("--rebuild", action="store_true", help="With --state: forget it and read every file.")
            job.add_argument(
                "--unused-for",
                metavar="WINDOW",
                help="List the ACLs no request matched in this window (90d, 36h) ending with the newest request.",
            )
        if name == "recommend":
            job.add_argument("--principal", help="Only this principal (Type:Name); default every principal.")
    return root


@dataclass(frozen=True, slots=True)
class Where:
    """Where Spark runs: a master URL, a Spark Connect URL, or neither (local[*] or spark-submit's)."""

    master: str | None = None
    remote: str | None = None


def _acls_loader(path: str, name: str, options: AuthorizerOptions) -> Callable[[SparkSession], AclSet]:
    """Load a local ACL file now (so errors come before Spark starts); a remote one once Spark runs."""
    if "://" in path and not path.startswith("file:"):
        return lambda spark: load_acls(spark, path, name, options)
    loaded = load_acls(None, path, name, options)
    return lambda _spark: loaded


def execute(job: str, logs: Sequence[str], out: str, where: Where, prepare: Callable[[], Body]) -> JobResult:
    """Check input, start (or reuse) the session, run the job, print its summary.

    :raises KafkaguardError: bad input (exit 2).
    :raises SparkFailed: Spark failed (exit 1).
    """
    check_paths(logs)
    body = prepare()
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from kafkaguard.pipeline.session import start_spark

    spark_errors: tuple[type[BaseException], ...] = (PySparkException,)
    try:
        from py4j.protocol import Py4JError

        spark_errors += (Py4JError,)
    except ImportError:  # pragma: no cover - a Spark Connect-only client has no py4j
        pass
    created = SparkSession.getActiveSession() is None
    spark = start_spark(f"kafkaguard-audit-{job}", where.master, remote=where.remote)
    run = JobRun(job, out)
    try:
        result = body(spark, run)
    except spark_errors as e:
        text = str(e).strip()
        raise SparkFailed("Spark failed: " + (text.splitlines()[0] if text else type(e).__name__)) from None
    finally:
        if created:
            spark.stop()
    run.print_summary()
    return result


class SparkFailed(PipelineError):
    """A job failed inside Spark (exit code 1, where every other ``KafkaguardError`` is bad input: exit 2; ``main``
    catches it first)."""


def _prepare(args: argparse.Namespace) -> Callable[[], Body]:
    """The job's body, with local ACL files loaded before Spark starts; jobs are imported only when they run.
    Without ``--super-users``, the body first checks that the log records no super-user decision (see
    ``require_known_super_users``)."""
    if args.config is not None or args.data_dir is not None:
        raise PipelineError(
            "--config and --data-dir are read by `kafkaguard audit` (the cli extra); here, give the server's "
            "super users with --super-users 'User:admin;…' ('' for none)"
        )
    options = AuthorizerOptions(args.super_users or "", getattr(args, "allow_everyone_if_no_acl_found", False))
    logs, out, fmt = list(args.log), args.out, args.format

    def prepare() -> Body:
        body = _body()
        if args.super_users is not None:
            return body

        def checked(spark: SparkSession, run: JobRun) -> JobResult:
            require_known_super_users(spark, run, logs, fmt)
            return body(spark, run)

        return checked

    def _body() -> Body:
        if args.job in ("replay", "usage"):
            load = _acls_loader(args.acls, "acls", options)

            window = None
            if args.job == "usage":
                from kafkaguard.pipeline.jobs.usage_state import parse_window

                if args.rebuild and not args.state:
                    raise PipelineError("--rebuild needs --state DIR")
                window = parse_window(args.unused_for) if args.unused_for else None

            def single(spark: SparkSession, run: JobRun) -> JobResult:
                if args.job == "replay":
                    from kafkaguard.pipeline.jobs import replay

                    return replay.run(spark, logs, load(spark), out, fmt, run)
                from kafkaguard.pipeline.jobs import usage

                return usage.run(spark, logs, load(spark), out, fmt, run, args.state, window, args.rebuild)

            return single
        if args.job == "simulate":
            load_current = _acls_loader(args.current, "current", options)
            load_proposed = _acls_loader(args.proposed, "proposed", options)

            def simulate(spark: SparkSession, run: JobRun) -> JobResult:
                from kafkaguard.pipeline.jobs import simulate as job

                return job.run(spark, logs, load_current(spark), load_proposed(spark), out, fmt, run)

            return simulate
        from kafkaguard.authorizer import parse_super_users
        from kafkaguard.errors import InvalidConfigError

        try:
            skipped = parse_super_users(args.super_users or "")
        except InvalidConfigError as e:
            raise PipelineError(str(e)) from e

        def recommend(spark: SparkSession, run: JobRun) -> JobResult:
            from kafkaguard.pipeline.jobs import recommend as job

            return job.run(spark, logs, out, fmt, args.principal, skipped, run)

        return recommend

    return prepare


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job from its command line; returns the exit code (0, 1 Spark failed, 2 bad input)."""
    args = parser().parse_args(argv)
    if args.path:
        sys.stdout.write(__file__.replace("entry.py", "__main__.py") + "\n")
        return 0
    if args.job is None:
        parser().print_help()
        return 2
    try:
        execute(args.job, args.log, args.out, Where(args.master, args.remote), _prepare(args))
    except SparkFailed as e:  # before KafkaguardError: it is one, with its own exit code
        sys.stderr.write(f"error: {e}\n")
        return 1
    except KafkaguardError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    return 0
