"""The audit trail a server process writes: ``writer`` (``AuditLog``: envelopes made and written off the event loop),
``sinks`` (where they go: the JSON lines file), ``kafka_sink`` (a Kafka topic through the spool of
``audit.records.spool``) and ``from_settings`` (the trail a process runs with, from its settings)."""
