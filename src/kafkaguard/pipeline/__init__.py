"""The audit pipeline on PySpark (replay, simulate, usage, recommend).

Layout (STYLE.md §6): ``session`` builds the one SparkSession; ``readers`` extract audit records from files;
``transforms`` are pure DataFrame → DataFrame functions; ``deciding`` runs the core StandardAuthorizer inside
``mapInArrow``; ``recommend`` and ``report`` are plain Python; ``jobs/*`` are the only modules doing I/O.
"""

from __future__ import annotations

from kafkaguard.pipeline.errors import PipelineError

__all__ = ["PipelineError"]
