"""Verified downloads (trainer_run.data.download.fetch) against a local HTTP server: mirrors in
order, md5 checks, atomic .part files resumed with Range, one download for concurrent
fetches, and the one-line errors."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
from image_files import FileServer, closed_port_url, md5

from trainer_run.data.download import fetch, locked
from trainer_run.data.download_folder import LOCK
from trainer_run.errors import ConfigError


def _content(size: int, seed: int) -> bytes:
    return numpy.random.default_rng(seed).integers(0, 256, size, dtype=numpy.uint8).tobytes()


A, B = _content(50_000, 1), _content(30_000, 2)
FILES = {"a.bin": md5(A), "b.bin": md5(B)}


@pytest.fixture
def server():
    with FileServer() as s:
        yield s


def _names(folder: Path) -> set:
    return {p.name for p in folder.iterdir()}


def test_a_404_moves_on_to_the_next_mirror(server, tmp_path):
    server.routes = {"/good/a.bin": A, "/good/b.bin": B}
    paths = fetch(tmp_path, FILES, [server.url("/empty/"), server.url("/good")], timeout=5)
    assert paths == {"a.bin": tmp_path / "a.bin", "b.bin": tmp_path / "b.bin"}
    assert (tmp_path / "a.bin").read_bytes() == A and (tmp_path / "b.bin").read_bytes() == B
    assert server.requests == [("/empty/a.bin", None), ("/good/a.bin", None),
                               ("/empty/b.bin", None), ("/good/b.bin", None)]
    assert _names(tmp_path) == {"a.bin", "b.bin"}  # no .part left, nor the lock file


def test_a_download_with_the_wrong_md5_is_refused_and_the_next_mirror_used(server, tmp_path):
    server.routes = {"/bad/a.bin": B, "/good/a.bin": A}
    fetch(tmp_path, {"a.bin": md5(A)}, [server.url("/bad/"), server.url("/good/")], timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == A
    assert [p for p, _ in server.requests] == ["/bad/a.bin", "/good/a.bin"]
    assert _names(tmp_path) == {"a.bin"}


def test_wrong_md5_on_every_mirror_keeps_nothing_and_names_the_file(server, tmp_path):
    server.routes = {"/bad/a.bin": B, "/other/a.bin": B[:100]}
    mirrors = [server.url("/bad/"), server.url("/other/")]
    with pytest.raises(ConfigError) as error:
        fetch(tmp_path, {"a.bin": md5(A)}, mirrors, timeout=5)
    assert str(error.value) == (
        f"a.bin is not in {tmp_path} and no mirror gave it ({mirrors[0]}a.bin: gave md5 {md5(B)}, "
        f"not {md5(A)}; {mirrors[1]}a.bin: gave md5 {md5(B[:100])}, not {md5(A)}); download it "
        "there by hand or set dataset.root or TRAINER_RUN_DATA to a folder that has them")
    assert _names(tmp_path) == set()


@pytest.mark.parametrize("ranges", [True, False], ids=["resumed", "restarted"])
def test_a_cut_download_leaves_a_part_that_the_next_fetch_resumes(server, tmp_path, ranges):
    server.routes = {"/a.bin": A}
    server.cut = {"/a.bin": 1}
    server.ranges = ranges
    with pytest.raises(ConfigError, match="cut off after 25000 of 50000 bytes"):
        fetch(tmp_path, {"a.bin": md5(A)}, [server.url()], timeout=5)
    assert not (tmp_path / "a.bin").exists()
    assert (tmp_path / "a.bin.part").read_bytes() == A[:25_000]
    fetch(tmp_path, {"a.bin": md5(A)}, [server.url()], timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == A
    assert server.requests == [("/a.bin", None), ("/a.bin", "bytes=25000-")]
    assert _names(tmp_path) == {"a.bin"}


def test_ctrl_c_mid_download_leaves_a_part_that_the_next_fetch_resumes(server, tmp_path):
    big = _content(400_000, 3)
    server.routes = {"/big.bin": big}
    server.delay = 0.01  # 98 blocks of 4 KiB: about 1 s
    argv = [sys.executable, "-c", FETCH, str(tmp_path), json.dumps({"big.bin": md5(big)}), server.url()]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    part = tmp_path / "big.bin.part"
    while not (part.is_file() and part.stat().st_size) and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode != 0
    assert not (tmp_path / "big.bin").exists()
    kept = part.read_bytes()
    assert 0 < len(kept) < len(big) and kept == big[:len(kept)]
    server.delay = 0
    fetch(tmp_path, {"big.bin": md5(big)}, [server.url()], timeout=5)
    assert (tmp_path / "big.bin").read_bytes() == big
    assert server.requests == [("/big.bin", None), ("/big.bin", f"bytes={len(kept)}-")]


def test_a_cut_download_continues_from_the_next_mirror(server, tmp_path):
    server.routes = {"/one/a.bin": A, "/two/a.bin": A}
    server.cut = {"/one/a.bin": 1}
    fetch(tmp_path, {"a.bin": md5(A)}, [server.url("/one/"), server.url("/two/")], timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == A
    assert server.requests == [("/one/a.bin", None), ("/two/a.bin", "bytes=25000-")]


def test_a_part_that_is_not_a_prefix_is_started_again(server, tmp_path):
    """A .part longer than the file (416) or holding other bytes (md5) gives way to the file."""
    server.routes = {"/a.bin": A, "/b.bin": B}
    (tmp_path / "a.bin.part").write_bytes(A + b"more")
    (tmp_path / "b.bin.part").write_bytes(b"x" * 100)
    with pytest.raises(ConfigError, match=r"b.bin: gave md5 \w+, not"):
        fetch(tmp_path, FILES, [server.url()], timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == A
    fetch(tmp_path, FILES, [server.url()], timeout=5)  # the bad b.bin.part was deleted
    assert (tmp_path / "b.bin").read_bytes() == B
    assert server.requests == [("/a.bin", "bytes=50004-"), ("/a.bin", None),
                               ("/b.bin", "bytes=100-"), ("/b.bin", None)]


def test_a_mirror_that_does_not_answer_in_time_passes_the_turn(server, tmp_path):
    server.routes = {"/a.bin": A}
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        mirror = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        start = time.perf_counter()
        fetch(tmp_path, {"a.bin": md5(A)}, [mirror, server.url()], timeout=0.5)
    assert 0.5 <= time.perf_counter() - start < 5
    assert (tmp_path / "a.bin").read_bytes() == A


def test_a_complete_part_is_renamed_without_a_request(tmp_path):
    (tmp_path / "a.bin.part").write_bytes(A)
    assert fetch(tmp_path, {"a.bin": md5(A)}, [closed_port_url()], timeout=5)["a.bin"].read_bytes() == A


def test_offline_with_files_missing_is_one_line_naming_files_folder_and_mirrors(tmp_path):
    """... and the folders the fetch made for its downloads are gone again, lock file and all."""
    mirrors = [closed_port_url(), closed_port_url()]
    start = time.perf_counter()
    with pytest.raises(ConfigError) as error:
        fetch(tmp_path / "root" / "set", FILES, mirrors, timeout=5, searched=[tmp_path / "other"])
    assert str(error.value) == (
        f"a.bin, b.bin are not in {tmp_path / 'root' / 'set'} (nor in {tmp_path / 'other'}) and no "
        f"mirror answered ({mirrors[0]}, {mirrors[1]}); download them there by hand or set "
        "dataset.root or TRAINER_RUN_DATA to a folder that has them")
    assert time.perf_counter() - start < 4  # an unreachable mirror is asked once, not per file
    assert _names(tmp_path) == set()


def test_a_present_file_with_the_wrong_md5_is_refused_and_kept(tmp_path, server):
    (tmp_path / "a.bin").write_bytes(B)
    server.routes = {"/a.bin": A}
    with pytest.raises(ConfigError) as error:
        fetch(tmp_path, {"a.bin": md5(A)}, [server.url()], timeout=5)
    assert str(error.value) == (f"{tmp_path / 'a.bin'} has md5 {md5(B)}, not the expected {md5(A)}: "
                                "it is not the published file; delete it to download it again, or "
                                "replace it")
    assert (tmp_path / "a.bin").read_bytes() == B
    assert server.requests == []


def test_present_files_need_no_server_and_nothing_is_written_or_printed(tmp_path, capfd):
    (tmp_path / "a.bin").write_bytes(A)
    (tmp_path / "b.bin").write_bytes(B)
    tmp_path.chmod(0o555)  # a read-only folder works: no lock file is needed
    try:
        paths = fetch(tmp_path, FILES, [closed_port_url()], timeout=5)
    finally:
        tmp_path.chmod(0o755)
    assert paths == {"a.bin": tmp_path / "a.bin", "b.bin": tmp_path / "b.bin"}
    assert _names(tmp_path) == {"a.bin", "b.bin"}
    assert capfd.readouterr() == ("", "")


def test_a_file_whose_md5_is_not_checked_is_downloaded_as_it_comes(server, tmp_path):
    server.routes = {"/a.bin": A}
    assert fetch(tmp_path, {"a.bin": None}, [server.url()], timeout=5)["a.bin"].read_bytes() == A
    (tmp_path / "a.bin").write_bytes(B)  # there: used as it is, without a request
    assert fetch(tmp_path, {"a.bin": None}, [server.url()], timeout=5)["a.bin"].read_bytes() == B
    assert server.gets("/a.bin") == 1 and _names(tmp_path) == {"a.bin"}


def test_a_download_shows_its_progress_on_stderr(server, tmp_path, capfd):
    server.routes = {"/a.bin": A}
    fetch(tmp_path, {"a.bin": md5(A)}, [server.url()], timeout=5)
    out, err = capfd.readouterr()
    assert out == "" and "a.bin" in err and "50.0/50.0 kB" in err


@pytest.mark.parametrize("files, mirrors, timeout, message", [
    ({"a.bin": "xyz"}, [], 5, "files: the md5 of a.bin must be 32 hex digits or null (not checked), "
                              "got 'xyz'"),
    ({}, [], 5, "files must map file names to their md5, got {}"),
    (FILES, [1], 5, "mirrors must be a list of base URLs"),
    (FILES, [], 0, "timeout must be > 0, got 0"),
    ({"../a.bin": md5(A)}, [], 5, "files: '../a.bin' is not a file name"),
])
def test_bad_arguments_name_the_argument(tmp_path, files, mirrors, timeout, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        fetch(tmp_path, files, mirrors, timeout)


FETCH = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started where it is ignored
from trainer_run.data.download import fetch
paths = fetch(sys.argv[1], json.loads(sys.argv[2]), [sys.argv[3]], timeout=10)
print(json.dumps({k: str(v) for k, v in paths.items()}))
"""


def _lock_waiters(lock: Path) -> int:
    """Processes blocked on the flock of ``lock`` (from /proc/locks; -1 where it is missing)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return -1
    inode = f":{os.stat(lock).st_ino} "
    return sum("->" in line and "FLOCK" in line and inode in line for line in lines)


def test_concurrent_fetches_download_each_file_once(server, tmp_path):
    server.routes = {"/a.bin": A, "/b.bin": B}
    server.delay = 0.01  # about 0.2 s per file: the two processes overlap
    argv = [sys.executable, "-c", FETCH, str(tmp_path), json.dumps(FILES), server.url()]
    with locked(tmp_path):  # both processes find the files missing and wait on the lock
        processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(2)]
        deadline = time.monotonic() + 60
        while _lock_waiters(tmp_path / LOCK) not in (2, -1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lock_waiters(tmp_path / LOCK) in (2, -1)
    results = [p.communicate(timeout=60) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    expected = {"a.bin": str(tmp_path / "a.bin"), "b.bin": str(tmp_path / "b.bin")}
    assert [json.loads(out) for out, _ in results] == [expected, expected]
    assert server.gets("/a.bin") == 1 and server.gets("/b.bin") == 1
    assert (tmp_path / "a.bin").read_bytes() == A and (tmp_path / "b.bin").read_bytes() == B
    # the lock file they waited on was removed by its holder: each took a new one, removed too
    assert _names(tmp_path) == {"a.bin", "b.bin"}


STOPPABLE_FETCH = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started where it is ignored
from trainer_run.data.download import fetch
from trainer_run.errors import Interrupted
from trainer_run import stop_signals
stop_signals.handle()  # as the command does from its first line
try:
    fetch(sys.argv[1], json.loads(sys.argv[2]), [sys.argv[3]], timeout=10)
except Interrupted as e:
    print(e)
    sys.exit(e.exit_code)
"""


def test_a_signal_stops_a_download_that_trickles_within_a_second(server, tmp_path):
    """The server sends one byte every 2 s (each read well within the 10 s timeout): SIGINT
    under the command's handlers ends the download within a second, keeping the part."""
    big = _content(10_000, 4)
    server.routes = {"/big.bin": big}
    server.block, server.delay = 1, 2.0
    argv = [sys.executable, "-c", STOPPABLE_FETCH, str(tmp_path), json.dumps({"big.bin": md5(big)}),
            server.url()]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    part = tmp_path / "big.bin.part"
    while not (part.is_file() and part.stat().st_size) and process.poll() is None:
        time.sleep(0.01)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    assert time.perf_counter() - signalled < 1.5
    assert process.returncode == 130
    assert out.startswith("stopped by SIGINT while downloading big.bin; nothing was trained")
    assert part.read_bytes() == big[:part.stat().st_size] and not (tmp_path / "big.bin").exists()


def test_a_mirror_that_does_not_finish_in_time_passes_the_turn(server, tmp_path):
    """The first mirror keeps sending (a 4 KiB block every 0.2 s: never a read timeout) but
    would need 2.6 s for the file; with a time limit of 1 s the second mirror gives the rest."""
    server.routes = {"/a.bin": A}
    server.delay = 0.2
    with FileServer() as fast:
        fast.routes = {"/a.bin": A}
        start = time.perf_counter()
        fetch(tmp_path, {"a.bin": md5(A)}, [server.url(), fast.url()], timeout=5, time_limit=1.0)
        took = time.perf_counter() - start
    assert (tmp_path / "a.bin").read_bytes() == A
    assert 1.0 <= took < 2.5
    assert [p for p, _ in server.requests] == ["/a.bin"]
    assert fast.requests[0][1] is not None  # it resumed what the slow one gave


# -- links planted among the fetch's files ---------------------------------------------------------
def _outside(tmp_path: Path) -> tuple[Path, tuple]:
    """A file of the user's outside the data folder (a shell start-up file), with an old mtime;
    and what must stay of it (bytes and mtime)."""
    target = tmp_path / "home" / ".bashrc"
    target.parent.mkdir()
    target.write_bytes(b"export PATH=$HOME/bin:$PATH\n")
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    return target, _kept(target)


def _kept(path: Path) -> tuple:
    return (path.read_bytes(), os.stat(path).st_mtime_ns) if path.exists() else None


def _planted_line(path: Path, what: str) -> str:
    return (f"{path} is {what}: a download writes and reads its files in {path.parent} only as "
            "regular files of its own, so that what it writes changes no other file; remove it "
            "and run again")


@pytest.mark.parametrize("planted, kind", [
    ("a.bin.part", "symbolic"), ("a.bin.part", "hard"), (LOCK, "symbolic"), (LOCK, "hard"),
    ("a.bin", "dangling"),
])
def test_a_link_planted_among_the_fetchs_files_is_refused_and_its_target_kept(server, tmp_path,
                                                                               planted, kind):
    """The probe: ``train-images-idx3-ubyte.gz.part -> ~/.bashrc`` got the mirror's bytes
    written into the shell's start-up file (and ``.fetch.lock`` was opened through a link).
    Now a symbolic link, a hard link or a link under the final name (dangling: the download
    would go where it points) is one line naming it, before any request; the target is kept."""
    server.routes = {"/a.bin": A}
    root = tmp_path / "root"
    root.mkdir()
    target, before = _outside(tmp_path)
    if kind == "dangling":
        target, before = tmp_path / "home" / "new-file", None
        (root / planted).symlink_to(target)
    elif kind == "symbolic":
        (root / planted).symlink_to(target)
    else:
        os.link(target, root / planted)
    with pytest.raises(ConfigError) as refused:
        fetch(root, {"a.bin": md5(A)}, [server.url()], timeout=5)
    what = "a file with other hard links" if kind == "hard" else "a symbolic link"
    assert str(refused.value) == _planted_line(root / planted, what)
    assert _kept(target) == before
    assert server.requests == []
    assert _names(root) == {planted}  # nothing else made, the lock file removed


def test_a_folder_under_a_files_name_is_refused_in_one_line(server, tmp_path):
    """A folder where the download would go (or a FIFO: never waited on) is named, before any
    request; it was downloaded, then its rename failed as a full disk would (exit 4)."""
    server.routes = {"/a.bin": A}
    (tmp_path / "a.bin").mkdir()
    os.mkfifo(tmp_path / "b.bin.part")
    for name, files in (("a.bin", {"a.bin": md5(A)}), ("b.bin.part", {"b.bin": md5(B)})):
        with pytest.raises(ConfigError) as refused:
            fetch(tmp_path, files, [server.url()], timeout=5)
        assert str(refused.value) == _planted_line(tmp_path / name, "a folder, FIFO or device")
    assert server.requests == []
