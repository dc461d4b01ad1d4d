"""reserve_descriptors grows the fd table (``FDSize`` in /proc/self/status) without leaving an fd open, and never
past the soft RLIMIT_NOFILE. Each case runs in a fresh interpreter: a table never shrinks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, os, resource, sys
from kafkaguard.node.descriptors import reserve_descriptors
soft = int(sys.argv[2])
if soft:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
def fd_size():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("FDSize:"))
before, open_before = fd_size(), len(os.listdir("/proc/self/fd"))
reserved = reserve_descriptors(int(sys.argv[1]))
print(json.dumps({"before": before, "after": fd_size(), "reserved": reserved,
                  "leaked": len(os.listdir("/proc/self/fd")) - open_before}))
"""


def probe(count: int, soft: int = 0) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(count), str(soft)], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    result: dict[str, int] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FDSize is Linux's")
def test_the_table_is_grown_once_and_nothing_is_left_open():
    result = probe(3000, soft=4096)
    assert result["before"] < 3000 <= result["after"]
    assert result["reserved"] == 3000
    assert result["leaked"] == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FDSize is Linux's")
def test_the_reservation_stops_at_the_soft_limit():
    result = probe(100_000, soft=2048)
    assert result["reserved"] == 2048
    assert 2048 <= result["after"] < 100_000
    assert result["leaked"] == 0
