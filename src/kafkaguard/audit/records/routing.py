"""Routing rules of the audit trail's Kafka sink: which events go to which topic, and which are dropped.

A rule matches on any of: ``category`` (authorization, management, authentication, shadow, broker), ``result``
(allowed or denied for authorization and shadow, denied for broker; success or failure for authentication and
management), ``principal`` (exact, or a prefix when it ends in ``*``) and ``resource`` (a prefix of the event's
subject, e.g. ``TOPIC:pii-``); a field left out matches everything. Its ``topic`` is where a matching event goes,
or ``drop``. The first matching rule wins; an event no rule matches goes to the default topic. Worked example::

    routes:                                       event                                   → topic
      - {category: authorization, result: allowed, resource: "TOPIC:metrics-", topic: drop}
      - {principal: "User:svc-*", category: authorization, topic: audit-services}
      - {category: authentication, result: failure, topic: audit-security}
    default topic: audit-events

    Produce to metrics-cpu, allowed, User:svc-a                                           → dropped (rule 1)
    Produce to metrics-cpu, denied,  User:svc-a                                           → audit-services (rule 2)
    failed SCRAM login as mallory                                                         → audit-security (rule 3)
    User:bob created an ACL                                                               → audit-events (default)

Cost model: ``route`` is O(rules) string comparisons per event, in the audit writer's thread. Standard library only;
``parse_routes`` refuses a bad rule with a message naming the rule and what to fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkaguard.audit.records.cloudevents import (
    AUTHENTICATION,
    AUTHORIZATION,
    BROKER,
    CATEGORIES,
    MANAGEMENT,
    SHADOW,
)

#: The ``topic`` that drops what a rule matches.
DROP = "drop"
#: The results a rule may name, by category.
RESULTS: Mapping[str, tuple[str, ...]] = {
    AUTHORIZATION: ("allowed", "denied"),
    SHADOW: ("allowed", "denied"),
    AUTHENTICATION: ("success", "failure"),
    MANAGEMENT: ("success", "failure"),
    BROKER: ("denied",),
}
_ALL_RESULTS = ("allowed", "denied", "success", "failure")
#: Kafka's rule for topic names (``Topic.validate``): legal characters, at most 249, not "." or "..".
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_KEYS = ("category", "result", "principal", "resource", "topic")


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid Kafka topic name, or None."""
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed (Kafka refuses '.' and '..')"
    if not _TOPIC.match(name):
        return (
            f"topic name {name!r} is not a Kafka topic name: 1 to 249 characters of ASCII letters, digits, '.', '_' "
            "and '-'"
        )
    return None


@dataclass(frozen=True, slots=True)
class Route:
    """One rule: what it matches (None: anything) and where a match goes (``None``: dropped)."""

    category: str | None = None
    result: str | None = None
    principal: str | None = None
    resource: str | None = None
    topic: str | None = None

    def matches(self, category: str, result: str | None, principal: str | None, subject: str) -> bool:
        if self.category is not None and self.category != category:
            return False
        if self.result is not None and self.result != result:
            return False
        if self.principal is not None:
            if principal is None:
                return False
            if self.principal.endswith("*"):
                if not principal.startswith(self.principal[:-1]):
                    return False
            elif principal != self.principal:
                return False
        return self.resource is None or subject.startswith(self.resource)


def event_result(category: str, data: Mapping[str, object]) -> str | None:
    """The word a rule's ``result`` matches: allowed/denied of a decision, success/failure of a login or change."""
    if category in (AUTHORIZATION, SHADOW):
        decision = data.get("decision")
        return decision.lower() if isinstance(decision, str) else None
    if category == BROKER:  # the broker refused what kafkaguard allowed
        return "denied"
    result = data.get("result")
    if not isinstance(result, str):
        return None
    return "success" if result == "SUCCESS" else "failure"


def event_principal(category: str, data: Mapping[str, object]) -> str | None:
    """Who the event is about: the caller of a decision, the actor of a change, who logged in (or tried to)."""
    if category == MANAGEMENT:
        actor = data.get("actor")
        principal = actor.get("principal") if isinstance(actor, Mapping) else None
    elif category == AUTHENTICATION:
        principal = data.get("principal") or data.get("attempted_name")
    else:
        principal = data.get("principal")
    return principal if isinstance(principal, str) else None


@dataclass(frozen=True, slots=True)
class Router:
    """The rules, in order, and the default topic (None: events no rule matches are dropped)."""

    routes: tuple[Route, ...]
    default_topic: str | None

    def route(self, category: str, subject: str, data: Mapping[str, object]) -> str | None:
        """The topic of one event, or None: dropped."""
        if not self.routes:
            return self.default_topic
        result = event_result(category, data)
        principal = event_principal(category, data)
        for rule in self.routes:
            if rule.matches(category, result, principal, subject):
                return rule.topic
        return self.default_topic

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic an event may go to."""
        named = [rule.topic for rule in self.routes if rule.topic is not None]
        if self.default_topic is not None:
            named.append(self.default_topic)
        return tuple(dict.fromkeys(named))


def parse_routes(rules: Sequence[object]) -> tuple[Route, ...]:
    """The rules of a YAML list of mappings (``category``, ``result``, ``principal``, ``resource``, ``topic``).

    :raises ValueError: a rule that is not a mapping, has an unknown key, names an unknown category or a result the
        category does not have, an empty principal or resource, or no valid topic (a Kafka topic name, or ``drop``).
    """
    parsed = []
    for index, rule in enumerate(rules, start=1):
        where = f"route {index}"
        if not isinstance(rule, Mapping):
            raise ValueError(f"{where} is not a mapping such as {{category: authorization, topic: audit-events}}")
        unknown = sorted(str(key) for key in rule if key not in _KEYS)
        if unknown:
            raise ValueError(f"{where} has unknown key(s) {', '.join(unknown)}; a route has {', '.join(_KEYS)}")
        values: dict[str, str | None] = {}
        for key in _KEYS:
            value = rule.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{where}: {key} must be a string, not {value!r}")
            values[key] = value
        category, result = values["category"], values["result"]
        if category is not None and category not in CATEGORIES:
            raise ValueError(f"{where}: unknown category {category!r}; the categories are {', '.join(CATEGORIES)}")
        allowed = RESULTS[category] if category is not None else _ALL_RESULTS
        if result is not None and result not in allowed:
            scope = f"category {category}" if category is not None else "a route"
            raise ValueError(f"{where}: result {result!r} is not one of {scope}'s results ({', '.join(allowed)})")
        for key in ("principal", "resource"):
            if values[key] == "":
                raise ValueError(f"{where}: {key} is empty; leave it out to match every {key}")
        topic = values["topic"]
        if topic is None:
            raise ValueError(f"{where} has no topic: name the topic its events go to, or 'drop'")
        if topic != DROP:
            problem = topic_name_error(topic)
            if problem is not None:
                raise ValueError(f"{where}: {problem}")
        target = None if topic == DROP else topic
        parsed.append(Route(category, result, values["principal"], values["resource"], target))
    return tuple(parsed)
