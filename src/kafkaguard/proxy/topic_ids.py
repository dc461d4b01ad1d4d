"""Topic ids ↔ names, as the upstream last said: so a request that names topics by id (Fetch v13+, Metadata v12 by
id, DeleteTopics v6) is still authorized by name, as ``KafkaApis`` authorizes it (Kafka resolves ids with its
``metadataCache.topicIdsToNames()`` first, then checks the names).

Kept current from the upstream Metadata answers the proxy already reads (``learn`` for each topic answered with its
name and id, ``forget_id`` / ``forget_name`` for UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, ``replace`` for an
all-topics answer), and refreshed on demand: an id a request names that is not known here is asked of the upstream
(``refresh``: one Metadata v12 by those ids) before the request is answered. An id still unknown after that does not
exist upstream, and is answered as Kafka answers an unknown id (UNKNOWN_TOPIC_ID).

Replace, never merge. Kafka never reuses a topic id and never renames a topic, so an id names at most one topic for
ever; a *name* does not: delete ``orders`` (id A) and create it again, and ``orders`` is id B. The two maps are kept
a bijection, and each fact replaces whatever it contradicts. Worked example:

    learn("orders", A)     by_id {A: orders}            by_name {orders: A}
    learn("orders", B)     by_id {B: orders}            by_name {orders: B}     (A forgotten: orders is B now)
    name_of(A)             None → ``refresh`` asks the upstream, which answers UNKNOWN_TOPIC_ID → forget_id(A)
    learn("payments", A)   impossible in Kafka; were it said, A → payments replaces A → orders (and orders → A)

So no id ever resolves to a name the upstream gave another id, and ``id_of(name)`` is the id last seen for that name.
A stale entry (A → orders after orders was re-created, before the proxy saw it) resolves A only to the topic A really
was: the request is authorized on that name and forwarded by id A, which the upstream answers UNKNOWN_TOPIC_ID; an id
never gains access to a topic it does not name.

Cost model: ``name_of`` / ``id_of`` are one dict probe; ``learn`` a few probes and at most one eviction; ``replace``
builds two new dicts, O(topics), once per all-topics Metadata answer (which costs the upstream and the wire far more).
Memory is bounded: at most ``max_topics`` entries (default 50,000: ≈ 20 MB with two dict slots, a UUID and a name of
~40 characters each); beyond it the least recently learned entry is dropped, which costs a ``refresh`` later, never
a wrong answer. Used on the event loop only (no locks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.store.uuids import ZERO_UUID

#: The most topics remembered (see the module docstring's cost model).
MAX_TOPICS = 50_000
#: The Metadata version that names topics by id (Kafka 3.1+: every upstream that serves Fetch v13 serves it).
BY_ID_VERSION = 12


class TopicIds:
    """The upstream's topic ids and names (see the module docstring)."""

    def __init__(self, max_topics: int = MAX_TOPICS) -> None:
        if max_topics < 1:
            raise ValueError(f"max_topics must be at least 1, not {max_topics}")
        self.max_topics = max_topics
        self._by_id: dict[UUID, str] = {}
        self._by_name: dict[str, UUID] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def name_of(self, topic_id: UUID) -> str | None:
        return self._by_id.get(topic_id)

    def id_of(self, name: str) -> UUID | None:
        return self._by_name.get(name)

    def unknown(self, ids: Iterable[UUID]) -> list[UUID]:
        """The ``ids`` not known here, each once, in order."""
        return [i for i in dict.fromkeys(ids) if i not in self._by_id]

    def learn(self, name: str, topic_id: UUID) -> None:
        """The upstream said topic ``name`` has id ``topic_id``: that replaces what either was paired with."""
        if topic_id == ZERO_UUID:
            return  # an upstream without topic ids (or a refusal) says nothing about one
        if self._by_id.get(topic_id) == name:
            return
        self.forget_id(topic_id)
        self.forget_name(name)
        if len(self._by_id) >= self.max_topics:  # the least recently learned goes (a refresh brings it back)
            oldest = next(iter(self._by_id))
            self.forget_id(oldest)
        self._by_id[topic_id] = name
        self._by_name[name] = topic_id

    def forget_id(self, topic_id: UUID) -> None:
        name = self._by_id.pop(topic_id, None)
        if name is not None and self._by_name.get(name) == topic_id:
            del self._by_name[name]

    def forget_name(self, name: str) -> None:
        topic_id = self._by_name.pop(name, None)
        if topic_id is not None and self._by_id.get(topic_id) == name:
            del self._by_id[topic_id]

    def replace(self, pairs: Iterable[tuple[str, UUID]]) -> None:
        """Every topic the upstream has (an all-topics answer): what is not listed no longer exists."""
        self._by_id.clear()
        self._by_name.clear()
        for name, topic_id in pairs:
            self.learn(name, topic_id)

    def observe(self, topics: Iterable[Any], *, complete: bool = False) -> None:
        """The topics of an upstream Metadata answer (v10+ carry ids): each named one learned, an unknown id or name
        forgotten. ``complete``: the answer lists every topic (a request for all topics)."""
        named = []
        for topic in topics:
            topic_id = getattr(topic, "topic_id", ZERO_UUID)
            if topic.error_code == ErrorCode.unknown_topic_id:
                self.forget_id(topic_id)
            elif topic.error_code == ErrorCode.unknown_topic_or_partition and topic.name is not None:
                self.forget_name(topic.name)
            elif topic.name is not None and topic_id != ZERO_UUID:
                named.append((topic.name, topic_id))
        if complete:
            self.replace(named)
        else:
            for name, topic_id in named:
                self.learn(name, topic_id)


#: How the proxy asks the upstream a request of its own: ``(api_key, api_version, body) -> decoded answer``
#: (``Upstream.call``, after the answers relayed before it).
Call = Callable[[ApiKey, int, Any], Awaitable[Any]]


async def refresh(call: Call, ids: Collection[UUID], topic_ids: TopicIds) -> None:
    """Ask the upstream for ``ids`` (one Metadata v12 by id, never creating anything) and record its answer: each id
    it knows gets its name, each it does not is forgotten."""
    if not ids:
        return
    body = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=i, name=None) for i in ids),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer = await call(ApiKey.METADATA, BY_ID_VERSION, body)
    topic_ids.observe(answer.topics)
    answered = {topic.topic_id for topic in answer.topics}
    for missing in set(ids) - answered:  # an answer that leaves an id out does not vouch for it
        topic_ids.forget_id(missing)


async def resolve(
    call: Call, ids: Iterable[UUID | None], topic_ids: TopicIds, *, fresh: bool = False
) -> dict[UUID, str]:
    """The names of ``ids`` the upstream has (those known here, the others asked of it in one request; ``fresh``:
    all of them asked); an id absent from the result does not exist upstream."""
    wanted = list(dict.fromkeys(ids))
    real = [i for i in wanted if i is not None and i != ZERO_UUID]  # the zero id (kio: None) names no topic
    await refresh(call, real if fresh else topic_ids.unknown(real), topic_ids)
    return {i: name for i in real if (name := topic_ids.name_of(i)) is not None}
