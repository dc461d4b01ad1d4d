"""L5: the Kafka-protocol server (asyncio). Needs the ``server`` extra (kio)."""
