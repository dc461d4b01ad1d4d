"""CreateAcls, DescribeAcls and DeleteAcls (v3) as the super user: the same requests to Kafka 3.9 and to kafkaguard,
answers compared (SEMANTICS.md §6–§9; deliberate differences §16.2, §16.3)."""

from __future__ import annotations

import importlib
from typing import Any

from kio.static.primitive import i8

from tests.kafka.differential.runner import (
    ALL,
    ALLOW,
    ALTER,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    MATCH,
    PREFIXED,
    PRINCIPAL_VALIDATED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    USER,
    WRITE,
    Documented,
    Pair,
    acl_filter,
    create_acls,
    creation,
    delete_acls,
    describe_acls,
    unknown_code,
)


def cleanup(admin: Pair) -> None:
    """Remove every ACL naming the test's token from both targets (compared like any other step)."""
    token = admin.token
    admin.step("cleanup: delete by principal", delete_acls(
        acl_filter(principal=f"User:{token}-a"), acl_filter(principal=f"User:{token}-b"),
        acl_filter(TOPIC, token, PREFIXED, principal="User:*"),
    ), settle=True, mine=True)  # fmt: skip
    assert admin.step("cleanup: nothing left", describe_acls(), mine=True)["resources"] == []


def setup_acls(admin: Pair) -> None:
    t = admin.token
    admin.step("setup ACLs", create_acls(
        creation(TOPIC, f"{t}-orders", LITERAL, f"User:{t}-a", READ),
        creation(TOPIC, f"{t}-orders", LITERAL, f"User:{t}-b", WRITE, DENY, host="10.0.0.1"),
        creation(TOPIC, f"{t}-ord", PREFIXED, f"User:{t}-a", DESCRIBE),
        creation(TOPIC, t, PREFIXED, "User:*", ALL, DENY, host="10.0.0.9"),
        creation(TOPIC, "*", LITERAL, f"User:{t}-a", READ),
        creation(GROUP, f"{t}-g", LITERAL, f"User:{t}-a", READ),
        creation(CLUSTER, "kafka-cluster", LITERAL, f"User:{t}-b", DESCRIBE),
        creation(TRANSACTIONAL_ID, f"{t}-tx", PREFIXED, f"User:{t}-b", WRITE, host="10.0.0.1"),
        creation(USER, f"User:{t}-a", LITERAL, f"User:{t}-b", 13),  # CREATE_TOKENS
    ), settle=True)  # fmt: skip


def test_create_acls_valid_and_invalid(admin: Pair):
    t = admin.token
    alice, bob = f"User:{t}-a", f"User:{t}-b"
    admin.step("create one literal ACL", create_acls(creation(TOPIC, f"{t}-x", LITERAL, alice, READ)), settle=True)
    admin.step("create it again (idempotent)", create_acls(creation(TOPIC, f"{t}-x", LITERAL, alice, READ)))
    admin.step("the same ACL twice in one request", create_acls(
        creation(TOPIC, f"{t}-y", LITERAL, alice, WRITE), creation(TOPIC, f"{t}-y", LITERAL, alice, WRITE)
    ), settle=True)  # fmt: skip
    admin.step("valid and invalid bindings in one request", create_acls(
        creation(TOPIC, f"{t}-p", PREFIXED, alice, READ),
        creation(CLUSTER, "other-cluster", LITERAL, alice, ALTER),
        creation(TOPIC, "", LITERAL, alice, READ),
        creation(GROUP, f"{t}-g", LITERAL, bob, READ, DENY),
        creation(CLUSTER, "kafka-cluster", LITERAL, bob, ALTER),
    ), settle=True)  # fmt: skip
    admin.step("CLUSTER kafka-cluster PREFIXED", create_acls(creation(CLUSTER, "kafka-cluster", PREFIXED, bob, CREATE)),
               settle=True)  # fmt: skip
    admin.step("PREFIXED * is an ordinary prefix", create_acls(creation(TOPIC, "*", PREFIXED, bob, DELETE)),
               settle=True)  # fmt: skip
    admin.step("an empty host", create_acls(creation(TOPIC, f"{t}-h", LITERAL, bob, READ, host="")), settle=True)
    admin.step("USER resource, CREATE_TOKENS", create_acls(creation(USER, alice, LITERAL, bob, 13)), settle=True)
    admin.step("TRANSACTIONAL_ID, DESCRIBE_TOKENS", create_acls(
        creation(TRANSACTIONAL_ID, f"{t}-tx", LITERAL, bob, 14)
    ), settle=True)  # fmt: skip
    for label, bad in [
        ("resource type ANY", creation(ANY, f"{t}-z", LITERAL, alice, READ)),
        ("pattern type MATCH", creation(TOPIC, f"{t}-z", MATCH, alice, READ)),
        ("pattern type ANY", creation(TOPIC, f"{t}-z", ANY, alice, READ)),
        ("operation ANY", creation(TOPIC, f"{t}-z", LITERAL, alice, ANY)),
        ("permission ANY", creation(TOPIC, f"{t}-z", LITERAL, alice, READ, ANY)),
    ]:
        admin.step(f"a creation with {label} fails the whole request", create_acls(
            creation(TOPIC, f"{t}-ok", LITERAL, alice, READ), bad
        ))  # fmt: skip
    for label, bad in [
        ("resource type 9", creation(9, f"{t}-z", LITERAL, alice, READ)),
        ("pattern type 5", creation(TOPIC, f"{t}-z", 5, alice, READ)),
        ("operation 16", creation(TOPIC, f"{t}-z", LITERAL, alice, 16)),
        ("permission 4", creation(TOPIC, f"{t}-z", LITERAL, alice, READ, 4)),
    ]:
        admin.step(f"unrecognised code: {label}", create_acls(creation(TOPIC, f"{t}-ok2", LITERAL, alice, READ), bad),
                   settle=True)  # fmt: skip
    for label, words, bad in [
        ("resource type 0", "resource type", creation(0, f"{t}-z", LITERAL, alice, READ)),
        ("pattern type 0", "pattern type", creation(TOPIC, f"{t}-z", 0, alice, READ)),
        ("operation 0", "operation", creation(TOPIC, f"{t}-z", LITERAL, alice, 0)),
        ("permission 0", "permission type", creation(TOPIC, f"{t}-z", LITERAL, alice, READ, 0)),
    ]:
        admin.step(f"UNKNOWN code: {label}", create_acls(bad), unknown_code(words))
    cleanup(admin)


def test_create_acls_principal_forms(admin: Pair):
    t = admin.token
    admin.step("principal with an empty name", create_acls(creation(TOPIC, f"{t}-q", LITERAL, "User:", READ)),
               settle=True)  # fmt: skip
    admin.step("principal of another type", create_acls(creation(TOPIC, f"{t}-q", LITERAL, f"Group:{t}-a", READ)),
               settle=True)  # fmt: skip
    for label, principal in [("no colon", f"{t}-nocolon"), ("an empty type", f":{t}-notype"), ("empty", "")]:
        kafka = admin.step(f"principal with {label}", create_acls(creation(TOPIC, f"{t}-q", LITERAL, principal, READ)),
                           PRINCIPAL_VALIDATED)  # fmt: skip
        if kafka["results"][0]["error_code"] == 0:
            # Kafka 3.9 stored it: the next step shows the same ACL on Kafka only, then removes it there.
            admin.step(f"principal with {label}: delete it", delete_acls(
                acl_filter(TOPIC, f"{t}-q", LITERAL, principal=principal)
            ), Documented("§16.2", "only Kafka stored the ACL", _deleted_on_kafka_only), settle=True)  # fmt: skip
    admin.step("cleanup", delete_acls(acl_filter(TOPIC, f"{t}-q", LITERAL)), settle=True)


def _deleted_on_kafka_only(kafka: Any, guard: Any) -> None:
    assert len(kafka["filter_results"][0]["matching_acls"]) == 1, kafka
    assert guard["filter_results"][0]["matching_acls"] == [], guard


def test_describe_acls_filters(admin: Pair):
    t = admin.token
    alice, bob = f"User:{t}-a", f"User:{t}-b"
    setup_acls(admin)
    filters = {
        "ANY (everything)": describe_acls(),
        "TOPIC, any pattern, the name": describe_acls(TOPIC, f"{t}-orders"),
        "TOPIC, any pattern, a prefix's name": describe_acls(TOPIC, f"{t}-ord"),
        "TOPIC MATCH a name": describe_acls(TOPIC, f"{t}-orders", MATCH),
        "TOPIC MATCH another name": describe_acls(TOPIC, f"{t}-other", MATCH),
        "ANY type MATCH": describe_acls(ANY, f"{t}-orders", MATCH),
        "TOPIC MATCH, no name": describe_acls(TOPIC, None, MATCH),
        "TOPIC LITERAL *": describe_acls(TOPIC, "*", LITERAL),
        "TOPIC ANY-pattern *": describe_acls(TOPIC, "*", ANY),
        "TOPIC LITERAL name": describe_acls(TOPIC, f"{t}-orders", LITERAL),
        "TOPIC LITERAL, no name": describe_acls(TOPIC, None, LITERAL),
        "TOPIC PREFIXED name": describe_acls(TOPIC, f"{t}-ord", PREFIXED),
        "TOPIC PREFIXED, longer name (no match)": describe_acls(TOPIC, f"{t}-orders", PREFIXED),
        "TOPIC PREFIXED, no name": describe_acls(TOPIC, None, PREFIXED),
        "principal alice": describe_acls(principal=alice),
        "principal bob": describe_acls(principal=bob),
        "principal User:*": describe_acls(principal="User:*"),
        "host 10.0.0.1": describe_acls(host="10.0.0.1"),
        "host *": describe_acls(host="*"),
        "operation READ": describe_acls(operation=READ),
        "operation DESCRIBE (no implication)": describe_acls(operation=DESCRIBE),
        "operation ALL": describe_acls(operation=ALL),
        "permission DENY": describe_acls(permission=DENY),
        "permission ALLOW": describe_acls(permission=ALLOW),
        "GROUP": describe_acls(GROUP),
        "CLUSTER": describe_acls(CLUSTER, "kafka-cluster", LITERAL),
        "TRANSACTIONAL_ID MATCH": describe_acls(TRANSACTIONAL_ID, f"{t}-tx-1", MATCH),
        "USER": describe_acls(USER),
        "combined": describe_acls(TOPIC, f"{t}-orders", MATCH, alice, "*", READ, ALLOW),
        "a name no ACL has": describe_acls(TOPIC, f"{t}-none", ANY),
        "unrecognised operation 16": describe_acls(operation=16),
        "unrecognised resource type 9": describe_acls(9),
        "unrecognised pattern type 5": describe_acls(TOPIC, None, 5),
        "unrecognised permission 4": describe_acls(permission=4),
    }
    for label, request in filters.items():
        admin.step(f"DescribeAcls {label}", request, mine=True)
    for label, words, request in [
        ("resource type 0", "resource type", describe_acls(0)),
        ("pattern type 0", "pattern type", describe_acls(TOPIC, None, 0)),
        ("operation 0", "operation", describe_acls(operation=0)),
        ("permission 0", "permission type", describe_acls(permission=0)),
    ]:
        admin.step(f"DescribeAcls UNKNOWN {label}", request, unknown_code(words))
    cleanup(admin)


def test_delete_acls_filters(admin: Pair):
    t = admin.token
    alice, bob = f"User:{t}-a", f"User:{t}-b"
    setup_acls(admin)
    admin.step("delete nothing (a name no ACL has)", delete_acls(acl_filter(TOPIC, f"{t}-none", ANY)), mine=True)
    admin.step("delete LITERAL * (the wildcard only)", delete_acls(
        acl_filter(TOPIC, "*", LITERAL, principal=alice)
    ), settle=True, mine=True)  # fmt: skip
    admin.step("delete by host", delete_acls(acl_filter(host="10.0.0.1", principal=bob)), settle=True, mine=True)
    admin.step("the same ACL under two filters, and a filter matching nothing", delete_acls(
        acl_filter(GROUP, f"{t}-g", LITERAL), acl_filter(principal=alice, operation=READ, resource_type=GROUP),
        acl_filter(GROUP, f"{t}-g", PREFIXED),
    ), settle=True, mine=True)  # fmt: skip
    admin.step("delete by permission DENY under a PREFIXED name", delete_acls(
        acl_filter(TOPIC, t, PREFIXED, permission=DENY)
    ), settle=True, mine=True)  # fmt: skip
    admin.step("re-create for the MATCH delete", create_acls(
        creation(TOPIC, f"{t}-orders", LITERAL, alice, WRITE),
        creation(TOPIC, "*", LITERAL, alice, READ),
        creation(TOPIC, f"{t}-o", PREFIXED, alice, READ),
        creation(TOPIC, f"{t}-orders-eu", PREFIXED, alice, READ),
    ), settle=True)  # fmt: skip
    admin.step("unrecognised codes are per-filter INVALID_REQUEST", delete_acls(
        acl_filter(operation=16), acl_filter(9), acl_filter(TOPIC, None, 5), acl_filter(permission=4),
        acl_filter(TOPIC, f"{t}-none", LITERAL),
    ), mine=True)  # fmt: skip
    for label, words, bad in [
        ("resource type 0", "resource type", acl_filter(0)),
        ("pattern type 0", "pattern type", acl_filter(TOPIC, None, 0)),
        ("operation 0", "operation", acl_filter(operation=0)),
        ("permission 0", "permission type", acl_filter(permission=0)),
    ]:
        admin.step(f"DeleteAcls UNKNOWN {label}", delete_acls(bad), unknown_code(words))
    admin.step("MATCH deletes the literal, the wildcard and every matching prefix", delete_acls(
        acl_filter(TOPIC, f"{t}-orders", MATCH, principal=alice)
    ), settle=True, mine=True)  # fmt: skip
    admin.step("what is left", describe_acls(), mine=True)
    admin.step("delete by operation", delete_acls(
        acl_filter(operation=13), acl_filter(operation=DESCRIBE, principal=bob)
    ), settle=True, mine=True)  # fmt: skip
    cleanup(admin)


def test_acl_api_versions(admin: Pair):
    """The same bindings and filters in versions 1 and 2 (3 is every other test's; kio has no version 0, which
    kafkaguard does not offer, §16.4)."""
    t = admin.token
    alice = f"User:{t}-a"
    for version in (1, 2):
        create = importlib.import_module(f"kio.schema.create_acls.v{version}.request")
        describe = importlib.import_module(f"kio.schema.describe_acls.v{version}.request")
        delete = importlib.import_module(f"kio.schema.delete_acls.v{version}.request")
        fields = {"resource_type": i8(TOPIC), "resource_name": f"{t}-v{version}", "resource_pattern_type": i8(PREFIXED),
                  "principal": alice, "host": "*", "operation": i8(READ), "permission_type": i8(ALLOW)}  # fmt: skip
        admin.step(f"CreateAcls v{version}", create.CreateAclsRequest(creations=(create.AclCreation(**fields),)),
                   settle=True)  # fmt: skip
        wanted = {"resource_type_filter": i8(TOPIC), "resource_name_filter": f"{t}-v{version}-x",
                  "pattern_type_filter": i8(MATCH), "principal_filter": None, "host_filter": None,
                  "operation": i8(ANY), "permission_type": i8(ANY)}  # fmt: skip
        admin.step(f"DescribeAcls v{version} MATCH", describe.DescribeAclsRequest(**wanted), mine=True)
        deletion = delete.DeleteAclsRequest(filters=(delete.DeleteAclsFilter(**wanted),))
        admin.step(f"DeleteAcls v{version} MATCH", deletion, settle=True, mine=True)
