"""The README's "A first session" snippet, run by tests/docs/test_first_session_snippet.py (against a real server,
and with the server down)."""

from confluent_kafka.admin import (
    AdminClient,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

TIMEOUT = 10  # seconds per call: with the server down, .result() raises TimeoutError instead of waiting on

admin = AdminClient(
    {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": "change-me",
    }
)

# a user: the client salts and derives; only salt, StoredKey and ServerKey reach the store
admin.alter_user_scram_credentials(
    [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret")]
)["alice"].result(timeout=TIMEOUT)

# grant alice READ on every topic starting with "orders."
acl = AclBinding(
    ResourceType.TOPIC,
    "orders.",
    ResourcePatternType.PREFIXED,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
admin.create_acls([acl])[acl].result(timeout=TIMEOUT)

everything = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)
# [AclBinding(... orders. ... User:alice ... READ ... ALLOW)]
print(admin.describe_acls(everything).result(timeout=TIMEOUT))
admin.delete_acls([everything])[everything].result(timeout=TIMEOUT)
