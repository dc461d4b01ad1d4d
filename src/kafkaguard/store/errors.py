"""Errors of the store layer (``StoreError``, ``SchemaVersionError``, ``StoreUnavailableError``); the tree is drawn in
``kafkaguard.errors``."""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class StoreError(KafkaguardError):
    """The store failed; the message names the database and what was being done, the cause is chained."""


class SchemaVersionError(StoreError):
    """The database's schema is newer than this version of kafkaguard knows: upgrade kafkaguard."""


class StoreUnavailableError(StoreError):
    """The store's server (PostgreSQL) cannot be reached, or the connection broke: nothing was written, or, when
    the connection broke during the commit, the write may have landed. Retriable: the same call may succeed once
    the server is back (Kafka's retriable error on the wire, HTTP 503 on REST). The message never holds a password.
    """
