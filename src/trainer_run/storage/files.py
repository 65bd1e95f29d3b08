"""Writing run files: a failed write leaves no partial or temporary file and says which file.

:func:`write_atomic` replaces a file all at once. It writes the new content to a temporary
sibling ``.<name>.tmp-<pid>``, flushes and fsyncs it, renames it over the file with
:func:`os.replace` and fsyncs the directory, so that after a crash or power loss the file
holds either its previous content or the complete new one. :func:`append` adds to a file
(a log) whole or not at all: an append the disk refuses part-way (a full disk) is cut back
to the file's previous length, so a log never ends in a torn row. When the disk refuses
(full, read-only, no permission), the temporary file is removed and
:class:`~trainer_run.errors.StorageError` (exit status 4) says ``cannot write <path>:
<reason>``, naming the file the caller asked for.

Inside a run folder nothing is written through a symbolic link: a caller that names the
``run`` folder a file or folder belongs to has every folder between the two, and the file
itself, checked (:func:`check_no_links`), and the file opened with ``O_NOFOLLOW``. A link
found there (planted by whoever made the folder) is refused with :class:`LinkInRun` (a
:class:`~trainer_run.errors.ConfigError`, exit 2) naming it, and its target is not touched.
The run folder itself may be reached through links: the user named it.

Nothing is written in place into a file that has other hard links (:func:`open_regular`
opening it for writing): that file is another name of the same bytes, perhaps outside the
run, and writing it would change it too. It is refused (:class:`HardLinked`, a ConfigError)
before a byte of it changes; a replacement (:func:`write_atomic`) only renames a new file
over the name, and the other names keep their content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Callable, Union

from ..errors import ConfigError, StorageError

Content = Union[str, bytes, Callable[[BinaryIO], object]]
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a temporary file is opened: created here, never an existing file or a link."""


class LinkInRun(ConfigError):
    """A file or folder of a run folder that trainer-run would write or read is a symbolic
    link."""


class HardLinked(ConfigError):
    """A file that trainer-run would write in place has other hard links."""


class InTheWay(ConfigError):
    """A file stands where trainer-run would make a folder: nothing the disk refused."""


def check_no_links(path: Path, run: Path) -> None:
    """Refuses (:class:`LinkInRun`) ``path`` inside the folder ``run`` when it, or any folder
    between ``run`` and it, is a symbolic link; what does not exist yet passes."""
    path, run = Path(os.path.abspath(path)), Path(os.path.abspath(run))
    current = run
    for part in path.relative_to(run).parts:
        current = current / part
        if current.is_symlink():
            raise link_in_run(current, run)
        if not current.exists():
            return


def link_in_run(path: Path, run: Path | None = None) -> LinkInRun:
    """The :class:`LinkInRun` for the link ``path`` (of the run folder ``run``)."""
    where = f" in run folder {run}" if run is not None else ""
    return LinkInRun(f"{path} is a symbolic link{where}; trainer-run reads and writes a run's "
                     "files only inside the run folder, never through a link: remove the link "
                     "(or copy the run without links) and try again")


def make_folder(path: Path, run: Path) -> None:
    """Creates the folder ``path`` inside the run folder ``run`` (and the folders between)
    unless it exists, refusing a link on the way (:func:`check_no_links`) and a file in its
    place (:class:`InTheWay`, exit 2); raises StorageError naming it if the disk refuses."""
    check_no_links(path, run)
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise in_the_way(Path(path)) from None
    except OSError as e:
        raise storage_error(path, e) from None
    check_no_links(path, run)


def in_the_way(path: Path) -> InTheWay:
    """The :class:`InTheWay` for the folder ``path``: names the nearest of it and the folders
    above it that exists and is not a folder."""
    blocking = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), path)
    return InTheWay(f"cannot make the folder {path}: {blocking} is a file, not a folder; move "
                    "or remove it and try again")


def write_atomic(path: Path, content: Content, run: Path | None = None) -> None:
    """Replaces ``path`` with ``content`` (text as UTF-8, bytes, or a function writing to a
    binary file) atomically and durably; raises StorageError naming ``path`` if the disk
    refuses, leaving ``path`` as it was. With ``run`` (the run folder ``path`` is in), a link
    at ``path`` or on the way to it is refused (:func:`check_no_links`)."""
    path = Path(path)
    if run is not None:
        check_no_links(path, run)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # a killed writer's of this pid, or a planted link
        write_synced(tmp, content, shown_as=path, flags=NEW)
        try:
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except OSError as e:
            raise storage_error(path, e) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_synced(path: Path, content: Content, shown_as: Path | None = None,
                 flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW) -> None:
    """Writes ``content`` to ``path`` (created or truncated; never through a link), flushed and
    fsynced; raises StorageError naming ``shown_as`` (default ``path``) if the disk refuses,
    :class:`LinkInRun` if ``path`` is a link."""
    try:
        with os.fdopen(open_regular(path, flags), "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode() if isinstance(content, str) else content)
            sync(f)
    except OSError as e:
        raise storage_error(shown_as or path, e) from None


def append(path: Path, text: str | bytes, run: Path | None = None) -> None:
    """Appends ``text`` (str as UTF-8, or bytes) to ``path`` (created if missing; a link or
    anything but a regular file is refused, :func:`open_regular`, and with ``run`` a link on
    the way from it too); raises StorageError naming it if the disk refuses. A refused
    append is undone: the file is truncated back to the length it had, so it ends where it
    ended. It is not fsynced: a log row is appended every few iterations, and the
    checkpoints, which are, keep the rows."""
    data = text.encode() if isinstance(text, str) else text
    if run is not None and os.path.dirname(path) != os.fspath(run):  # else O_NOFOLLOW is all
        check_no_links(path, run)
    try:
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, run=run)
    except OSError as e:
        raise storage_error(path, e) from None
    try:
        size = os.fstat(fd).st_size
        _write_all(fd, data)
    except OSError as e:
        _truncate(fd, size)
        raise storage_error(path, e) from None
    finally:
        os.close(fd)


def open_regular(path: Path, flags: int, mode: int = 0o666, run: Path | None = None) -> int:
    """``os.open(path, flags)`` of a regular file, never following a link at ``path``
    (``O_NOFOLLOW``) nor waiting on a FIFO; :class:`LinkInRun` for a link (of the run folder
    ``run``, when given), ConfigError for
    anything else that is not a regular file, and, when ``flags`` open it for writing,
    :class:`HardLinked` for a file with other hard links (the descriptor is closed, the file
    untouched: ``O_TRUNC`` is applied only once it is checked); OSError as ``os.open``
    raises it."""
    try:
        fd = os.open(path, flags & ~os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     mode)
    except OSError:
        if Path(path).is_symlink():
            raise link_in_run(Path(path), run) from None
        raise
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise not_regular(path)
        if flags & (os.O_WRONLY | os.O_RDWR) and found.st_nlink > 1:
            raise hard_linked(path, found.st_nlink)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def hard_linked(path: Path, links: int) -> HardLinked:
    """The :class:`HardLinked` for ``path``, one of ``links`` names of one file."""
    return HardLinked(f"{path} has other hard links (it is one of {links} names of the same "
                      "file), so writing it would change another file too; trainer-run writes "
                      "only files of their own: remove it (or copy the run without hard links) "
                      "and try again")


def not_regular(path: Path) -> ConfigError:
    """The ConfigError for a run's file ``path`` that is a folder, FIFO, device or socket."""
    return ConfigError(f"{path} is not a regular file (a folder, FIFO or device); trainer-run "
                       "reads and writes a run's files only as regular files: remove it and "
                       "try again")


def _write_all(fd: int, data: bytes) -> None:
    """Writes all of ``data`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _truncate(fd: int, size: int) -> None:
    """Cuts the file ``fd`` back to ``size`` bytes, as far as the disk lets it."""
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass  # the readers skip a torn last line, with a warning


def storage_error(path: Path, error: OSError) -> StorageError:
    """The StorageError for a write of ``path`` that failed with ``error``."""
    return StorageError(f"cannot write {path}: {error.strerror or error}")


def sync(f) -> None:
    """Flushes the open file ``f`` to the disk."""
    f.flush()
    os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """Makes the entries of directory ``path`` (renames into it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
