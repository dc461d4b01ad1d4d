"""The CLI's Kafka client: Java-style client properties → librdkafka configuration, and an admin wrapper that
speaks kafkaguard's model (``AclBinding``, ``AclBindingFilter``) over confluent-kafka's AdminClient.

Everything here works against any Kafka cluster, not only kafkaguard's server. librdkafka 2.16 limits what can be
said over the wire: it has no resource types DELEGATION_TOKEN (6) and USER (7) and no operations CREATE_TOKENS (13),
DESCRIBE_TOKENS (14) and AUTO_CREATE (15, kafkaguard's KIP-755). Such bindings cannot be created or deleted through
it (``UnsupportedByClientError``), and ACLs of those kinds that the cluster holds come back as UNKNOWN; they are
reported as ``unrepresentable`` and never touched.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaguard.cli.output import binding_text
from kafkaguard.errors import KafkaguardError
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.scram import ScramMechanism

# confluent-kafka is imported where it is used (an import statement is a dict look-up after the first): every
# command imports this module for CliError and the conversions, and so does the process of `kafkaguard serve` and
# `kafkaguard proxy`, which never call Kafka through librdkafka (~4 MiB of their memory).
if TYPE_CHECKING:
    from confluent_kafka.admin._acl import AclBinding as RdAclBinding
    from confluent_kafka.admin._acl import AclBindingFilter as RdAclBindingFilter
    from confluent_kafka.admin._acl import AclOperation as RdAclOperation
    from confluent_kafka.admin._resource import ResourceType as RdResourceType

#: Seconds any single admin call may take before the CLI gives up and says so.
DEFAULT_TIMEOUT = 15.0


@functools.cache
def _rd_resource_types() -> dict[int, RdResourceType]:
    from confluent_kafka.admin._resource import ResourceType as RdResourceType  # see the note at the top

    return {t.value: t for t in RdResourceType}


@functools.cache
def _rd_operations() -> dict[int, RdAclOperation]:
    from confluent_kafka.admin._acl import AclOperation as RdAclOperation  # see the note at the top

    return {o.value: o for o in RdAclOperation}


class CliError(KafkaguardError):
    """A failure the CLI reports as one line on stderr and exits with ``exit_code`` (never a traceback)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class KafkaCallError(CliError):
    """The cluster answered a call with a Kafka error: ``error_name`` (``CLUSTER_AUTHORIZATION_FAILED``) and its
    message."""

    def __init__(self, what: str, error_name: str, error_message: str) -> None:
        super().__init__(f"{what} failed: {error_name}: {error_message}")
        self.error_name = error_name
        self.error_message = error_message


class UnsupportedByClientError(CliError):
    """A binding librdkafka cannot express (see the module docstring)."""


# --------------------------------------------------------------------------------------------- client properties


def load_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` continuations.

    :raises CliError: the file cannot be read.
    """
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise CliError(f"cannot read --command-config {path}: {e.strerror or e}", exit_code=2) from e
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", logical)
        if match:
            props[match.group(1).replace("\\", "")] = match.group(2).strip()
        elif logical.strip():
            props[logical.strip()] = ""
        logical = ""
    return props


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
#: Java client keys librdkafka has no equivalent for; dropped with a note (they only matter to the JVM).
_JAVA_ONLY = frozenset(
    {
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "ssl.truststore.password",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "default.api.timeout.ms",
    }
)


def client_config(bootstrap_server: str, properties: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The librdkafka configuration for kafka-acls.sh-style arguments.

    Translates the Java client keys people keep in ``--command-config`` files: ``sasl.jaas.config`` with
    ``ScramLoginModule``/``PlainLoginModule`` → ``sasl.username``/``sasl.password``; a PEM truststore →
    ``ssl.ca.location``; a PKCS12 keystore → ``ssl.keystore.location``/``password``; an empty
    ``ssl.endpoint.identification.algorithm`` → ``none``. Keys librdkafka understands pass through unchanged.

    :raises CliError: a JKS truststore/keystore (librdkafka cannot read it) or an unparsable JAAS line.
    """
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap_server, "socket.timeout.ms": 10000}
    for key, value in (properties or {}).items():
        if key in _JAVA_ONLY or key in ("bootstrap.servers", "ssl.truststore.type", "ssl.keystore.type"):
            continue
        if key == "sasl.jaas.config":
            conf.update(_jaas_credentials(value))
        elif key == "ssl.truststore.location":
            _require_type(properties or {}, "ssl.truststore.type", "PEM", key)
            conf["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            _require_type(properties or {}, "ssl.keystore.type", "PKCS12", key)
            conf["ssl.keystore.location"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            conf[key] = value.lower() or "none"
        else:
            conf[key] = value
    conf["bootstrap.servers"] = bootstrap_server
    return conf


def _require_type(properties: Mapping[str, str], type_key: str, wanted: str, location_key: str) -> None:
    found = properties.get(type_key, "JKS").upper()
    if found != wanted:
        raise CliError(
            f"{location_key}: librdkafka cannot read a {found} store; convert it to {wanted} and set "
            f"{type_key}={wanted} (or give ssl.ca.location / ssl.certificate.location PEM files directly)",
            exit_code=2,
        )


def _jaas_credentials(jaas: str) -> dict[str, str]:
    if "ScramLoginModule" not in jaas and "PlainLoginModule" not in jaas:
        raise CliError(
            "sasl.jaas.config: only ScramLoginModule and PlainLoginModule are supported "
            '(…ScramLoginModule required username="alice" password="alice-secret";)',
            exit_code=2,
        )
    options = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _JAAS_OPTION.finditer(jaas)}
    if "username" not in options or "password" not in options:
        raise CliError("sasl.jaas.config: username and password are both required", exit_code=2)
    unescape = re.compile(r"\\(.)")
    return {
        "sasl.username": unescape.sub(r"\1", options["username"]),
        "sasl.password": unescape.sub(r"\1", options["password"]),
    }


# ------------------------------------------------------------------------------------------------ conversions


def to_rd_binding(binding: AclBinding) -> RdAclBinding:
    """:raises UnsupportedByClientError: a resource type or operation librdkafka does not know."""
    # confluent_kafka.admin re-exports these, but its stubs do not declare the re-exports.
    from confluent_kafka.admin._acl import AclBinding as RdAclBinding
    from confluent_kafka.admin._acl import AclPermissionType as RdAclPermissionType
    from confluent_kafka.admin._resource import ResourcePatternType as RdPatternType

    pattern, entry = binding.pattern, binding.entry
    return RdAclBinding(
        _rd_resource_type(pattern.resource_type),
        pattern.name,
        RdPatternType(pattern.pattern_type.code),
        entry.principal,
        entry.host,
        _rd_operation(entry.operation),
        RdAclPermissionType(entry.permission_type.code),
    )


def to_rd_filter(acl_filter: AclBindingFilter) -> RdAclBindingFilter:
    """:raises UnsupportedByClientError: a resource type or operation librdkafka does not know."""
    # confluent_kafka.admin re-exports these, but its stubs do not declare the re-exports.
    from confluent_kafka.admin._acl import AclBindingFilter as RdAclBindingFilter
    from confluent_kafka.admin._acl import AclPermissionType as RdAclPermissionType
    from confluent_kafka.admin._resource import ResourcePatternType as RdPatternType

    pattern, entry = acl_filter.pattern_filter, acl_filter.entry_filter
    return RdAclBindingFilter(
        _rd_resource_type(pattern.resource_type),
        # librdkafka's AclBindingFilter documents None as "any" for these three, but inherits AclBinding's `str`
        # annotations: the ignores stay until confluent-kafka types its filter.
        pattern.name,  # type: ignore[arg-type]  # None is "any name" (see above)
        RdPatternType(pattern.pattern_type.code),
        entry.principal,  # type: ignore[arg-type]  # None is "any principal" (see above)
        entry.host,  # type: ignore[arg-type]  # None is "any host" (see above)
        _rd_operation(entry.operation),
        RdAclPermissionType(entry.permission_type.code),
    )


def from_rd_binding(rd: RdAclBinding) -> AclBinding | None:
    """The binding, or None when librdkafka flattened a code it does not know to UNKNOWN."""
    codes = [_rd_code(code) for code in (rd.restype, rd.resource_pattern_type, rd.operation, rd.permission_type)]
    if 0 in codes:
        return None
    restype, pattern_type, operation, permission_type = codes
    return AclBinding(
        ResourcePattern(ResourceType.from_code(restype), rd.name, PatternType.from_code(pattern_type)),
        AccessControlEntry(
            rd.principal, rd.host, AclOperation.from_code(operation), AclPermissionType.from_code(permission_type)
        ),
    )


def _rd_code(field: Enum | str | int) -> int:
    """The code of one of a librdkafka binding's enum fields, typed ``Enum | str | int`` because its constructor
    accepts all three; it converts a str or int to the enum before it returns, so the field is an Enum."""
    assert isinstance(field, Enum)  # noqa: S101 - true by construction: AclBinding.__init__ converts every field
    return int(field.value)


def _rd_resource_type(resource_type: ResourceType) -> RdResourceType:
    found = _rd_resource_types().get(resource_type.code)
    if found is None or found.name == "UNKNOWN":
        raise UnsupportedByClientError(
            f"resource type {resource_type} cannot be sent through librdkafka 2.16 (it knows TOPIC, GROUP, CLUSTER "
            "and TRANSACTIONAL_ID); manage such ACLs with kafka-acls.sh or the kafkaguard console"
        )
    return found


def _rd_operation(operation: AclOperation) -> RdAclOperation:
    found = _rd_operations().get(operation.code)
    if found is None or found.name == "UNKNOWN":
        raise UnsupportedByClientError(
            f"operation {operation} cannot be sent through librdkafka 2.16 (it knows operations up to "
            "IDEMPOTENT_WRITE); manage such ACLs with kafka-acls.sh or the kafkaguard console"
        )
    return found


# ------------------------------------------------------------------------------------------------ the admin


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed binding or filter, with Kafka's error name and message."""

    subject: str
    error_name: str
    message: str

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message} ({self.subject})"


@dataclass(frozen=True, slots=True)
class Described:
    """What DescribeAcls returned: the bindings, and how many came back with codes librdkafka does not know."""

    bindings: tuple[AclBinding, ...]
    unrepresentable: int = 0


def _error_of(exc: BaseException) -> tuple[str, str]:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return error.name(), error.str()
    return type(exc).__name__, str(exc)


class KafkaAdmin:
    """confluent-kafka's AdminClient in kafkaguard's vocabulary; every call has a timeout and raises ``CliError``
    with Kafka's error name instead of hanging or printing a traceback."""

    def __init__(self, config: Mapping[str, Any], timeout: float = DEFAULT_TIMEOUT) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        self._timeout = timeout
        conf = dict(config)
        # librdkafka writes its own log lines to stderr unless given a logger; the CLI reports failures itself.
        conf.setdefault("logger", logging.getLogger("kafkaguard.cli.rdkafka"))
        try:
            self._admin = AdminClient(conf)
        except KafkaException as e:
            _, message = _error_of(e)
            raise CliError(f"invalid client configuration: {message}", exit_code=2) from e
        self._bootstrap = str(conf.get("bootstrap.servers"))

    def _result(self, future: Any, what: str) -> Any:
        from confluent_kafka import KafkaException

        try:
            return future.result(timeout=self._timeout + 5)
        except KafkaException as e:
            name, message = _error_of(e)
            if name in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE"):
                raise CliError(
                    f"{what}: cannot reach the cluster at {self._bootstrap} ({name}: {message}); check "
                    "--bootstrap-server, security.protocol and the SASL credentials in --command-config"
                ) from e
            if name == "_AUTHENTICATION" or name == "SASL_AUTHENTICATION_FAILED":
                raise CliError(f"{what}: authentication failed ({message}); check the SASL credentials") from e
            raise KafkaCallError(what, name, message) from e
        except TimeoutError as e:
            raise CliError(
                f"{what}: no answer from {self._bootstrap} within {self._timeout:.0f}s; check --bootstrap-server, "
                "security.protocol and the SASL credentials in --command-config"
            ) from e

    def cluster_operations(self) -> frozenset[AclOperation]:
        """The operations the caller may perform on the cluster (DescribeCluster's authorized operations)."""
        future = self._admin.describe_cluster(include_authorized_operations=True, request_timeout=self._timeout)
        description = self._result(future, "DescribeCluster")
        # confluent-kafka gives None, not [], when the broker's answer is "no operations at all" (bit field 0).
        operations = getattr(description, "authorized_operations", None) or []
        return frozenset(AclOperation.from_code(op.value) for op in operations)

    def require_cluster_operation(self, operation: AclOperation, what: str) -> None:
        """Refuse early, with Kafka's error, when the caller lacks ``operation`` on the cluster.

        :raises CliError: CLUSTER_AUTHORIZATION_FAILED.
        """
        operations = self.cluster_operations()
        if operation not in operations and AclOperation.ALL not in operations:
            raise KafkaCallError(
                what,
                "CLUSTER_AUTHORIZATION_FAILED",
                f"the principal of this connection may not {operation} the cluster "
                f"(it needs ALLOW {operation} or ALL on Cluster:kafka-cluster)",
            )

    def topic_names(self) -> list[str]:
        """Every topic the cluster lists to this principal (Metadata), internal topics left out.

        :raises CliError: unreachable cluster.
        """
        from confluent_kafka import KafkaException

        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as e:
            name, message = _error_of(e)
            raise CliError(f"Metadata: cannot list the topics of {self._bootstrap} ({name}: {message})") from e
        return sorted(name for name in metadata.topics if not name.startswith("__"))

    def describe_acls(self, acl_filter: AclBindingFilter) -> Described:
        """:raises CliError: unreachable cluster or an error answer."""
        # confluent-kafka answers [] instead of raising when the broker says CLUSTER_AUTHORIZATION_FAILED at the
        # top level, so an unauthorized caller would see "no ACLs". Ask for the caller's cluster rights first.
        self.require_cluster_operation(AclOperation.DESCRIBE, "DescribeAcls")
        rd_bindings = self._result(
            self._admin.describe_acls(to_rd_filter(acl_filter), request_timeout=self._timeout), "DescribeAcls"
        )
        bindings: list[AclBinding] = []
        unknown = 0
        for rd in rd_bindings:
            binding = from_rd_binding(rd)
            if binding is None:
                unknown += 1
            else:
                bindings.append(binding)
        return Described(tuple(bindings), unknown)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Failure]:
        """Create in one request; one ``Failure`` per refused binding (an empty list when all succeeded)."""
        if not bindings:
            return []
        rd = {to_rd_binding(b): b for b in bindings}
        futures = self._admin.create_acls(list(rd), request_timeout=self._timeout)
        failures: list[Failure] = []
        for rd_binding, future in futures.items():
            try:
                self._result(future, "CreateAcls")
            except KafkaCallError as e:
                failures.append(_failure(binding_text(rd[rd_binding]), e))
        return failures

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> tuple[list[AclBinding], list[Failure]]:
        """Delete in one request: the bindings removed (each once) and one ``Failure`` per refused filter."""
        if not filters:
            return [], []
        rd = {to_rd_filter(f): f for f in filters}
        futures = self._admin.delete_acls(list(rd), request_timeout=self._timeout)
        removed: dict[AclBinding, None] = {}
        failures: list[Failure] = []
        for rd_filter, future in futures.items():
            try:
                for rd_binding in self._result(future, "DeleteAcls"):
                    binding = from_rd_binding(rd_binding)
                    if binding is not None:
                        removed[binding] = None
            except KafkaCallError as e:
                failures.append(_failure(_filter_text(rd[rd_filter]), e))
        return list(removed), failures

    def describe_scram(self, users: Sequence[str] | None) -> dict[str, list[tuple[ScramMechanism, int]] | Failure]:
        """Per user: its (mechanism, iterations) pairs, or the failure for that user.

        :raises CliError: not authorized (checked first: librdkafka 2.16 crashes the whole process when
            DescribeUserScramCredentials is answered with a top-level CLUSTER_AUTHORIZATION_FAILED, so it is
            never sent without DESCRIBE on the cluster).
        """
        self.require_cluster_operation(AclOperation.DESCRIBE, "DescribeUserScramCredentials")
        wanted = list(users) if users else None
        answer = self._admin.describe_user_scram_credentials(wanted, request_timeout=self._timeout)
        out: dict[str, list[tuple[ScramMechanism, int]] | Failure] = {}
        if not isinstance(answer, dict):  # every user: one future for the whole answer
            for user, description in self._result(answer, "DescribeUserScramCredentials").items():
                out[user] = _infos(description)
            return out
        for user, future in answer.items():
            try:
                out[user] = _infos(self._result(future, "DescribeUserScramCredentials"))
            except KafkaCallError as e:
                out[user] = _failure(user, e)
        return out

    def alter_scram(
        self,
        upsertions: Iterable[tuple[str, ScramMechanism, int, bytes, bytes]],
        deletions: Iterable[tuple[str, ScramMechanism]],
    ) -> list[Failure]:
        """One AlterUserScramCredentials request; upsertions are (user, mechanism, iterations, password, salt)."""
        from confluent_kafka.admin._scram import (
            ScramCredentialInfo,
            UserScramCredentialAlteration,
            UserScramCredentialDeletion,
            UserScramCredentialUpsertion,
        )
        from confluent_kafka.admin._scram import ScramMechanism as RdScramMechanism

        alterations: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(RdScramMechanism(mechanism.code), iterations), password, salt
            )
            for user, mechanism, iterations, password, salt in upsertions
        ]
        alterations += [UserScramCredentialDeletion(user, RdScramMechanism(m.code)) for user, m in deletions]
        if not alterations:
            return []
        futures = self._admin.alter_user_scram_credentials(alterations, request_timeout=self._timeout)
        failures: list[Failure] = []
        for user, future in futures.items():
            try:
                self._result(future, "AlterUserScramCredentials")
            except KafkaCallError as e:
                failures.append(_failure(user, e))
        return failures


def _infos(description: Any) -> list[tuple[ScramMechanism, int]]:
    return sorted(
        (
            (ScramMechanism.from_code(info.mechanism.value), int(info.iterations))
            for info in description.scram_credential_infos
        ),
        key=lambda pair: pair[0].code,
    )


def _failure(subject: str, error: KafkaCallError) -> Failure:
    return Failure(subject, error.error_name, error.error_message)


def _filter_text(acl_filter: AclBindingFilter) -> str:
    p, e = acl_filter.pattern_filter, acl_filter.entry_filter
    return (
        f"filter resourceType={p.resource_type}, name={p.name or '<any>'}, patternType={p.pattern_type}, "
        f"principal={e.principal or '<any>'}, host={e.host or '<any>'}, operation={e.operation}, "
        f"permissionType={e.permission_type}"
    )
