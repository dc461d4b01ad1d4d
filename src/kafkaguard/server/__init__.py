"""The Kafka-protocol server (asyncio). Needs the ``server`` extra (kio)."""
