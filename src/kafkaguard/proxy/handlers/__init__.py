"""One module per group of APIs; each handler authorizes a request as ``KafkaApis`` does, forwards what is
allowed, and merges the denied items' errors into the upstream's answer (``connection.HANDLERS`` lists them)."""
