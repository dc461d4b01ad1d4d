"""store.files.write_private: the file is replaced whole, created 0600 whatever the umask, and no temporary file
is left, also when the write fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaguard.store.files import write_private
from tests.modes import PRIVATE, mode, umask


def test_a_private_file_is_replaced_whole_and_nothing_else_is_left(tmp_path: Path) -> None:
    path = tmp_path / "server.secret"
    with umask(0o022):
        write_private(path, b"first")
        assert path.read_bytes() == b"first" and mode(path) == PRIVATE
        path.chmod(0o644)  # a wider file found there is replaced by a private one
        write_private(path, b"second, longer")
    assert path.read_bytes() == b"second, longer" and mode(path) == PRIVATE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.secret"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "served-settings.json"
    write_private(path, b"old")
    (tmp_path / "sub").mkdir()
    with pytest.raises(OSError):
        write_private(tmp_path / "sub", b"a directory cannot be replaced by a file")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["served-settings.json", "sub"]
