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

plus ``--master URL`` or ``--remote sc://…``, ``--super-users`` and ``--allow-everyone-if-no-acl-found``; and, not a
Spark job (typer's own flags)::

    kafkaguard audit collect   --bootstrap-server HOST:PORT --topic T --to DIR [--command-config FILE] [...]

A usage-mode record counts as its ``count`` of requests. ``simulate``, ``usage`` and ``recommend`` refuse (exit code
2) a log that holds no allowed decision: one written with ``audit_mode: denied`` would make every ACL look unused.
"""

from __future__ import annotations

import typer

from kafkaguard.cli.collect import collect
from kafkaguard.cli.shadow_report import shadow_report
from kafkaguard.pipeline.jobs.entry import JOBS, main

app = typer.Typer(
    no_args_is_help=True,
    help="Audit-log analytics on Spark: replay, simulate ACL changes, ACL usage, least-privilege ACLs.",
)

#: Every argument, ``--help`` included, goes to the job's own parser.
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _command(job: str) -> None:
    def forward(ctx: typer.Context) -> None:
        raise typer.Exit(main([job, *ctx.args]))

    forward.__doc__ = JOBS[job] + f" (flags: kafkaguard audit {job} --help)"
    app.command(job, context_settings=_PASS_THROUGH, add_help_option=False)(forward)


for _job in JOBS:
    _command(_job)

app.command("shadow-report")(shadow_report)
app.command("collect")(collect)
