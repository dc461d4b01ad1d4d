"""The differential runner: the same raw Kafka request, sent to a real Apache Kafka 3.9 broker and to kafkaguard,
answers normalized and compared step by step.

A ``Pair`` holds one logged-in ``Wire`` per target for one user. ``Pair.step`` encodes the request once (kio), sends
it to both, normalizes both answers (``normalize``) and compares them. Equal answers count as a compared step. An
answer that differs must be declared by the step as ``Documented`` — the section of SEMANTICS.md §16 (or semantics.md's
"Deliberate differences") that decides it, the reason, and a check of both sides' answers; anything else fails the
test and is counted as undocumented. ``TALLY`` is read by the terminal summary (``conftest.py``). While exploring,
``DIFFERENTIAL_KEEP_GOING=1`` prints each undocumented difference and goes on (the summary still counts them).

Normalization removes only what must differ: throttle times, cluster ids, node ids, broker hosts and ports, topic
ids, and the order of lists whose order Kafka leaves unspecified (every list of entries except CreateAcls results
and DeleteAcls filter results, which follow request order — SEMANTICS.md §15.13).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from tests.server.wire import Wire, decode_response, encode_request

# wire codes (SEMANTICS.md §1)
ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, USER = 1, 2, 3, 4, 5, 7
MATCH, LITERAL, PREFIXED = 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DENY, ALLOW = 2, 3
SHA256, SHA512 = 1, 2

CLOSED = "<connection closed>"
NO_ANSWER = "<no answer>"
#: Kafka's text is "Request <its Java request object: processor, connection id with ports, session hash …> is not
#: authorized."; kafkaguard's names the API and version (semantics.md, deliberate differences; ``NOT_AUTHORIZED_TEXT``).
NOT_AUTHORIZED = re.compile(r"^Request .+ is not authorized\.$", re.DOTALL)
#: Lists whose order is the request's (every other list of entries is compared as a multiset).
ORDERED = {30: {"results"}, 31: {"filter_results"}}
#: Fields that name the broker, the cluster or a topic's id: equal in kind, never in value.
PLACEHOLDERS = {"cluster_id": "<cluster>", "controller_id": "<node>", "node_id": "<node>", "broker_id": "<node>",
                "leader_id": "<node>"}  # fmt: skip
NODE_LISTS = {"replica_nodes", "isr_nodes"}
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class Target:
    """One server under test: where it listens and its super user's login."""

    name: str
    address: tuple[str, int]
    admin: str
    admin_password: str
    mechanism: str = "SCRAM-SHA-512"


@dataclass(frozen=True)
class Documented:
    """A difference decided on purpose: ``section`` ("§16.3", or "semantics.md: <bullet>" for an entry of semantics.md's
    "Deliberate differences" list), ``reason``, and ``check(kafka, kafkaguard)``, which asserts that both normalized
    answers are the documented ones."""

    section: str
    reason: str
    check: Callable[[Any, Any], None]


@dataclass
class Tally:
    steps: int = 0
    documented: Counter[str] = field(default_factory=Counter)
    undocumented: list[str] = field(default_factory=list)

    def summary(self) -> str:
        sections = ", ".join(f"{s} ×{n}" for s, n in sorted(self.documented.items()))
        total = sum(self.documented.values())
        documented = f"{total} documented difference{'s' if total != 1 else ''}" + (
            f" ({sections})" if sections else ""
        )
        return (
            f"differential vs Kafka 3.9: {self.steps} steps compared, {documented}, "
            f"{len(self.undocumented)} undocumented"
        )


TALLY = Tally()


# --------------------------------------------------------------------------------------------------- normalizing


def plain(value: Any) -> Any:
    """A kio entity as plain data: dicts, lists, ints, strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, uuid.UUID):
        return "<zero-id>" if value == ZERO_UUID else "<id>"
    if isinstance(value, bytes):
        return value.hex()
    return value


def _normalize(value: Any, ordered: set[str], key: str | None = None) -> Any:
    if isinstance(value, dict):
        is_broker = "port" in value and ("node_id" in value or "broker_id" in value)
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in ("throttle_time", "throttle_time_ms"):
                continue
            if (k in PLACEHOLDERS and isinstance(v, int) and v >= 0) or (k == "cluster_id" and v is not None):
                out[k] = PLACEHOLDERS[k]
            elif k in NODE_LISTS:
                out[k] = ["<node>" for _ in v]
            elif is_broker and k in ("host", "port", "rack"):
                out[k] = f"<{k}>"
            else:
                out[k] = _normalize(v, ordered, k)
        return out
    if isinstance(value, list):
        items = [_normalize(v, ordered) for v in value]
        if key in ordered or not items or not isinstance(items[0], dict):
            return items
        return sorted(items, key=repr)
    return value


def normalize(api_key: int, response: Any) -> Any:
    return _normalize(plain(response), ORDERED.get(api_key, set()))


# ---------------------------------------------------------------------------------------------------- connections


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(
        "sha256" if mechanism == SHA256 else "sha512", password.encode(), salt, max(iterations, 1)
    )


def upsertion(name: str, password: str, mechanism: int = SHA256, iterations: int = 4096,
              salt: bytes | None = None) -> ScramCredentialUpsertion:  # fmt: skip
    salt = os.urandom(24) if salt is None else salt
    return ScramCredentialUpsertion(
        name=name,
        mechanism=i8(mechanism),
        iterations=i32(iterations),
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )


def connect(target: Target, user: str, password: str, mechanism: str | None = None, attempts: int = 50) -> Wire:
    """A logged-in connection; retried while a just-created user propagates (Kafka's brokers learn SCRAM
    credentials from the metadata log, a few milliseconds after the controller commits them)."""
    last: BaseException | None = None
    for _ in range(attempts):
        wire = Wire(target.address, timeout=30.0)
        try:
            wire.login(user, password, mechanism or target.mechanism)
            return wire
        except (AssertionError, OSError) as e:
            last = e
            wire.close()
            time.sleep(0.1)  # waiting for the credential to reach the broker, bounded by ``attempts``
    raise AssertionError(f"{target.name}: {user} cannot log in: {last}")


def exchange(wire: Wire, request: Any) -> Any:
    """The decoded answer, CLOSED when the server closed the connection instead, NO_ANSWER when it kept it open
    without answering until the connection's timeout."""
    correlation = wire.next_correlation_id()
    try:
        wire.send_frame(encode_request(request, correlation))
        payload = wire.recv_frame()
    except (ConnectionResetError, BrokenPipeError):
        return CLOSED
    except TimeoutError:
        return NO_ANSWER
    if payload is None:
        return CLOSED
    got, response = decode_response(payload, type(request).__api_key__, type(request).__version__)
    assert got == correlation
    return response


class Pair:
    """One user's connections to both targets, and the step function."""

    def __init__(self, kafka: Target, guard: Target, user: str, password: str, token: str) -> None:
        self.targets = (kafka, guard)
        self.user, self.password, self.token = user, password, token
        self.wires = [connect(t, user, password) for t in self.targets]

    def close(self) -> None:
        for wire in self.wires:
            wire.close()

    def _send(self, index: int, request: Any, timeout: float) -> Any:
        self.wires[index].sock.settimeout(timeout)
        response = exchange(self.wires[index], request)
        if response in (CLOSED, NO_ANSWER):
            self.wires[index].close()
            self.wires[index] = connect(self.targets[index], self.user, self.password)
            return response
        return normalize(int(type(request).__api_key__), response)

    def raw(self, request: Any, timeout: float = 30.0) -> tuple[Any, Any]:
        """Both normalized answers, not compared."""
        return self._send(0, request, timeout), self._send(1, request, timeout)

    def step(self, label: str, request: Any, documented: Documented | None = None, *, settle: bool = False,
             mine: bool = False, timeout: float = 30.0) -> Any:  # fmt: skip
        """Send ``request`` to both; the answers must be equal, or differ exactly as ``documented`` says.
        ``settle``: the request changes state; wait until Kafka's broker shows what kafkaguard shows.
        ``mine``: compare only the entries naming this test's token (``only_mine``). ``timeout``: seconds to wait
        for each answer before it counts as NO_ANSWER. Returns Kafka's normalized answer."""
        kafka, guard = self.raw(request, timeout)
        if mine:
            kafka, guard = only_mine(kafka, self.token), only_mine(guard, self.token)
        if settle:
            wait_until_settled(self)
        record(label, kafka, guard, documented)
        return kafka

    def compare(self, label: str, kafka: Any, guard: Any, documented: Documented | None = None) -> None:
        """A step whose two outcomes were produced elsewhere (a client library's view of each target)."""
        record(label, kafka, guard, documented)


def record(label: str, kafka: Any, guard: Any, documented: Documented | None) -> None:
    TALLY.steps += 1
    if kafka == guard:
        assert documented is None, f"{label}: documented as a difference ({documented.section}) but equal: {kafka}"
        return
    if documented is None:
        TALLY.undocumented.append(label)
        if os.environ.get("DIFFERENTIAL_KEEP_GOING"):  # exploring: print every difference, fail at the end
            return
        raise AssertionError(f"{label}: undocumented difference\n  kafka:      {kafka}\n  kafkaguard: {guard}")
    try:
        documented.check(kafka, guard)
    except AssertionError as e:
        TALLY.undocumented.append(label)
        raise AssertionError(
            f"{label}: differs, but not as {documented.section} documents: {e}\n  kafka:      {kafka}\n"
            f"  kafkaguard: {guard}"
        ) from e
    TALLY.documented[documented.section] += 1


# --------------------------------------------------------------------------------------------------- state probes


def any_acls() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(ANY), resource_name_filter=None, pattern_type_filter=i8(ANY),
        principal_filter=None, host_filter=None, operation=i8(ANY), permission_type=i8(ANY),
    )  # fmt: skip


def state(wire: Wire, token: str) -> Any:
    """What a test's token touches: its ACLs, SCRAM users and topics, normalized."""
    acls = normalize(29, exchange(wire, any_acls()))  # the super user's: always answered
    users = normalize(50, exchange(wire, DescribeUserScramCredentialsRequest(users=None)))
    topics = normalize(3, exchange(wire, metadata_request(None, auto_create=False)))
    return (
        only_mine(acls, token)["resources"],
        only_mine(users, token)["results"],
        [t for t in topics["topics"] if token in (t["name"] or "")],
    )


def wait_until_settled(pair: Pair, timeout: float = 5.0) -> None:
    """Poll Kafka (as its super user, through a fresh connection) until its broker shows the state kafkaguard
    shows; returns after ``timeout`` either way (a state that stays different shows in the next compared step)."""
    kafka, guard = pair.targets
    with connect(kafka, kafka.admin, kafka.admin_password) as k, connect(guard, guard.admin, guard.admin_password) as g:
        wanted = state(g, pair.token)
        deadline = time.monotonic() + timeout
        while state(k, pair.token) != wanted and time.monotonic() < deadline:
            time.sleep(0.05)  # the broker applies the controller's records asynchronously


# ------------------------------------------------------------------------------------------------ request builders


def creation(resource_type: int, name: str, pattern: int, principal: str, operation: int, permission: int = ALLOW,
             host: str = "*") -> AclCreation:  # fmt: skip
    return AclCreation(
        resource_type=i8(resource_type), resource_name=name, resource_pattern_type=i8(pattern),
        principal=principal, host=host, operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


def create_acls(*creations: AclCreation) -> CreateAclsRequest:
    return CreateAclsRequest(creations=creations)


def describe_acls(resource_type: int = ANY, name: str | None = None, pattern: int = ANY, principal: str | None = None,
                  host: str | None = None, operation: int = ANY,
                  permission: int = ANY) -> DescribeAclsRequest:  # fmt: skip
    return DescribeAclsRequest(
        resource_type_filter=i8(resource_type), resource_name_filter=name, pattern_type_filter=i8(pattern),
        principal_filter=principal, host_filter=host, operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


def acl_filter(resource_type: int = ANY, name: str | None = None, pattern: int = ANY, principal: str | None = None,
               host: str | None = None, operation: int = ANY, permission: int = ANY) -> DeleteAclsFilter:  # fmt: skip
    return DeleteAclsFilter(
        resource_type_filter=i8(resource_type), resource_name_filter=name, pattern_type_filter=i8(pattern),
        principal_filter=principal, host_filter=host, operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


def delete_acls(*filters: DeleteAclsFilter) -> DeleteAclsRequest:
    return DeleteAclsRequest(filters=filters)


def alter_scram(deletions: tuple[tuple[str, int], ...] = (),
                upsertions: tuple[ScramCredentialUpsertion, ...] = ()) -> AlterUserScramCredentialsRequest:  # fmt: skip
    return AlterUserScramCredentialsRequest(
        deletions=tuple(ScramCredentialDeletion(name=n, mechanism=i8(m)) for n, m in deletions), upsertions=upsertions
    )


def describe_scram(*names: str, all_users: bool = False) -> DescribeUserScramCredentialsRequest:
    return DescribeUserScramCredentialsRequest(users=None if all_users else tuple(UserName(name=n) for n in names))


def metadata_request(topics: list[str] | None, *, auto_create: bool = False, topic_ops: bool = True) -> MetadataRequest:
    return MetadataRequest(
        topics=None
        if topics is None
        else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=topic_ops,
    )


def _mine(entry: dict[str, Any], token: str) -> bool:
    return token in entry["resource_name"] or any(token in a["principal"] for a in entry.get("acls", [entry]))


def only_mine(answer: Any, token: str) -> Any:
    """An answer cut down to the test's own entries (topics, ACL resources, deleted ACLs naming ``token``): the
    Kafka broker is shared by the whole session, each kafkaguard server only by a module."""
    if not isinstance(answer, dict):
        return answer
    out = dict(answer)
    if "topics" in out:
        out["topics"] = [t for t in out["topics"] if token in (t["name"] or "")]
    if "resources" in out:  # a shared resource (kafka-cluster) keeps only this test's ACLs: other suites add theirs
        out["resources"] = [
            r if token in r["resource_name"] else {**r, "acls": [a for a in r["acls"] if token in a["principal"]]}
            for r in out["resources"]
            if _mine(r, token)
        ]
    if "results" in out and out["results"] and "user" in out["results"][0]:
        out["results"] = [r for r in out["results"] if token in r["user"]]
    if "filter_results" in out:
        out["filter_results"] = [
            {**r, "matching_acls": [m for m in r["matching_acls"] if _mine(m, token)]} for r in out["filter_results"]
        ]
    return out


@contextmanager
def pair(kafka: Target, guard: Target, user: str, password: str, token: str) -> Iterator[Pair]:
    connected = Pair(kafka, guard, user, password, token)
    try:
        yield connected
    finally:
        connected.close()


def new_user(admin: Pair, name: str, password: str) -> None:
    """Create ``name`` with both mechanisms on both targets (compared steps), waiting for Kafka's broker each time:
    first both mechanisms in one request (§16.6: only kafkaguard accepts it), then one request per mechanism."""
    admin.step(
        f"create user {name} (both mechanisms, one request)",
        alter_scram(upsertions=(upsertion(name, password, SHA256), upsertion(name, password, SHA512))),
        DUPLICATE_USER_IN_ONE_REQUEST,
    )
    for mechanism in (SHA256, SHA512):
        admin.step(f"create user {name} ({mechanism})", alter_scram(upsertions=(upsertion(name, password, mechanism),)),
                   settle=True)  # fmt: skip


def _kafka_rejects_same_user_twice(kafka: Any, guard: Any) -> None:
    assert sorted(r["error_code"] for r in kafka["results"]) in ([0, 92], [92]), kafka
    assert all(r["error_code"] == 0 for r in guard["results"]), guard


#: §16.6: a request may upsert several mechanisms of one user (KIP-554); KRaft's controller allows one per user.
DUPLICATE_USER_IN_ONE_REQUEST = Documented(
    "§16.6",
    "KIP-554 lets one request alter several mechanisms of a user; the KRaft controller answers DUPLICATE_RESOURCE",
    _kafka_rejects_same_user_twice,
)


# ------------------------------------------------------------------------------------------ documented differences


def errors_in(answer: Any) -> list[tuple[int, str | None]]:
    """Every (error_code, error_message) in an answer, depth first."""
    found: list[tuple[int, str | None]] = []
    if isinstance(answer, dict):
        if "error_code" in answer:
            found.append((answer["error_code"], answer.get("error_message")))
        for value in answer.values():
            found += errors_in(value)
    elif isinstance(answer, list):
        for value in answer:
            found += errors_in(value)
    return found


def unknown_code(field_words: str) -> Documented:
    """§16.3: Kafka closes the connection on the code 0 (UNKNOWN); kafkaguard answers INVALID_REQUEST naming it."""

    def check(kafka: Any, guard: Any) -> None:
        assert kafka == CLOSED
        assert any(code == 42 and message and field_words in message for code, message in errors_in(guard)), guard

    return Documented(
        "§16.3", f"UNKNOWN (0) {field_words}: an INVALID_REQUEST naming it, not a closed connection", check
    )


def colonless_principal(kafka: Any, guard: Any) -> None:
    """§16.2 on CreateAcls: Kafka 3.9 (before KAFKA-18051) stores it; kafkaguard refuses it with INVALID_REQUEST."""
    assert [r["error_code"] for r in kafka["results"]] == [0], kafka
    assert [r["error_code"] for r in guard["results"]] == [42], guard
    assert "principal" in (guard["results"][0]["error_message"] or "").lower(), guard


PRINCIPAL_VALIDATED = Documented(
    "§16.2", "principals must be Type:Name (Kafka after KAFKA-18051; 3.9.0 still accepts them)", colonless_principal
)


def _configs_only_explicit(kafka: Any, guard: Any) -> None:
    """semantics.md: CreateTopics returns the configs the topic was created with, not Kafka's broker defaults."""
    for k, g in zip(kafka["topics"], guard["topics"], strict=True):
        assert {**k, "configs": None} == {**g, "configs": None}, (k, g)
        assert all(c["config_source"] == 5 for c in k["configs"] or []), k  # DEFAULT_CONFIG
        assert g["configs"] in ([], None), g


TOPIC_CONFIGS = Documented(
    "semantics.md: topic configs",
    "kafkaguard keeps the topic catalog, not log segments: CreateTopics lists the configs a topic was created with, "
    "not Kafka's ~36 broker defaults (config source DEFAULT_CONFIG)",
    _configs_only_explicit,
)


def _kafka_does_not_answer(kafka: Any, guard: Any) -> None:
    assert kafka == NO_ANSWER, kafka
    assert guard["error_code"] == 31 and guard["results"] == [], guard


SCRAM_ALL_UNAUTHORIZED = Documented(
    "semantics.md: unanswered SCRAM describe",
    "DescribeUserScramCredentials of all users (null) without cluster DESCRIBE: Kafka 3.9 never answers (its error "
    "response iterates the null user list); kafkaguard answers CLUSTER_AUTHORIZATION_FAILED",
    _kafka_does_not_answer,
)


def _created_before_answering(kafka: Any, guard: Any) -> None:
    (k,), (g,) = kafka["topics"], guard["topics"]
    assert k["error_code"] in (3, 5) and k["partitions"] == [], k  # UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE
    assert g["error_code"] == 0 and len(g["partitions"]) == 1, g


AUTO_CREATED_AT_ONCE = Documented(
    "§16.1",
    "kafkaguard creates an auto-created topic before answering; KRaft answers first and creates it in the background",
    _created_before_answering,
)


def _without_request_text(answer: Any) -> Any:
    if isinstance(answer, dict):
        return {
            k: "Request … is not authorized."
            if k == "error_message" and isinstance(v, str) and NOT_AUTHORIZED.match(v)
            else _without_request_text(v)
            for k, v in answer.items()
        }
    if isinstance(answer, list):
        return [_without_request_text(v) for v in answer]
    return answer


def _same_but_the_request_text(kafka: Any, guard: Any) -> None:
    assert _without_request_text(kafka) == _without_request_text(guard)


NOT_AUTHORIZED_TEXT = Documented(
    "semantics.md: denial text",
    'a denial says "Request <API> v<version> is not authorized."; Kafka puts its internal request object there '
    "(processor, connection id with both ports, session object hash)",
    _same_but_the_request_text,
)
