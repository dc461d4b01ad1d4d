"""``kafkaguard audit replay|simulate|usage|recommend``: the audit pipeline on Spark.

The commands and their flags are defined once in ``kafkaguard.pipeline.jobs.commands`` and shared with the
``spark-submit`` entry points (``python -m kafkaguard.pipeline.jobs.<job>``), so both accept exactly the same
flags::

    kafkaguard audit replay    --log PATH... --acls FILE --out DIR [--format kafkaguard|kafka-log] [--master URL]
    kafkaguard audit simulate  --log PATH... --current FILE --proposed FILE --out DIR [...]
    kafkaguard audit usage     --log PATH... --acls FILE --out DIR [...]
    kafkaguard audit recommend --log PATH... --out DIR [--principal P] [...]

plus ``--super-users`` and ``--allow-everyone-if-no-acl-found`` as on ``serve``.
"""

from __future__ import annotations

import typer

from kafkaguard.pipeline.jobs.commands import register

app = typer.Typer(
    no_args_is_help=True,
    help="Audit-log analytics on Spark: replay, simulate ACL changes, ACL usage, least-privilege ACLs.",
)
register(app)
