"""The folder a download writes into (:mod:`trainer_run.data.download`): its files, each
opened only as a file of the download's own, and its lock.

:func:`open_own` opens ``<folder>/<file>`` (a ``.part``, the lock file, a file under its final
name) as a regular file, never through a symbolic link, and refuses one with other hard links
when it opens it for writing (:func:`trainer_run.storage.files.open_regular`): such a file,
planted in a shared folder (``a.bin.part -> ~/.bashrc``), leads to another file, which writing
it would change. The refusal is one :class:`~trainer_run.errors.ConfigError` naming the file
and saying to remove it; the other file is left as it was. The folder itself may be reached
through links: the user chose it.

:func:`locked` holds the folder's exclusive lock (``fcntl.flock`` on :data:`LOCK`) while
inside, and leaves nothing behind: the lock file and the folders it made are removed again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path

from ..errors import ConfigError
from ..storage import files as run_files

LOCK = ".fetch.lock"


def md5(path) -> str:
    """The md5 hex digest of the file ``path``."""
    with open(path, "rb") as f:
        return _digest(f)


def _digest(f) -> str:
    """The md5 hex digest of the rest of the open binary file ``f``."""
    digest = hashlib.md5(usedforsecurity=False)
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def own_md5(path: Path) -> str:
    """The md5 of the file ``path`` of a fetch's folder, read only as a file of its own
    (:func:`open_own`)."""
    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as f:
        return _digest(f)


def open_own(path: Path, flags: int) -> int:
    """``os.open`` of a file of a fetch's own in its folder (a ``.part``, the lock file, a
    download): a regular file, never opened through a link, nor written while it has other
    hard links (:func:`~trainer_run.storage.files.open_regular`); a refusal is one
    ConfigError naming the file and the fix. OSError as ``os.open`` raises it."""
    try:
        return run_files.open_regular(path, flags)
    except run_files.LinkInRun:
        what = "a symbolic link"
    except run_files.HardLinked:
        what = "a file with other hard links"
    except ConfigError:
        what = "a folder, FIFO or device"
    raise ConfigError(f"{path} is {what}: a download writes and reads its files in {path.parent} "
                      "only as regular files of its own, so that what it writes changes no other "
                      "file; remove it and run again") from None


def verified(path: Path, expected: str | None) -> bool:
    """Whether ``path`` is there (its md5 must then be ``expected``, unless None: refused
    otherwise); a link or anything but a regular file there is refused (:func:`open_own`)."""
    try:
        fd = open_own(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise run_files.storage_error(path, e) from None
    with os.fdopen(fd, "rb") as f:
        found = None if expected is None else _digest(f)
    if found is not None and found != expected:
        raise ConfigError(f"{path} has md5 {found}, not the expected {expected}: it is not the "
                          "published file; delete it to download it again, or replace it")
    return True


@contextlib.contextmanager
def locked(root: Path):
    """Holds the exclusive lock of the folder ``root`` (created if missing) while inside. On
    leaving, the lock file is removed while still held, then ``root`` and the folders above it
    that this call created, as far as they are empty. A process that was waiting on the
    removed file finds it gone once it holds it, and locks a new one (:func:`_acquire`)."""
    fd, made = _acquire(root)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(root / LOCK)
        os.close(fd)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                break


def _make_folders(root: Path) -> list[Path]:
    """Creates ``root`` and the missing folders above it; those it created, outermost first."""
    missing = [f for f in (root, *root.parents) if not f.exists()][::-1]
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise run_files.storage_error(root / LOCK, e) from None
    return missing


def _acquire(root: Path) -> tuple[int, list[Path]]:
    """The descriptor of ``root/.fetch.lock``, locked, and the folders made meanwhile: a lock
    file removed by its previous holder while this process waited is left for a new one."""
    made: list[Path] = []
    while True:
        made += _make_folders(root)
        try:
            fd = open_own(root / LOCK, os.O_RDWR | os.O_CREAT)
        except OSError as e:
            raise run_files.storage_error(root / LOCK, e) from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_ino == os.lstat(root / LOCK).st_ino:
                return fd, made
        except FileNotFoundError:
            pass
        os.close(fd)
