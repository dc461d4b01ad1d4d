"""Errors of the store layer (part of the one tree rooted at ``KafkaguardError``).

::

    KafkaguardError
     └── StoreError                    the database could not be opened, read or written (cause chained)
          └── SchemaVersionError        the database was written by a newer kafkaguard
"""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class StoreError(KafkaguardError):
    """The store failed; the message names the database file and what was being done, the cause is chained."""


class SchemaVersionError(StoreError):
    """The database's schema is newer than this version of kafkaguard knows: upgrade kafkaguard."""
