"""Resource patterns and their filters, with exactly Kafka's matching (SEMANTICS.md §6.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafkaguard.errors import InvalidAclError
from kafkaguard.model.enums import PatternType, ResourceType

#: The only legal name of the CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL ACL with this name applies to every resource of its type.
WILDCARD_RESOURCE = "*"


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """What a stored ACL applies to: a type, a name and how the name matches (LITERAL or PREFIXED).

    As in Kafka, filter-only values (resource type ANY, pattern type ANY or MATCH) cannot be part of a pattern;
    UNKNOWN values can, so that a binding decoded from a newer client can be reported back as invalid.
    """

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.ANY:
            raise InvalidAclError("resource_type must not be ANY in a resource pattern (ANY is for filters)")
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            raise InvalidAclError(
                f"pattern_type must not be {self.pattern_type} in a resource pattern (it is for filters)"
            )
        if not isinstance(self.name, str):
            raise InvalidAclError("resource name must be a string")

    @property
    def is_wildcard(self) -> bool:
        return self.pattern_type is PatternType.LITERAL and self.name == WILDCARD_RESOURCE

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return f"{self.resource_type.pascal_name}:{self.pattern_type}:{self.name}"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects stored resource patterns; ``None`` name means any name (SEMANTICS.md §6.1)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    ANY: ClassVar[ResourcePatternFilter]

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``, rule by rule."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        filter_pattern = self.pattern_type
        if filter_pattern not in (PatternType.ANY, PatternType.MATCH) and filter_pattern is not pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if filter_pattern is PatternType.ANY or filter_pattern is pattern.pattern_type:
            return self.name == pattern.name
        # MATCH: the stored patterns that would apply to a resource with this concrete name.
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        """Kafka's message for the first field that keeps this filter from naming one pattern."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type.is_unknown:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type.is_unknown:
            return "Resource pattern type is UNKNOWN."
        return None

    @property
    def is_unknown(self) -> bool:
        return self.resource_type.is_unknown or self.pattern_type.is_unknown


ResourcePatternFilter.ANY = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)
