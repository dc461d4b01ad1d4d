"""``kafkaguard audit replay|simulate|usage|recommend``: the audit pipeline on Spark; ``audit collect`` (the audit
topic into a Parquet dataset those jobs read, ``kafkaguard.cli.collect``); and ``audit shadow-report`` (local,
``cli.shadow_report``): the shadow ACL flips of live traffic.

The jobs' flags are defined once, in ``kafkaguard.pipeline.jobs.entry`` (argparse, so a job runs where only
``kafkaguard[spark]`` is installed); each command here passes its arguments through unchanged, so
``kafkaguard audit <job>``, ``python -m kafkaguard.pipeline.jobs <job>`` and ``spark-submit`` accept exactly the
same flags::

    kafkaguard audit replay    --log PATH... --acls FILE --out DIR [--format kafkaguard|kafka-log]
    kafkaguard audit simulate  --log PATH... --current FILE --proposed FILE --out DIR [...]
    kafkaguard audit usage     --log PATH... --acls FILE --out DIR [...]
    kafkaguard audit recommend --log PATH... --out DIR [--principal P] [...]

plus ``--master URL`` or ``--remote sc://…``, ``--super-users`` and ``--allow-everyone-if-no-acl-found``. Without
``--super-users``, the super users (and the no-ACL rule) are read here as the server reads them: its config file
(``--config``), its ``KAFKAGUARD_*`` variables, and what it recorded in its data directory (``--data-dir``, default
the config's ``data_dir``: ``served-settings.json``), said on stderr; known from none of them, the job refuses a log
that records super-user decisions. And, not a Spark job (typer's own flags)::

    kafkaguard audit collect   --bootstrap-server HOST:PORT --topic T --to DIR [--command-config FILE] [...]

A usage-mode record counts as its ``count`` of requests. ``simulate``, ``usage`` and ``recommend`` refuse (exit code
2) a log that holds no allowed decision: one written with ``audit_mode: denied`` would make every ACL look unused.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kafkaguard.cli.collect import collect
from kafkaguard.cli.output import fail
from kafkaguard.cli.shadow_report import shadow_report
from kafkaguard.config import SERVED_SETTINGS_FILE, load_settings, with_served_settings
from kafkaguard.errors import KafkaguardError
from kafkaguard.pipeline.jobs.entry import JOBS, main

app = typer.Typer(
    no_args_is_help=True,
    help="Audit-log analytics on Spark: replay, simulate ACL changes, ACL usage, least-privilege ACLs.",
)

#: Every argument, ``--help`` included, goes to the job's own parser.
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _given(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _take(args: list[str], flag: str) -> str | None:
    """Remove ``flag VALUE`` / ``flag=VALUE`` from ``args``; its (last) value."""
    value = None
    i = 0
    while i < len(args):
        if args[i] == flag and i + 1 < len(args):
            value = args[i + 1]
            del args[i : i + 2]
        elif args[i].startswith(flag + "="):
            value = args[i].split("=", 1)[1]
            del args[i]
        else:
            i += 1
    return value


def with_servers_super_users(job: str, args: list[str]) -> list[str]:
    """``args`` with ``--super-users`` (and ``--allow-everyone-if-no-acl-found``) as the server decides, where not
    given: from its config file (``--config``), environment, or data directory's ``served-settings.json``
    (``--data-dir``); both flags are taken out (the job's parser accepts them only to say they are ours). Known
    from none, nothing is added and the job refuses a log with super-user decisions."""
    args = list(args)
    config, data_dir = _take(args, "--config"), _take(args, "--data-dir")
    if _given(args, "--super-users") or _given(args, "--help") or _given(args, "-h"):
        return args
    try:
        settings = load_settings(Path(config) if config else None, data_dir=Path(data_dir) if data_dir else None)
        settings, served_by = with_served_settings(settings)
    except KafkaguardError as e:
        fail(str(e), 2)
    if served_by is not None:
        source = f"as {served_by} recorded them in {settings.data_dir / SERVED_SETTINGS_FILE}"
    elif "super_users" in settings.model_fields_set:
        source = f"from {config}" if config else "from KAFKAGUARD_SUPER_USERS"
    else:
        return args
    typer.echo(f"(super users {settings.super_users or 'none'!s}: {source})", err=True)
    args += ["--super-users", settings.super_users]
    if (
        job != "recommend"
        and settings.allow_everyone_if_no_acl_found
        and not _given(args, "--allow-everyone-if-no-acl-found")
    ):
        args.append("--allow-everyone-if-no-acl-found")
    return args


def _command(job: str) -> None:
    def forward(ctx: typer.Context) -> None:
        raise typer.Exit(main([job, *with_servers_super_users(job, list(ctx.args))]))

    forward.__doc__ = JOBS[job] + f" (flags: kafkaguard audit {job} --help)"
    app.command(job, context_settings=_PASS_THROUGH, add_help_option=False)(forward)


for _job in JOBS:
    _command(_job)

app.command("shadow-report")(shadow_report)
app.command("collect")(collect)
