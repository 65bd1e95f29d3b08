"""A run folder is written only inside itself, never through a symbolic link (issue 36, item 2):
no write of storage/files.py follows a link at any depth, and a run lock that is a FIFO or a
link is refused without waiting (the commands on a planted run folder:
tests/command/test_run_folder_links.py)."""

from __future__ import annotations

import os

import pytest

from trainer_run.errors import ConfigError
from trainer_run.storage import files


@pytest.mark.parametrize("write", ["write_atomic", "append", "make_folder"])
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_no_write_in_a_run_follows_a_link_at_any_depth(tmp_path, write, depth):
    run = tmp_path / "run"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x").write_text("theirs\n")
    folders = [run / "a", run / "a" / "b"][:depth]
    run.mkdir()
    for folder in folders[:-1]:
        folder.mkdir()
    if folders:  # the deepest folder on the way is the link
        folders[-1].symlink_to(elsewhere)
        path = folders[-1] / "x"
    else:
        path = run / "x"
        path.symlink_to(elsewhere / "x")
    with pytest.raises(files.LinkInRun, match=str(folders[-1] if folders else path)):
        if write == "write_atomic":
            files.write_atomic(path, "mine\n", run=run)
        elif write == "append":
            files.append(path, "mine\n", run=run)
        else:
            files.make_folder(path / "sub", run)
    assert (elsewhere / "x").read_text() == "theirs\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x"]


def test_a_lock_that_is_a_fifo_or_a_link_is_refused_without_waiting(tmp_path):
    from trainer_run.runs.directory import RunLock, check_free

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / ".lock")
    with pytest.raises(ConfigError, match="not a regular file"):
        RunLock(run).acquire()
    (run / ".lock").unlink()
    (tmp_path / "notes").write_text("notes\n")
    (run / ".lock").symlink_to(tmp_path / "notes")
    for attempt in (lambda: RunLock(run).acquire(), lambda: check_free(run)):
        with pytest.raises(files.LinkInRun, match=r"\.lock"):
            attempt()
    assert (tmp_path / "notes").read_text() == "notes\n"
