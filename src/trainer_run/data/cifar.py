"""CIFAR-10 from its binary release, ``cifar-10-binary.tar.gz`` (no pickle anywhere).

The archive holds ``cifar-10-batches-bin/`` with five training batches
(``data_batch_1.bin`` .. ``data_batch_5.bin``), ``test_batch.bin`` and ``batches.meta.txt``
(the class names, one a line). A batch is a run of fixed-size records: one label byte, then
3072 pixel bytes, the 32x32 red, green and blue planes in turn (channel-major).

:func:`extract` unpacks those seven members once, next to the archive, into
``cifar-10-batches-bin/``: into a temporary folder first, renamed into place when every
member is there with a valid size, so that folder is either complete or absent. Only the
named members are read, each must be a regular file, and each is written under a name of our
own (no path from the archive is used): a damaged or crafted archive cannot write elsewhere.
Later runs read the batches straight into memory (:func:`read`: 184 MB, 0.1 to 1 s on a
busy 2-core machine, against about 2 s to decompress the archive); the archive is not opened
again and may be deleted.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

import numpy

from .. import files
from ..errors import ConfigError

FOLDER = "cifar-10-batches-bin"
TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST = "test_batch.bin"
META = "batches.meta.txt"
MEMBERS = (*TRAIN, TEST, META)
RECORD = 1 + 3 * 32 * 32
"""Bytes per image: the label, then the pixels."""
MAX_META = 1 << 16
CHUNK = 1 << 22


def extracted(folder) -> Path | None:
    """``folder/cifar-10-batches-bin`` if it is there (extracted before, or by hand), else None."""
    batches = Path(folder) / FOLDER
    return batches if batches.is_dir() else None


def extract(archive, folder) -> Path:
    """Extracts the members of ``archive`` into ``folder/cifar-10-batches-bin`` (atomically, see
    the module's docstring) and returns that folder. The caller holds the folder's lock
    (:func:`trainer_run.data.download.locked`): leftovers of an interrupted extraction are
    removed first."""
    archive, folder = Path(archive), Path(folder)
    for stale in folder.glob(f".{FOLDER}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        partial = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.tmp-", dir=folder))
    except OSError as e:
        raise files.storage_error(folder / FOLDER, e) from None
    try:
        _extract_members(archive, partial)
        target = folder / FOLDER
        os.rename(partial, target)
        files.fsync_dir(folder)
        return target
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _extract_members(archive: Path, into: Path) -> None:
    """Writes each of :data:`MEMBERS` found in ``archive`` to ``into/<member>``."""
    wanted = {f"{FOLDER}/{name}": name for name in MEMBERS}
    found = set()
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                name = wanted.get(member.name.removeprefix("./"))
                if name is None or name in found:
                    continue
                _check_member(archive, member, name)
                with tar.extractfile(member) as source:
                    _copy(source, into / name)
                found.add(name)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise ConfigError(f"{archive} is not a readable tar.gz archive ({e or type(e).__name__}); "
                          "delete it to download it again, or replace it with "
                          "cifar-10-binary.tar.gz") from None
    missing = [f"{FOLDER}/{name}" for name in MEMBERS if name not in found]
    if missing:
        raise ConfigError(f"{archive} lacks {', '.join(missing)}; it is not CIFAR-10's binary "
                          "release: replace it with cifar-10-binary.tar.gz")


def _check_member(archive: Path, member: tarfile.TarInfo, name: str) -> None:
    """Refuses a member that is not a regular file or whose size cannot be right."""
    if not member.isfile():
        raise ConfigError(f"{archive}: {member.name} is not a regular file (a link or a "
                          "device); replace the archive with cifar-10-binary.tar.gz")
    if name == META:
        ok, wanted = member.size <= MAX_META, f"at most {MAX_META} bytes"
    else:
        ok, wanted = member.size > 0 and member.size % RECORD == 0, f"a multiple of {RECORD}"
    if not ok:
        raise ConfigError(f"{archive}: {member.name} has {member.size} bytes, not {wanted} (CIFAR-10 "
                          f"batches are records of {RECORD} bytes); the archive is damaged: delete "
                          "it to download it again")


def _copy(source, path: Path) -> None:
    try:
        with open(path, "wb") as out:
            shutil.copyfileobj(source, out, CHUNK)
            files.sync(out)
    except OSError as e:
        raise files.storage_error(path, e) from None


def read(batches) -> tuple[tuple, tuple, list[str]]:
    """The training split (the five ``data_batch_*.bin``, in order) and the test split of the
    folder ``batches`` as ``(x, y)``: x uint8 of shape (N, 3, 32, 32), y int64 class ids; and
    the class names of ``batches.meta.txt``."""
    batches = Path(batches)
    classes = _class_names(batches)
    train = _records([batches / name for name in TRAIN], len(classes))
    test = _records([batches / TEST], len(classes))
    return train, test, classes


def _class_names(batches: Path) -> list[str]:
    path = _existing(batches / META)
    names = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    names = [name for name in names if name]
    if not names:
        raise ConfigError(f"{path} names no classes (one name a line); delete {batches} to extract "
                          "it again from the archive")
    return names


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise ConfigError(f"{path.parent} lacks {path.name}; delete the folder to extract it again "
                          f"from cifar-10-binary.tar.gz, or complete it")
    return path


def _records(paths: list[Path], n_classes: int) -> tuple:
    """The images and labels of the batch files ``paths``, read into one array."""
    sizes = [_existing(p).stat().st_size for p in paths]
    for path, size in zip(paths, sizes):
        if size == 0 or size % RECORD:
            raise ConfigError(f"{path} has {size} bytes, not a multiple of {RECORD} (a record: "
                              f"a label byte and 3x32x32 pixels); delete {path.parent} to extract "
                              "it again from the archive")
    records = numpy.empty((sum(sizes) // RECORD, RECORD), numpy.uint8)
    flat, start = memoryview(records.reshape(-1)), 0
    for path, size in zip(paths, sizes):
        _fill(path, flat[start:start + size])
        _check_labels(path, records[start // RECORD:(start + size) // RECORD, 0], n_classes)
        start += size
    return records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].astype(numpy.int64)


def _fill(path: Path, view: memoryview) -> None:
    """Reads the file ``path`` into ``view`` (its size)."""
    with open(path, "rb") as f:
        done = 0
        while done < len(view):
            n = f.readinto(view[done:done + CHUNK])
            if not n:
                raise ConfigError(f"{path} became shorter while it was read; run again")
            done += n


def _check_labels(path: Path, labels, n_classes: int) -> None:
    bad = numpy.flatnonzero(labels >= n_classes)
    if bad.size:
        raise ConfigError(f"{path}: record {int(bad[0])} has label {int(labels[bad[0]])} and "
                          f"{META} names {n_classes} classes; the file is damaged: delete "
                          f"{path.parent} to extract it again from the archive")
