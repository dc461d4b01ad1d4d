"""The APIs and versions ``kafkaguard serve`` offers: what every connection answers itself (ApiVersions, SASL:
``protocol.connection.CONNECTION_VERSIONS``), the store's APIs it shares with the proxy (``apis.STORE_VERSIONS``),
and its own (``server.handlers``: Metadata, DescribeCluster, CreateTopics, DeleteTopics). The connection is handed
them by the dispatcher (``server.dispatch``), as the proxy's negotiated versions are by its own; the generated
messages and builders (``scripts/gen_messages.py``) cover them."""

from __future__ import annotations

from kafkaguard.apis import STORE_VERSIONS
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import Versions
from kafkaguard.protocol.connection import CONNECTION_VERSIONS

#: The server's own APIs: the topic catalog it keeps and the cluster it stands for.
SERVER_APIS: Versions = {
    ApiKey.METADATA: (1, 12),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
}

#: Everything the server offers, inclusive ranges.
SERVER_VERSIONS: Versions = {**CONNECTION_VERSIONS, **SERVER_APIS, **STORE_VERSIONS}
