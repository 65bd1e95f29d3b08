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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Callable, Union

from ..errors import StorageError

Content = Union[str, bytes, Callable[[BinaryIO], object]]


def write_atomic(path: Path, content: Content) -> None:
    """Replaces ``path`` with ``content`` (text as UTF-8, bytes, or a function writing to a
    binary file) atomically and durably; raises StorageError naming ``path`` if the disk
    refuses, leaving ``path`` as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write_synced(tmp, content, shown_as=path)
        try:
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except OSError as e:
            raise storage_error(path, e) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_synced(path: Path, content: Content, shown_as: Path | None = None) -> None:
    """Writes ``content`` to ``path`` (created or truncated), flushed and fsynced; raises
    StorageError naming ``shown_as`` (default ``path``) if the disk refuses."""
    try:
        with open(path, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode() if isinstance(content, str) else content)
            sync(f)
    except OSError as e:
        raise storage_error(shown_as or path, e) from None


def append(path: Path, text: str | bytes) -> None:
    """Appends ``text`` (str as UTF-8, or bytes) to ``path`` (created if missing); raises
    StorageError naming it if the disk refuses. A refused append is undone: the file is
    truncated back to the length it had, so it ends where it ended. It is not fsynced: a log
    row is appended every few iterations, and the checkpoints, which are, keep the rows."""
    data = text.encode() if isinstance(text, str) else text
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
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
