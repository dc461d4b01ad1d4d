"""Errors of the store layer (``StoreError``, ``SchemaVersionError``); the tree is drawn in ``kafkaguard.errors``."""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class StoreError(KafkaguardError):
    """The store failed; the message names the database file and what was being done, the cause is chained."""


class SchemaVersionError(StoreError):
    """The database's schema is newer than this version of kafkaguard knows: upgrade kafkaguard."""
