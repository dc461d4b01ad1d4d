"""``kafkaguard proxy``, the authorizing proxy in front of a real Kafka cluster.

Clients log in to the proxy with kafkaguard's SCRAM credentials; every request is authorized as Kafka's
``KafkaApis`` would authorize it with kafkaguard's ACLs (``authorizer.requests``) and what is allowed is forwarded
to the upstream broker the client meant, under the proxy's own service credential. See ``connection`` for the path
of one request and ``nodes`` for how clients reach every upstream broker through the proxy.
"""
