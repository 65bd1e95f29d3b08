"""Run directories: which folder a run may write into, and one process at a time in it.

A folder *is a run* (:func:`is_run`) only when it holds a record only trainer-run writes:
``.hydra/trainer-run.json`` (:data:`MARK`, the tool's name and the run format, written when a
run starts: :func:`mark`), or, for a run of this user's from before the mark, a
``.hydra/config.sig`` that is this user's signature of ``.hydra/config.yaml``. Anything else is
another tool's folder, never written: a ``config.yaml`` that looks like ours, checkpoints, a
``summary.json`` or a ``model.npz`` (anyone can copy those into a folder of theirs).

A folder *holds a run's files* when it has any of :data:`MARKERS` (:func:`holds_run`). A new
run starts only in a folder that does not exist or is empty (:func:`check_unused`): a run is
refused with a pointer to ``resume=``, and a folder holding anything else (a user's
``model.npz``, notes, another tool's output) is refused too, so nothing already written is
overwritten.

A checkpoint ``<run>/checkpoints/iter_<N>`` belongs to ``<run>`` when ``<run>`` is a run
(:func:`owner`); a checkpoint anywhere else, or in a folder that is not a run, belongs to no
run, and a resume from it must name a new run directory.

:class:`RunLock` holds an exclusive lock on ``<run>/.lock`` (which also records the
holder's process id; a ``.lock`` that is a link, not a regular file or a file with other hard
links is refused and left as it is, checked before it is truncated:
:func:`trainer_run.storage.files.open_regular`) for as long as a process works in the
run. The operating system releases it when the process ends, however it ends, so a killed
run can be resumed at once, while a second process is refused with the holder's id instead of mixing its
output into the first one's. The id named is a live holder's: the recorded one when that
process is alive and has the lock open, else a live process that has it open (a child that
inherited the lock), else none.

The names of a run's files are :mod:`trainer_run.storage.run_files`'s.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from trainer_run.errors import ConfigError
from trainer_run.runs import trust
from trainer_run.storage import files, reading, run_files
from trainer_run.storage.run_files import CHECKPOINTS, LOCK, MARK, RECORD

FORMAT = 1
"""The run format :data:`MARK` records."""
MARKERS = (CHECKPOINTS, run_files.METRICS, run_files.SUMMARY, RECORD)
FOLDERS = (CHECKPOINTS, RECORD, run_files.TENSORBOARD, run_files.EVAL)
"""The folders trainer-run writes in inside a run folder."""


def holds_run(directory: Path) -> bool:
    """Whether ``directory`` holds any of a run's files (:data:`MARKERS`)."""
    return any((Path(directory) / marker).exists() for marker in MARKERS)


def is_run(directory: Path) -> bool:
    """Whether ``directory`` is a run of trainer-run's: its record holds :data:`MARK` naming
    the tool, or this user's signature of its config (a run from before the mark). A record
    that is a symbolic link is refused (:class:`~trainer_run.storage.files.LinkInRun`), and so
    is a mark of a run format this version does not know (a newer one: upgrade trainer-run)."""
    record = Path(directory) / RECORD
    files.check_no_links(record, directory)
    try:
        mark = json.loads(reading.read_bytes(record / MARK, reading.MARKER_BYTES, directory))
    except (OSError, ValueError, ConfigError):
        mark = None
    if isinstance(mark, dict) and mark.get("tool") == "trainer-run":
        _check_format(mark.get("format"), Path(directory))
        return True
    try:
        signature = reading.read_text(record / trust.RECORD_SIGNATURE, reading.MARKER_BYTES,
                                      directory)
        config = reading.read_bytes(record / run_files.CONFIG, reading.CONFIG_BYTES, directory)
        return trust.signed_by_me(config, signature.strip())
    except (OSError, ConfigError):
        return False


def _check_format(version, directory: Path) -> None:
    """Refuses (ConfigError) a run whose mark records a run format this version does not know:
    one newer than :data:`FORMAT` (a later trainer-run wrote it), or anything but a number
    from 1 on. A mark without one is format 1."""
    counted = isinstance(version, int) and not isinstance(version, bool)
    if version is None or counted and 1 <= version <= FORMAT:
        return
    if counted and version > FORMAT:
        raise ConfigError(f"{directory} is a run of a newer trainer-run (run format {version}; "
                          f"this version reads up to {FORMAT}): upgrade trainer-run "
                          "(pip install -U trainer-run) to use it")
    raise ConfigError(f"{directory}/{RECORD}/{MARK} records the run format {version!r}, which no "
                      f"trainer-run writes (this version writes {FORMAT}); it is not a run to use")


def mark(record: Path) -> None:
    """Marks the run whose record folder is ``record`` as trainer-run's (:data:`MARK`)."""
    files.write_atomic(record / MARK, json.dumps({"tool": "trainer-run", "format": FORMAT}) + "\n",
                       run=record.parent)


def check_no_links(directory: Path) -> None:
    """Refuses (:class:`~trainer_run.storage.files.LinkInRun`, naming it) a symbolic link in
    the run folder ``directory`` or in a folder of it that trainer-run writes in
    (:data:`FOLDERS`, and the checkpoints in ``checkpoints/``): trainer-run makes none, so one
    there was planted, and writing through it would change a file outside the run. Each
    write checks its own path again (:mod:`trainer_run.storage.files`); this check refuses
    before any work is done."""
    folders = [Path(directory)]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                raise files.link_in_run(path, Path(directory))
            inside = path.parent == Path(directory) and entry.name in FOLDERS
            if entry.is_dir(follow_symlinks=False) and (inside or path.parent.name == CHECKPOINTS
                                                        and path.parent.parent == Path(directory)):
                folders.append(path)


def _contents(directory: Path) -> list[str]:
    """The names in ``directory`` other than the lock file (empty if it does not exist)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.name != LOCK)


def check_unused(directory: Path, key: str = "hydra.run.dir") -> None:
    """Refuses (ConfigError) a ``directory`` that a process holds (:func:`check_free`) or that
    is neither missing nor empty (:func:`check_empty`)."""
    check_free(directory)
    check_empty(directory, key)


def check_empty(directory: Path, key: str = "hydra.run.dir") -> None:
    """Refuses (ConfigError) a ``directory`` that is neither missing nor empty (but for the
    lock file); ``key`` is the setting that chooses it, named in the message."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{key}={directory} is a file, not a directory; choose another {key}")
    names = _contents(directory)
    if not names:
        return
    if key == "hydra.run.dir" and is_run(directory):
        raise ConfigError(f"{directory} already holds a run; continue it with resume={directory} "
                          f"or choose another {key}")
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    raise ConfigError(f"{key}={directory} is not empty (it holds {shown}); a new "
                      f"{'sweep' if 'sweep' in key else 'run'} starts only in a new or empty "
                      f"directory, so choose another {key}")


def check_free(directory: Path) -> None:
    """Raises :class:`RunDirectoryInUse` when a process holds ``directory``'s lock (creates
    nothing)."""
    try:
        fd = files.open_regular(Path(directory) / LOCK, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunDirectoryInUse(_in_use(directory, _holder(fd))) from None
    finally:
        os.close(fd)


def _in_use(directory: Path, holder: int | None) -> str:
    who = f"process {holder}" if holder is not None else "another process"
    return (f"run directory {directory} is in use by {who}; wait for it to end (or "
            "stop it), or choose another hydra.run.dir")


def owner(checkpoint: Path) -> Path | None:
    """The run directory that owns ``checkpoint`` (``<run>`` for
    ``<run>/checkpoints/iter_<N>`` when ``<run>`` is a run, :func:`is_run`), or None for a
    checkpoint kept anywhere else or in a folder that is not a run."""
    folder = checkpoints_folder_of(checkpoint)
    return folder if folder is not None and is_run(folder) else None


def checkpoints_folder_of(checkpoint: Path) -> Path | None:
    """``<folder>`` for a checkpoint ``<folder>/checkpoints/iter_<N>`` (resolved), whether or
    not ``<folder>`` is a run; None for a checkpoint kept anywhere else."""
    checkpoint = Path(checkpoint).resolve()
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINTS else None


class RunDirectoryInUse(ConfigError):
    """Another process holds the run directory's lock."""


class RunLock:
    """An exclusive lock on the run directory ``directory`` (created if missing), held from
    :meth:`acquire` until :meth:`release` or the end of the process.

    Raises :class:`RunDirectoryInUse` naming the holder's process id when another process
    holds it, and :class:`~trainer_run.errors.StorageError` naming the lock file when the disk
    refuses to record this process's id. Usable as a context manager.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path = self.directory / LOCK
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        while self._fd is None:
            # never a link nor another file's hard link; truncated only once it is locked
            fd = files.open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RunDirectoryInUse(_in_use(self.directory, holder)) from None
            if _same_file(fd, self.path):
                self._fd = fd
            else:  # removed by its previous holder between our open and our lock: retry
                os.close(fd)
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            self.release(remove=True)
            raise files.storage_error(self.path, e) from None
        return self

    def release(self, remove: bool = False) -> None:
        """Releases the lock; with ``remove`` the lock file is deleted first (for a directory
        that is being removed)."""
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(fd: int) -> int | None:
    """The live process that holds the lock file open as ``fd`` names it: the one the file
    records when it is alive and has the file open, else any other live process of this
    user that has it open (a child that inherited the lock from a holder since gone); None
    when none is found (the message then names no process)."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    recorded = int(text) if text.isdigit() else None
    inode = _identity(os.fstat(fd))
    if recorded is not None and _has_open(recorded, inode):
        return recorded
    others = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return next((pid for pid in others if pid != os.getpid() and _has_open(pid, inode)), None)


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def _has_open(pid: int, inode: tuple[int, int]) -> bool:
    """Whether process ``pid`` is alive and has the file ``inode`` (device, inode) open."""
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # gone, or another user's
        return False
    for descriptor in descriptors:
        try:
            if _identity(os.stat(descriptor)) == inode:
                return True
        except OSError:
            continue
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
