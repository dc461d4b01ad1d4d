"""The pipeline's user-facing error: bad input or environment, reported as one clear message."""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class PipelineError(KafkaguardError):
    """Something the user can fix: a missing log or ACL file, an invalid ACL document, no suitable Java."""
