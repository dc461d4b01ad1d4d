"""ShardedMap behaves as an immutable dict: every update leaves the original untouched."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.authorizer.sharded import SHARDS, ShardedMap

keys = st.text(alphabet="abcdef", max_size=4)
updates = st.lists(st.dictionaries(keys, st.one_of(st.none(), st.integers(0, 9)), max_size=12), max_size=6)


@given(st.dictionaries(keys, st.integers(0, 9), max_size=30), updates)
def test_updates_agree_with_a_dict_and_never_change_the_original(initial: dict[str, int], batches):
    model = dict(initial)
    current = ShardedMap.from_items(initial.items())
    snapshots = [(current, dict(model))]
    for batch in batches:
        current = current.updated(batch)
        for key, value in batch.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        snapshots.append((current, dict(model)))
    for sharded, expected in snapshots:
        assert dict(sharded.items()) == expected
        assert len(sharded) == len(expected)
        assert sorted(sharded) == sorted(expected)
        for key in expected:
            assert key in sharded and sharded[key] == expected[key] and sharded.get(key) == expected[key]
        assert sharded.get("zzzzz") is None and "zzzzz" not in sharded


def test_an_update_copies_only_the_touched_shard():
    base = ShardedMap.from_items((f"k{i}", i) for i in range(1000))
    changed = base.updated({"k1": 99})
    shared = sum(a is b for a, b in zip(base.shards, changed.shards, strict=True))
    assert shared == SHARDS - 1
    assert base["k1"] == 1 and changed["k1"] == 99


def test_empty_map_and_no_op_update():
    empty: ShardedMap[str, int] = ShardedMap()
    assert len(empty) == 0 and list(empty) == [] and empty.updated({}) is empty
    grown = empty.updated({"a": 1, "b": None})
    assert dict(grown.items()) == {"a": 1} and len(grown) == 1 and len(empty) == 0
