"""Writing a run's files (storage/files.py): replaced atomically, appended whole, a refused
write named in one StorageError with no temporary file left and no row left torn."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
from refused_writes import FULL
from refused_writes import disk_full_for as _disk_full_for
from refused_writes import temporaries as _temporaries

from trainer_run.errors import ConfigError, StorageError
from trainer_run.storage import checkpoint, files


# -- atomic writing -----------------------------------------------------------------------------
def test_write_atomic_replaces_the_file_or_leaves_it_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    files.write_atomic(target, "old")
    assert target.read_text() == "old"
    files.write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    files.write_atomic(target, lambda f: f.write(b"written by a callable"))
    assert target.read_bytes() == b"written by a callable"
    _disk_full_for(monkeypatch, "out.json")
    with pytest.raises(StorageError) as caught:
        files.write_atomic(target, "new")
    assert str(caught.value) == f"cannot write {target}: {FULL}"
    assert caught.value.exit_code == 4
    assert target.read_bytes() == b"written by a callable"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_append_names_the_file_it_cannot_write(tmp_path):
    target = tmp_path / "rows.jsonl"
    files.append(target, "a\n")
    files.append(target, "b\n")
    assert target.read_text() == "a\nb\n"
    target.unlink()
    target.mkdir()
    with pytest.raises(StorageError) as caught:
        files.append(target, "c\n")
    assert str(caught.value) == f"cannot write {target}: Is a directory"


# -- checkpoints --------------------------------------------------------------------------------
@pytest.mark.parametrize("failing", ["latest", "arrays.npz", "state.json"])
def test_a_refused_checkpoint_write_names_the_file_and_leaves_the_previous_one(tmp_path, monkeypatch,
                                                                              failing):
    checkpoint.save({"w": np.ones(3)}, tmp_path, 1)
    _disk_full_for(monkeypatch, failing)
    with pytest.raises(StorageError) as caught:
        checkpoint.save({"w": np.zeros(3)}, tmp_path, 2)
    named = tmp_path / failing if failing == "latest" else tmp_path / "iter_00000002" / failing
    assert str(caught.value) == (f"cannot write {named}: {FULL}; "
                                 "the previous checkpoint iter_00000001 is intact")
    assert _temporaries(tmp_path) == []
    assert (tmp_path / "latest").read_text() == "iter_00000001\n"
    monkeypatch.undo()
    found = checkpoint.find(tmp_path)
    assert found == tmp_path / "iter_00000001"
    np.testing.assert_array_equal(checkpoint.load(found)["w"], np.ones(3))


# -- summary.json and model.npz -----------------------------------------------------------------


# -- metrics.jsonl -------------------------------------------------------------------------------


# -- strict JSON ---------------------------------------------------------------------------------


# -- appending: a row whole or not at all --------------------------------------------------------
def _disk_fills_after(monkeypatch, written: int) -> None:
    """Makes os.write write at most ``written`` bytes, then refuse with ENOSPC (a disk that
    fills in the middle of an append)."""
    real, left = os.write, [written]

    def write(fd, data):
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, FULL)
        count = real(fd, bytes(data[:left[0]]))
        left[0] -= count
        return count

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("logger", ["jsonl", "csv"])
def test_a_row_the_disk_refuses_part_way_is_not_left_torn(tmp_path, monkeypatch, logger):
    from trainer_run.training.loggers.csv import CsvTable
    from trainer_run.training.loggers.jsonl import JsonLines

    made = JsonLines() if logger == "jsonl" else CsvTable()
    made.start(tmp_path, [{"iteration": 1, "loss": 1.0}])
    before = made.path.read_bytes()
    _disk_fills_after(monkeypatch, 5)
    with pytest.raises(StorageError) as caught:
        made.write({"iteration": 2, "loss": 0.5})
    assert str(caught.value) == f"cannot write {made.path}: {FULL}"
    assert made.path.read_bytes() == before
    monkeypatch.undo()
    made.write({"iteration": 3, "loss": 0.25})
    assert made.path.read_bytes().endswith(b"3,0.25\n" if logger == "csv" else b'"loss": 0.25}\n')


# -- hard links: never written in place ----------------------------------------------------------
def _hard_linked(tmp_path):
    """A file of the user's outside the run and a run file that is a hard link to it."""
    (tmp_path / "run").mkdir()
    other = tmp_path / "notes.txt"
    other.write_bytes(b"the user's notes\n")
    os.utime(other, ns=(1_000_000_000, 1_000_000_000))
    os.link(other, tmp_path / "run" / "metrics.jsonl")
    return tmp_path / "run" / "metrics.jsonl", other


def _refused_line(path) -> str:
    return (f"{path} has other hard links (it is one of 2 names of the same file), so writing "
            "it would change another file too; trainer-run writes only files of their own: "
            "remove it (or copy the run without hard links) and try again")


@pytest.mark.parametrize("write", [
    lambda path: files.append(path, "row\n", run=path.parent),
    lambda path: files.write_synced(path, b"new"),  # O_TRUNC: applied only once checked
    lambda path: files.open_regular(path, os.O_RDWR | os.O_CREAT),
    lambda path: files.open_regular(path, os.O_WRONLY | os.O_TRUNC),
], ids=["append", "write_synced", "read_write", "truncate"])
def test_a_file_with_other_hard_links_is_refused_before_it_is_written(tmp_path, write):
    path, other = _hard_linked(tmp_path)
    with pytest.raises(files.HardLinked) as caught:
        write(path)
    assert str(caught.value) == _refused_line(path)
    assert isinstance(caught.value, ConfigError)  # exit status 2
    assert other.read_bytes() == b"the user's notes\n"
    assert os.stat(other).st_mtime_ns == 1_000_000_000
    assert os.stat(other).st_nlink == 2  # nothing removed either


def test_a_hard_linked_file_may_be_read_and_replaced_whole(tmp_path):
    """Reading changes nothing, and a replacement renames a new file over the run's name: the
    other name keeps its bytes."""
    path, other = _hard_linked(tmp_path)
    fd = files.open_regular(path, os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"the user's notes\n"
    finally:
        os.close(fd)
    files.write_atomic(path, "replaced\n", run=path.parent)
    assert path.read_text() == "replaced\n" and os.stat(path).st_nlink == 1
    assert other.read_bytes() == b"the user's notes\n"
    assert os.stat(other).st_mtime_ns == 1_000_000_000


def test_a_file_in_the_way_of_a_folder_is_named_and_is_no_full_disk(tmp_path):
    (tmp_path / "export").write_text("mine")
    with pytest.raises(files.InTheWay) as refused:
        files.make_folder(tmp_path / "export", tmp_path)
    assert str(refused.value) == (f"cannot make the folder {tmp_path / 'export'}: "
                                  f"{tmp_path / 'export'} is a file, not a folder; move or remove "
                                  "it and try again")
    with pytest.raises(ConfigError) as below:
        files.make_folder(tmp_path / "export" / "a" / "b", tmp_path)
    assert str(below.value) == (f"cannot make the folder {tmp_path / 'export' / 'a' / 'b'}: "
                                f"{tmp_path / 'export'} is a file, not a folder; move or remove it "
                                "and try again")
    assert not isinstance(below.value, StorageError)
    assert (tmp_path / "export").read_text() == "mine"
