"""The one SQL implementation of the store's table sets, for SQLite (``store.sqlite``) and PostgreSQL
(``store.postgres``).

The statements, the change log, the version counters and the composing ``SqlStore`` are written once; what truly
differs between the databases is data in a ``Dialect`` (``dialect``: placeholders, counter locking, value lists,
UUID and JSON columns), and what differs in how they are driven is each database's connection, behind the
``Database`` protocol (``transaction``: opening and committing transactions, turning driver errors into
``StoreError``, polling a counter cheaply). Each database keeps only its connection, its schema and, for PostgreSQL,
its change listener.

One module per table set: ``acls`` (with ``acl_rows``), ``credentials``, ``topics``, ``quotas``, ``groups``, composed
into ``SqlStore`` (``store``). This package imports no driver; nothing outside the stores knows SQL.
"""
