"""The audit trail: ``records`` (what an event is — the authorization record, the CloudEvents envelope, Kafka's own
authorizer log, the statistics; standard library only, shared with the Spark pipeline) and ``trail`` (the writer a
server process runs and its sinks: the JSON lines file and a Kafka topic through an on-disk spool)."""
