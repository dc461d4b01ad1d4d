"""The spool: records come out in the order they went in, across segments and across a restart; the bound drops
and counts; a torn or corrupt tail is logged and cut, never a crash."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkaguard.audit.spool import Spool, SpoolItem
from kafkaguard.errors import InvalidConfigError


def item(n: int, size: int = 100) -> SpoolItem:
    return SpoolItem("audit", f"k{n}".encode(), f"{n:08d}".encode().ljust(size, b"."))


def drain(spool: Spool, batch: int = 7) -> list[int]:
    """Read and commit everything, a batch at a time, as the sender does."""
    seen = []
    while found := spool.read(batch):
        seen += [int(found_item.value[:8]) for _, found_item in found]
        spool.commit(found[-1][0])
    return seen


def test_records_come_out_in_order_across_segments_and_segments_are_deleted(tmp_path: Path):
    spool = Spool(tmp_path, max_bytes=1024 * 1024, segment_bytes=1000)
    spool.open()
    assert spool.append([item(n) for n in range(50)]) == 0
    assert len(list(tmp_path.glob("*.seg"))) > 3
    assert drain(spool) == list(range(50))
    assert len(list(tmp_path.glob("*.seg"))) == 1  # only the tail is left
    assert spool.pending_bytes == 0
    spool.close()


def test_a_restart_resumes_after_the_last_commit_in_order(tmp_path: Path):
    spool = Spool(tmp_path, max_bytes=1024 * 1024, segment_bytes=1000)
    spool.open()
    spool.append([item(n) for n in range(30)])
    first = spool.read(12)
    spool.commit(first[-1][0])
    spool.read(5)  # read but not acknowledged: sent again after the restart
    spool.close()

    again = Spool(tmp_path, max_bytes=1024 * 1024, segment_bytes=1000)
    again.open()
    again.append([item(n) for n in range(30, 40)])
    assert drain(again) == list(range(12, 40))
    again.close()


def test_beyond_the_bound_records_are_dropped_and_counted(tmp_path: Path):
    spool = Spool(tmp_path, max_bytes=64 * 1024, segment_bytes=8 * 1024)
    spool.open()
    frame = len(item(0, 1000).frame())
    fits = (64 * 1024) // frame
    dropped = spool.append([item(n, 1000) for n in range(fits + 10)])
    assert dropped == 10 and spool.dropped == 10
    assert spool.size_bytes <= 64 * 1024
    assert sum(p.stat().st_size for p in tmp_path.glob("*.seg")) <= 64 * 1024
    assert drain(spool) == list(range(fits))  # the oldest are kept: the backlog stays whole, the newest are lost
    assert spool.append([item(999, 1000)]) == 0  # room again once sent
    spool.close()


def test_a_torn_tail_is_cut_with_a_warning_and_new_records_follow_the_good_ones(tmp_path: Path, caplog):
    spool = Spool(tmp_path, max_bytes=1024 * 1024)
    spool.open()
    spool.append([item(n) for n in range(5)])
    spool.close()
    [segment] = tmp_path.glob("*.seg")
    with segment.open("ab") as out:
        out.write(item(5).frame()[:30])  # a crash in the middle of a write

    again = Spool(tmp_path, max_bytes=1024 * 1024)
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.spool"):
        again.open()
    assert any("not a whole record" in r.getMessage() and segment.name in r.getMessage() for r in caplog.records)
    again.append([item(6)])
    assert drain(again) == [0, 1, 2, 3, 4, 6]
    again.close()


def test_a_corrupt_record_in_an_older_segment_is_logged_and_skipped(tmp_path: Path, caplog):
    spool = Spool(tmp_path, max_bytes=1024 * 1024, segment_bytes=1000)
    spool.open()
    spool.append([item(n) for n in range(20)])
    spool.close()
    oldest = sorted(tmp_path.glob("*.seg"))[0]
    data = bytearray(oldest.read_bytes())
    frame = len(item(0).frame())
    data[frame + 20] ^= 0xFF  # the second record's payload: its checksum no longer matches
    oldest.write_bytes(bytes(data))
    per_segment = 1000 // frame

    again = Spool(tmp_path, max_bytes=1024 * 1024, segment_bytes=1000)
    again.open()
    with caplog.at_level(logging.ERROR, logger="kafkaguard.audit.spool"):
        seen = drain(again)
    assert seen == [0, *range(per_segment, 20)]
    assert any("corrupt record at offset" in r.getMessage() for r in caplog.records)
    assert again.corrupt_bytes == (per_segment - 1) * frame
    again.close()


def test_an_unwritable_directory_is_refused_with_the_setting_to_fix(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(InvalidConfigError, match=r"audit_spool_dir .* cannot be written"):
        Spool(blocker / "spool", max_bytes=1024 * 1024).open()


def test_spool_files_are_private(tmp_path: Path):
    spool = Spool(tmp_path / "spool", max_bytes=1024 * 1024)
    spool.open()
    spool.append([item(1)])
    spool.commit(spool.read(1)[0][0])
    spool.close()
    assert {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "spool").iterdir()} == {
        "00000000000000000001.seg": 0o600,
        "committed": 0o600,
    }


def test_a_small_spool_with_the_cluster_up_never_fills_with_records_already_sent(tmp_path: Path):
    """The smallest bound (64 KiB): its tail rolls at a quarter of it, so sent records leave the disk. (Before, its
    one segment was as large as the bound and filled with acknowledged records: 1,844 of 2,000 new ones dropped.)"""
    spool = Spool(tmp_path, max_bytes=64 * 1024)
    spool.open()
    dropped = 0
    for n in range(2000):  # ten times the bound, each record acknowledged at once
        dropped += spool.append([item(n, 400)])
        if found := spool.read(10):
            spool.commit(found[-1][0])
    assert dropped == 0 and spool.size_bytes <= 16 * 1024 + 500
    assert spool.segment_bytes == 16 * 1024
    spool.close()
