"""Deciding distinct access tuples with the core StandardAuthorizer, inside ``mapInArrow``.

Each partition builds one authorizer per ACL set from the broadcast payload, then decides its rows with a
per-partition result cache (replay rows repeat a tuple once per logged decision). Decisions are therefore the
core's own, by construction; no rule is re-implemented in Spark.

Columns added per ACL set with prefix ``p`` (e.g. ``current_``):

* ``{p}decision`` — ``ALLOWED`` / ``DENIED`` (from ``authorize``);
* with ``explain``: ``{p}rule`` (as Kafka's audit log prints it), ``{p}acl_id`` (the deciding ACL, or null) and
  ``{p}matching_ids`` (every matching ACL, most specific first), from ``explain``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from kafkaguard.authorizer import MatchingAclRule, StandardAuthorizer
from kafkaguard.model import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from kafkaguard.pipeline.acls import AclSet

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql.types import StructField

KEY = ("principal", "host", "operation", "resource_type", "resource_name")
_Outcome = tuple[str, str | None, str | None, list[str] | None]


def output_fields(prefixes: Mapping[str, object], explain: bool) -> list[StructField]:
    from pyspark.sql.types import ArrayType, StringType, StructField

    fields = []
    for prefix in prefixes:
        fields.append(StructField(f"{prefix}decision", StringType(), True))
        if explain:
            fields.append(StructField(f"{prefix}rule", StringType(), True))
            fields.append(StructField(f"{prefix}acl_id", StringType(), True))
            fields.append(StructField(f"{prefix}matching_ids", ArrayType(StringType(), True), True))
    return fields


def decide_rows(
    authorizer: StandardAuthorizer,
    rows: Iterator[tuple[str, str, str, str, str]],
    explain: bool,
    cache: dict[tuple[str, str, str, str, str], _Outcome],
) -> Iterator[_Outcome]:
    """Decide each (principal, host, operation, resource_type, resource_name) row; names are the enum names."""
    actions: dict[tuple[str, str, str], Action] = {}
    for row in rows:
        found = cache.get(row)
        if found is None:
            principal, host, operation, resource_type, name = row
            action_key = (operation, resource_type, name)
            action = actions.get(action_key)
            if action is None:
                pattern = ResourcePattern(ResourceType[resource_type], name)
                action = actions[action_key] = Action(AclOperation[operation], pattern)
            context = RequestContext(principal, host)
            if explain:
                decision = authorizer.explain(context, action)
                rule = decision.rule
                acl_id = rule.acl.id if isinstance(rule, MatchingAclRule) else None
                found = (decision.result.value, str(rule), acl_id, [acl.id for acl in decision.matching_acls])
            else:
                found = (authorizer.authorize_one(context, action).value, None, None, None)
            cache[row] = found
        yield found


def make_decider(
    payloads: Mapping[str, Broadcast[str]], explain: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: adds the decision columns of every ACL set (keyed by column prefix)."""

    def decide_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        authorizers = {prefix: AclSet.from_payload(bc.value).authorizer() for prefix, bc in payloads.items()}
        caches: dict[str, dict[tuple[str, str, str, str, str], _Outcome]] = {p: {} for p in authorizers}
        for batch in batches:
            columns = [batch.column(batch.schema.get_field_index(name)).to_pylist() for name in KEY]
            arrays = list(batch.columns)
            names = list(batch.schema.names)
            for prefix, authorizer in authorizers.items():
                outcomes = list(decide_rows(authorizer, zip(*columns, strict=True), explain, caches[prefix]))
                arrays.append(pa.array([o[0] for o in outcomes], pa.string()))
                names.append(f"{prefix}decision")
                if explain:
                    arrays.append(pa.array([o[1] for o in outcomes], pa.string()))
                    arrays.append(pa.array([o[2] for o in outcomes], pa.string()))
                    arrays.append(pa.array([o[3] for o in outcomes], pa.list_(pa.string())))
                    names += [f"{prefix}rule", f"{prefix}acl_id", f"{prefix}matching_ids"]
            yield pa.RecordBatch.from_arrays(arrays, names=names)

    return decide_partition
