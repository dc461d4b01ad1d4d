"""mypy checks the fields a handler sets through ``protocol.builders``: a misspelt field, a field no supported version
declares (DescribeClusterBroker's ``is_fenced`` is kio's v2, the server answers v0–v1: ``build`` would drop it at
run time), a field of another API and a value of the wrong type are errors on their own lines; a correct response
passes. In the proxy's builders (``proxy.builders``), a misspelt field and one above the proxy's cap (DeleteTopics
v6's ``topic_id``) are errors too, as are the same mistakes in a change through ``rebuild_*`` and a handler
registered for another API (``protocol.routes.route``).

One mypy run over the snippets (the builders' imports make it the slow part: a few seconds, cold cache)."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SNIPPET_HEAD = """\
from kio.schema.errors import ErrorCode

from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.builders import describe_cluster_broker, describe_cluster_response
from kafkaguard.protocol.messages import DescribeClusterResponse
"""

CORRECT = (
    SNIPPET_HEAD
    + """

def answer(cls: type[DescribeClusterResponse]) -> DescribeClusterResponse:
    return describe_cluster_response(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id="c",
        controller_id=1,
        brokers=(describe_cluster_broker(cls, broker_id=1, host="h", port=9092, rack=None),),
        cluster_authorized_operations=0,
    )
"""
)

# mypy reports a wrong keyword at the line its call starts on: one call per line.
WRONG = (
    SNIPPET_HEAD
    + """

def wrong(cls: type[DescribeClusterResponse]) -> None:
    describe_cluster_broker(cls, broker_idd=1, host="h", port=9092, rack=None)  # misspelt
    describe_cluster_broker(cls, broker_id=1, host="h", port=9092, rack=None, is_fenced=False)  # v2 only
    describe_cluster_broker(cls, broker_id=1, host="h", port="9092", rack=None)  # wrong type
    describe_cluster_response(cls, topics=())  # a field of another API (and the required ones missing)
"""
)


# The proxy's builders (proxy.builders, from CAPS): DeleteTopics v6's ``topic_id`` is above the proxy's cap.
PROXY_WRONG = """\
from kio.schema.errors import ErrorCode

from kafkaguard.protocol.routes import route
from kafkaguard.proxy.builders import (
    OffsetCommitResponseTopic,
    deletable_topic_result,
    offset_commit_response_topic,
    rebuild_offset_commit_response_topic,
)
from kafkaguard.proxy.handlers.produce import produce
from kafkaguard.proxy.messages import FETCH, DeleteTopicsResponse, OffsetCommitResponse


def wrong(cls: type[DeleteTopicsResponse], commit: type[OffsetCommitResponse], t: OffsetCommitResponseTopic) -> None:
    deletable_topic_result(cls, name="t", error_code=ErrorCode.none, error_mesage=None)  # misspelt
    offset_commit_response_topic(commit, name="t", partitions=(), topic_id=None)  # v10 only, above the cap
    rebuild_offset_commit_response_topic(t, partitions=(), topic_id=None)  # rebuilt: the same fields checked
    rebuild_offset_commit_response_topic(t, name=1)  # wrong type
    rebuild_offset_commit_response_topic(t, name="t", partitions=())
    route(FETCH, produce)  # a Produce handler registered for Fetch
"""


def _lines_marked(source: str) -> set[int]:
    return {number for number, line in enumerate(source.splitlines(), start=1) if "  # " in line}


def test_mypy_reports_exactly_the_wrong_fields_and_passes_a_correct_response(tmp_path: Path) -> None:
    (tmp_path / "correct.py").write_text(CORRECT)
    (tmp_path / "wrong.py").write_text(WRONG)
    (tmp_path / "proxy_wrong.py").write_text(PROXY_WRONG)
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\npython_version = 3.11\nmypy_path = {ROOT / 'src'}\n"
        f"cache_dir = {tmp_path / 'cache'}\nfollow_imports = silent\n"
    )
    stdout, stderr, _status = api.run(
        ["--config-file", str(config), *(str(tmp_path / name) for name in ("correct.py", "wrong.py", "proxy_wrong.py"))]
    )
    errors: dict[str, set[int]] = {"correct.py": set(), "wrong.py": set(), "proxy_wrong.py": set()}
    for found in re.finditer(r"^(?:.*[/\\])?(\w+\.py):(\d+): error:", stdout, re.MULTILINE):
        errors[found[1]].add(int(found[2]))
    expected = {"correct.py": set(), "wrong.py": _lines_marked(WRONG), "proxy_wrong.py": _lines_marked(PROXY_WRONG)}
    assert errors == expected, stdout + stderr
    assert 'Unexpected keyword argument "broker_idd"' in stdout
    assert 'Unexpected keyword argument "is_fenced"' in stdout
    assert 'Unexpected keyword argument "topics"' in stdout
    assert 'Unexpected keyword argument "error_mesage"' in stdout
    assert 'Unexpected keyword argument "topic_id" for "offset_commit_response_topic"' in stdout
    assert 'Unexpected keyword argument "topic_id" for "rebuild_offset_commit_response_topic"' in stdout
    assert 'Argument 2 to "route" has incompatible type' in stdout
