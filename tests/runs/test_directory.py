"""One process per run directory (runs/directory.py): the run lock, a hard-linked lock refused
before it is written, new sweeps only in new or empty directories, the run format a version
reads (the command meeting them: tests/command/test_run_directory.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_run.errors import ConfigError
from trainer_run.runs import directory as run_directory


# -- the lock -------------------------------------------------------------------------------------
def test_a_second_lock_is_refused_naming_the_holder_and_released_with_it(tmp_path):
    lock = run_directory.RunLock(tmp_path / "run").acquire()
    probe = subprocess.run([sys.executable, "-c", (
        "import sys; from trainer_run.runs import directory as r\n"
        "try:\n    r.RunLock(sys.argv[1]).acquire()\nexcept r.RunDirectoryInUse as e:\n"
        "    print(e); sys.exit(2)\n"), str(tmp_path / "run")], capture_output=True, text=True)
    assert probe.returncode == 2
    assert f"in use by process {os.getpid()}" in probe.stdout
    with pytest.raises(run_directory.RunDirectoryInUse, match=f"process {os.getpid()}"):
        run_directory.check_free(tmp_path / "run")
    lock.release()
    run_directory.check_free(tmp_path / "run")        # free again
    with run_directory.RunLock(tmp_path / "run"):
        pass


def test_a_lock_acquired_again_records_this_process_once_from_the_start(tmp_path):
    lock = run_directory.RunLock(tmp_path / "run")
    with lock.acquire():                              # acquire, then __enter__ acquires again
        assert (tmp_path / "run" / run_directory.LOCK).read_bytes() == f"{os.getpid()}\n".encode()


def test_this_module_runs_on_the_serial_worker(request):
    """Its tests time processes against the clock: under ``--dist loadgroup`` they carry the
    ``serial`` group (tests/conftest.py), which pytest-xdist keeps on one worker."""
    if not request.config.getoption("loadgroup", False):
        pytest.skip("not a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@serial")


def test_a_refusal_names_the_live_holder_not_the_dead_process_the_lock_file_records(tmp_path):
    """The probe: .lock names the last holder's pid, so a lock a child inherited from a holder
    that has since ended was refused naming the dead process. Now the live holder is named."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time; from trainer_run.runs import directory as r\n"
        "r.RunLock(sys.argv[1]).acquire()\n"
        "child = os.fork()\n"
        "if child == 0:\n    time.sleep(60); os._exit(0)\n"
        "print(child, flush=True); os._exit(0)\n"), str(tmp_path / "run")],
        stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    holder.wait()
    try:
        recorded = (tmp_path / "run" / ".lock").read_text().strip()
        assert recorded == str(holder.pid)                # the dead parent's
        with pytest.raises(run_directory.RunDirectoryInUse) as refused:
            run_directory.check_free(tmp_path / "run")
        assert f"in use by process {child};" in str(refused.value)
        with pytest.raises(run_directory.RunDirectoryInUse, match=f"in use by process {child};"):
            run_directory.RunLock(tmp_path / "run").acquire()
    finally:
        os.kill(child, signal.SIGKILL)


# -- a lock that is a hard link ------------------------------------------------------------------
def users_file(path: Path, content: bytes = b"the user's notes\n") -> tuple[bytes, int]:
    """``path`` made a file of the user's with ``content`` and an old mtime; what must stay."""
    if not path.exists():
        path.write_bytes(content)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path.read_bytes(), os.stat(path).st_mtime_ns


def bytes_and_mtime(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), os.stat(path).st_mtime_ns


def hard_links_line(path: Path) -> str:
    return (f"{path} has other hard links (it is one of 2 names of the same file), so writing "
            "it would change another file too; trainer-run writes only files of their own: "
            "remove it (or copy the run without hard links) and try again")


def test_a_lock_that_is_a_hard_link_is_refused_before_it_is_truncated(tmp_path):
    """The probe: a .lock that was a hard link to a file of the user's was truncated and got
    the pid (O_NOFOLLOW stops symbolic links only). Now it is refused before it is written."""
    run, other = tmp_path / "run", tmp_path / "notes.txt"
    run.mkdir()
    before = users_file(other)
    os.link(other, run / ".lock")
    with pytest.raises(ConfigError) as refused:
        run_directory.RunLock(run).acquire()
    assert str(refused.value) == hard_links_line(run / ".lock")
    assert bytes_and_mtime(other) == before
    run_directory.check_free(run)  # reading it (is the run in use?) changes nothing
    assert bytes_and_mtime(other) == before


def test_check_empty_names_the_key():
    with pytest.raises(ConfigError, match="a new sweep starts only in a new or empty directory"):
        run_directory.check_empty(os.path.dirname(__file__), "hydra.sweep.dir")


@pytest.mark.parametrize("mark, known", [
    ({"tool": "trainer-run", "format": 1}, True), ({"tool": "trainer-run"}, True),
    ({"tool": "trainer-run", "format": 2}, False), ({"tool": "trainer-run", "format": "2"}, False),
    ({"tool": "trainer-run", "format": True}, False), ({"tool": "trainer-run", "format": 0}, False),
])
def test_a_run_of_a_format_this_version_does_not_know_is_refused(tmp_path, mark, known):
    import json

    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "trainer-run.json").write_text(json.dumps(mark))
    if known:
        assert run_directory.is_run(tmp_path)
        return
    with pytest.raises(ConfigError) as refused:
        run_directory.is_run(tmp_path)
    if mark["format"] == 2:
        assert str(refused.value) == (f"{tmp_path} is a run of a newer trainer-run (run format 2; "
                                      "this version reads up to 1): upgrade trainer-run (pip "
                                      "install -U trainer-run) to use it")
    else:
        assert str(refused.value) == (f"{tmp_path}/.hydra/trainer-run.json records the run format "
                                      f"{mark['format']!r}, which no trainer-run writes (this "
                                      "version writes 1); it is not a run to use")
