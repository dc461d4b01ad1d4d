"""Passwords checked against the stored SCRAM credentials (no plaintext is ever stored): bounded PBKDF2 on a
pool of its own, a budget of failed checks per client address, and a cache of recent successes (``checker``,
``throttle``). Used by the console's HTTP Basic logins and the Kafka listeners' SASL/PLAIN."""
