"""Deciding distinct access tuples with the core StandardAuthorizer, inside ``mapInArrow``.

Each Python worker builds one authorizer per ACL set from the broadcast (under Spark Connect: inlined) payload, once per
``decide`` call (not once per partition: building one is O(ACLs), a noticeable cost at 10k). Decisions only
(``simulate``): the rows of each Arrow batch are grouped by (principal, host) and each group is decided in one batched
``authorize`` call, faster than one call per row (see docs/benchmarks.md, "Figures from the code"). With ``explain``
(``replay``, ``usage``): row by row, with a per-partition result cache (replay rows repeat a tuple once per logged
decision). Decisions are therefore the core's own, by construction; no rule is re-implemented in Spark.

Columns added per ACL set with prefix ``p`` (e.g. ``current_``):

* ``{p}decision`` — ``ALLOWED`` / ``DENIED`` (from ``authorize``);
* with ``explain``: ``{p}rule`` (as Kafka's audit log prints it), ``{p}acl_id`` (the deciding ACL, or null) and
  ``{p}matching_ids`` (every matching ACL, most specific first), from ``explain``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from kafkaguard.authorizer import MatchingAclRule, StandardAuthorizer
from kafkaguard.model import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from kafkaguard.pipeline.acls import AclSet

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructField

    from kafkaguard.pipeline.session import Shared

KEY = ("principal", "host", "operation", "resource_type", "resource_name")
_Outcome = tuple[str, str | None, str | None, list[str] | None]
_Cache = dict[tuple[str, str, str, str, str], _Outcome]

#: In each (reused) Python worker: per ``make_decider`` call (its token), the authorizer of each ACL set. Only the
#: most recent calls are kept.
_WORKER_STATE: dict[str, dict[str, StandardAuthorizer]] = {}
_WORKER_STATE_KEEP = 4


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
    cache: _Cache,
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


def decide_batch(
    authorizers: Sequence[StandardAuthorizer], columns: Sequence[list[str]], actions: dict[tuple[str, str, str], Action]
) -> dict[int, list[str]]:
    """The decisions (``ALLOWED``/``DENIED``) of each authorizer (by position) for each row of ``KEY`` ``columns``:
    the rows of each (principal, host) are decided in one ``authorize`` call, which is how the core is fastest.
    ``actions`` caches the ``Action`` of each (operation, resource_type, name) across calls."""
    principals, hosts, operations, resource_types, resource_names = columns
    by_context: dict[tuple[str, str], list[int]] = {}
    for i, context_key in enumerate(zip(principals, hosts, strict=True)):
        rows = by_context.get(context_key)
        if rows is None:
            by_context[context_key] = [i]
        else:
            rows.append(i)
    decisions: dict[int, list[str]] = {k: [""] * len(principals) for k in range(len(authorizers))}
    for (principal, host), rows in by_context.items():
        batch = []
        for i in rows:
            action_key = (operations[i], resource_types[i], resource_names[i])
            action = actions.get(action_key)
            if action is None:
                pattern = ResourcePattern(ResourceType[action_key[1]], action_key[2])
                action = actions[action_key] = Action(AclOperation[action_key[0]], pattern)
            batch.append(action)
        context = RequestContext(principal, host)
        for k, authorizer in enumerate(authorizers):
            out = decisions[k]
            for i, result in zip(rows, authorizer.authorize(context, batch), strict=True):
                out[i] = result.value
    return decisions


def worker_authorizers(token: str, payloads: Mapping[str, Shared]) -> dict[str, StandardAuthorizer]:
    """The authorizers of one ``make_decider`` call, built once per Python worker. (A module-level function, so that
    the pickled decider reaches this module's ``_WORKER_STATE`` instead of a pickled copy of it.)"""
    state = _WORKER_STATE.get(token)
    if state is None:
        while len(_WORKER_STATE) >= _WORKER_STATE_KEEP:
            del _WORKER_STATE[next(iter(_WORKER_STATE))]
        state = {prefix: AclSet.from_payload(bc.value).authorizer() for prefix, bc in payloads.items()}
        _WORKER_STATE[token] = state
    return state


def make_decider(
    payloads: Mapping[str, Shared], explain: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: adds the decision columns of every ACL set (keyed by column prefix)."""
    token = uuid.uuid4().hex

    def decide_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        state = worker_authorizers(token, payloads)
        caches: dict[str, _Cache] = {prefix: {} for prefix in state}
        actions: dict[tuple[str, str, str], Action] = {}
        for batch in batches:
            columns = [batch.column(batch.schema.get_field_index(name)).to_pylist() for name in KEY]
            arrays = list(batch.columns)
            names = list(batch.schema.names)
            if not explain:
                decided = decide_batch(list(state.values()), columns, actions)
                for position, prefix in enumerate(state):
                    arrays.append(pa.array(decided[position], pa.string()))
                    names.append(f"{prefix}decision")
                yield pa.RecordBatch.from_arrays(arrays, names=names)
                continue
            for prefix, authorizer in state.items():
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
