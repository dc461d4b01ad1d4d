"""Each upstream broker's ``auto.create.topics.enable``, read from that broker itself and kept per node.

Why from the broker itself: a Kafka broker applies its own setting to the Metadata requests it receives
(``KafkaApis.handleTopicMetadataRequest`` reads ``config.autoCreateTopicsEnable``), and it describes only its own
static configs: DescribeConfigs for broker "1" sent to broker 2 is refused ("Unexpected broker id, expected 2 or
empty string, but received 1"). Asking one broker about another (or asking for "", the cluster-wide *dynamic*
defaults, which leave out what server.properties says) cannot tell the value a broker acts on.

How: one DescribeConfigs (v4, or the upstream's highest below it) sent to an address names every candidate node id
as a BROKER resource with the one key. The broker answers its own id and refuses the others, so the answer also
says which node listens there: a node's advertised address is asked about that node; a bootstrap server (whose
node id the proxy does not know) is asked about every known node, and the one it answers is the node behind it.
Worked example: bootstrap ``b:9092`` asked about nodes 1 and 2 answers node 1 "Unexpected broker id …" and node 2
``auto.create.topics.enable=true``: ``b:9092`` is node 2, and node 2 auto-creates.

When: the proxy's discovery connection is asked before the proxy starts, then every node (its first read awaited at
start, at most ``FIRST_READS_SECONDS``: a hung broker must not hold the start up) and every other bootstrap server is
watched by a task of its own: read again every ``REFRESH_SECONDS`` (the setting is a read-only broker config: it
changes only when a broker restarts) and at once when a node appears or moves (``NodeDirectory.on_node_address``).
A failed read is logged once per failure streak (a WARNING saying what the proxy does meanwhile; INFO when it is
read again) and retried with a backoff from ``RETRY_FIRST_SECONDS`` doubling to ``RETRY_MAX_SECONDS``. A failure
never counts as "false": a value read before is kept, and a node never read stays unknown.

While unknown, the Metadata handler treats auto-creation as enabled, the choice that grants nothing extra: a missing
topic is asked for with auto-creation only for a caller with AUTO_CREATE on it (the broker's own setting still
decides whether it is created), and a caller without it is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers
it when auto-creation is on. Taking it as disabled instead would silently never create topics the caller may create
(the bug this module fixes). Cost: one small request per address per ``REFRESH_SECONDS``; nothing on a client's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import KafkaguardError
from kafkaguard.protocol.build import build_request, nested
from kafkaguard.protocol.codec import request_schema
from kafkaguard.proxy.nodes import NodeDirectory, UpstreamNode
from kafkaguard.proxy.upstream import Address, UpstreamConnection, UpstreamSecurity

log = logging.getLogger(__name__)

AUTO_CREATE_KEY = "auto.create.topics.enable"
#: Kafka's ConfigResource type of a broker.
BROKER_RESOURCE = 4
#: DescribeConfigs version asked (Kafka 2.6+; lower versions lack ``include_documentation``, false when absent).
DESCRIBE_CONFIGS_VERSION = 4
REFRESH_SECONDS = 300.0
#: The longest the proxy's start waits for the first reads of the brokers' settings.
FIRST_READS_SECONDS = 2.0
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
UNKNOWN_MEANS = (
    "until it is read, Metadata through it asks for auto-creation only for callers with AUTO_CREATE on the topic "
    "(the broker's own setting still applies) and answers others TOPIC_AUTHORIZATION_FAILED"
)


class SettingUnreadable(KafkaguardError):
    """The broker at an address did not tell its ``auto.create.topics.enable``; the message says why."""


async def read_auto_create(
    upstream: UpstreamConnection, candidates: Sequence[int], version: int = DESCRIBE_CONFIGS_VERSION
) -> tuple[int, bool]:
    """(the node ``upstream`` reached, its ``auto.create.topics.enable``), asking about every node id of
    ``candidates`` (see the module docstring).

    :raises SettingUnreadable: unreachable, no candidate is the broker there, or it did not say (e.g. the proxy's
        service user lacks DESCRIBE_CONFIGS on the cluster).
    """
    node_id, configs = await read_broker_configs(upstream, candidates, (AUTO_CREATE_KEY,), version)
    value = configs.get(AUTO_CREATE_KEY)
    if value is None:
        raise SettingUnreadable(f"node {node_id} did not tell {AUTO_CREATE_KEY}")
    return node_id, value.lower() == "true"


async def read_broker_configs(
    upstream: UpstreamConnection,
    candidates: Sequence[int],
    keys: Sequence[str] | None,
    version: int = DESCRIBE_CONFIGS_VERSION,
) -> tuple[int, dict[str, str | None]]:
    """(the node ``upstream`` reached, its configs ``keys`` — every one it describes when None — by name; a value
    Kafka withholds, a sensitive one, is None), asking about every node id of ``candidates`` (module docstring).

    :raises SettingUnreadable: unreachable, no candidate is the broker there, or it refused to describe itself.
    """
    if not candidates:
        raise SettingUnreadable("no upstream node known yet to ask about")
    schema = request_schema(ApiKey.DESCRIBE_CONFIGS, version)
    resource_cls = nested(schema, "DescribeConfigsResource")
    resources = tuple(
        build_request(
            resource_cls,
            resource_type=BROKER_RESOURCE,
            resource_name=str(node_id),
            configuration_keys=None if keys is None else tuple(keys),
        )
        for node_id in candidates
    )
    body = build_request(schema, resources=resources, include_synonyms=False, include_documentation=False)
    try:
        answer: Any = await upstream.call(ApiKey.DESCRIBE_CONFIGS, version, body)
    except KafkaguardError as e:
        raise SettingUnreadable(str(e)) from e
    refusals = []
    for result in answer.results:
        if int(result.error_code) != 0:
            refusals.append(
                f"node {result.resource_name}: {_error_name(int(result.error_code))} "
                f"{result.error_message or ''}".rstrip()
            )
            continue
        if result.resource_name not in {str(node_id) for node_id in candidates}:
            raise SettingUnreadable(f"answered about {result.resource_name!r}, which it was not asked")
        configs = {str(config.name): None if config.value is None else str(config.value) for config in result.configs}
        return int(result.resource_name), configs
    raise SettingUnreadable("; ".join(refusals) or "an empty DescribeConfigs answer")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


class _Watch:
    """One address watched: a node's (``node_id`` set: asked about that node) or a bootstrap server's."""

    def __init__(self, what: str, node_id: int | None, address: Address | None) -> None:
        self.what, self.node_id, self.address = what, node_id, address
        self.wake = asyncio.Event()
        self.attempted = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class AutoCreateWatcher:
    """Keeps ``nodes``' ``auto.create.topics.enable`` read (see the module docstring). Used on the event loop."""

    def __init__(
        self,
        nodes: NodeDirectory,
        security: UpstreamSecurity,
        *,
        timeout: float,
        version: int = DESCRIBE_CONFIGS_VERSION,
    ) -> None:
        self._nodes, self._security, self._timeout = nodes, security, timeout
        self.version = version
        self._watches: dict[int | Address, _Watch] = {}
        self._stopped = False

    def watch_node(self, node: UpstreamNode) -> None:
        """Read node ``node``'s setting now (it is new, or moved), then keep it read."""
        watch = self._watches.get(node.node_id)
        if watch is None:
            self._start(node.node_id, _Watch(f"upstream node {node.node_id}", node.node_id, None))
        else:
            watch.wake.set()

    def watch_bootstrap(self, address: Address) -> None:
        """Find out which node bootstrap server ``address`` is and its setting, then keep them read (unless it is a
        node's advertised address: that node's watch reads it)."""
        if address not in self._watches and self._nodes.node_at(address) is None:
            self._start(address, _Watch(f"upstream bootstrap server {address}", None, address))

    async def first_reads(self, timeout: float = FIRST_READS_SECONDS) -> None:
        """Wait until every node watched so far has been asked once (whatever the outcome), at most ``timeout``
        seconds: a broker that hangs must not hold up the proxy's start (the others' clients are waiting); its
        setting stays unknown until its watch reads it."""
        waits = [w.attempted.wait() for w in self._watches.values() if w.node_id is not None]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waits)

    async def stop(self) -> None:
        self._stopped = True
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _start(self, key: int | Address, watch: _Watch) -> None:
        if self._stopped:
            return
        self._watches[key] = watch
        watch.task = asyncio.create_task(self._run(watch), name=f"reading {watch.what}'s {AUTO_CREATE_KEY}")

    async def _run(self, watch: _Watch) -> None:
        failures = 0
        while True:
            watch.wake.clear()
            try:
                await self._read(watch)
            except Exception as e:  # noqa: BLE001 - unreachable, refused or malformed: the watch goes on regardless
                failures += 1
                if failures == 1:  # once per failure streak: a dead server is not a log line per retry
                    why = str(e) if isinstance(e, SettingUnreadable) else f"{e.__class__.__name__}: {e}"
                    log.warning(
                        "cannot read %s of %s (retrying with backoff): %s; %s",
                        AUTO_CREATE_KEY,
                        watch.what,
                        why,
                        UNKNOWN_MEANS,
                    )
                delay = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** min(failures - 1, 30))
            else:
                if failures:
                    log.info("read %s of %s after %d failed attempts", AUTO_CREATE_KEY, watch.what, failures)
                failures = 0
                delay = REFRESH_SECONDS
            watch.attempted.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await watch.wake.wait()

    async def _read(self, watch: _Watch) -> None:
        nodes = self._nodes
        if watch.node_id is not None:
            address, candidates = nodes.address_of(watch.node_id), [watch.node_id]
        else:
            address, candidates = watch.address, nodes.node_ids
        if address is None:
            raise SettingUnreadable("its address is unknown")
        upstream = UpstreamConnection([address], self._security, timeout=self._timeout)
        try:
            node_id, enabled = await read_auto_create(upstream, candidates, self.version)
        finally:
            upstream.close()
        nodes.record_auto_create(node_id, enabled, address=address)
