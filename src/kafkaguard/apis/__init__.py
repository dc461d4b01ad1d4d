"""The Kafka APIs answered from kafkaguard's own store, the same way by ``kafkaguard serve`` and by the proxy (which
never forwards them): ACLs (``acls``, with ``acl_encoding``), SCRAM credentials (``scram``) and client quotas
(``quotas``), plus what both sides' answers share (``operations``, ``denials``). ``STORE_HANDLERS`` is their table."""

from __future__ import annotations

from kafkaguard.apis.acls import create_acls, delete_acls, describe_acls
from kafkaguard.apis.quotas import alter_client_quotas, describe_client_quotas
from kafkaguard.apis.scram import alter_user_scram_credentials, describe_user_scram_credentials
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import Versions
from kafkaguard.protocol.messages import (
    ALTER_CLIENT_QUOTAS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
)
from kafkaguard.protocol.replies import Response
from kafkaguard.protocol.routes import Routed, route, routes
from kafkaguard.protocol.scope import RequestScope

#: A handler of one API as a table holds it: the request's scope and its decoded body in, the response out
#: (registered with ``route``, which checks the handler's body parameter against its API's request union).
Handler = Routed[RequestScope, Response]

#: The versions of the store's APIs that server and proxy both offer (the proxy never forwards them).
STORE_VERSIONS: Versions = {
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}

STORE_HANDLERS: dict[ApiKey, Handler] = routes(
    route(DESCRIBE_ACLS, describe_acls),
    route(CREATE_ACLS, create_acls),
    route(DELETE_ACLS, delete_acls),
    route(DESCRIBE_USER_SCRAM_CREDENTIALS, describe_user_scram_credentials),
    route(ALTER_USER_SCRAM_CREDENTIALS, alter_user_scram_credentials),
    route(DESCRIBE_CLIENT_QUOTAS, describe_client_quotas),
    route(ALTER_CLIENT_QUOTAS, alter_client_quotas),
)
if set(STORE_HANDLERS) != set(STORE_VERSIONS):  # each offered API has its handler, checked at import
    raise ImportError(f"store APIs without a handler or versions: {set(STORE_HANDLERS) ^ set(STORE_VERSIONS)}")
