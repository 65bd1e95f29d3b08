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
Nor can a link planted beside the archive: ``cifar-10-batches-bin`` in the way as a link or a
file is refused before anything is extracted, and a member is read (:func:`read`) only as a
regular file, never through a link (the folder itself may be one: the user made it).
Later runs read the batches straight into memory (:func:`read`: 184 MB, 0.1 to 1 s on a
busy 2-core machine, against about 2 s to decompress the archive); the archive is not opened
again and may be deleted. An archive that is a user's own copy, outside the cache, is read in
place instead, each time, writing nothing (:func:`read_archive`).

Both readers check what they read against the published sizes when asked (``counts``: the
records of each training batch and of the test batch) and may hash the records (``digest``:
the six batches' bytes in the order ``data_batch_1.bin`` .. ``data_batch_5.bin``,
``test_batch.bin``, as ``cat`` would join them).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

import numpy

from ..errors import ConfigError
from ..memory import check_fits
from ..storage import files

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
    (:func:`trainer_run.data.download_folder.locked`): leftovers of an interrupted extraction are
    removed first."""
    archive, folder = Path(archive), Path(folder)
    target = folder / FOLDER
    if os.path.lexists(target):  # not a folder: extracted() takes a folder, or a link to one
        what = "a symbolic link" if target.is_symlink() else "not a folder"
        raise ConfigError(f"{target} is {what}: trainer-run extracts {archive.name} there only "
                          "into a folder of its own; remove it and run again")
    for stale in folder.glob(f".{FOLDER}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        partial = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.tmp-", dir=folder))
    except OSError as e:
        raise files.storage_error(folder / FOLDER, e) from None
    try:
        _extract_members(archive, partial)
        try:
            os.rename(partial, target)
            files.fsync_dir(folder)
        except OSError as e:
            raise files.storage_error(target, e) from None
        return target
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _extract_members(archive: Path, into: Path) -> None:
    """Writes each of :data:`MEMBERS` found in ``archive`` to ``into/<member>``."""
    found = set()
    with _opened(archive) as tar:
        for member, name in _members(tar, archive):
            with tar.extractfile(member) as source:
                _copy(source, into / name)
            found.add(name)
    _check_complete(archive, found)


@contextlib.contextmanager
def _opened(archive: Path):
    """``archive`` open as a tar.gz archive; a damaged one (while it is read too) is a
    ConfigError naming it."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            yield tar
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise ConfigError(f"{archive} is not a readable tar.gz archive ({e or type(e).__name__}); "
                          "replace it with cifar-10-binary.tar.gz (delete it to download it "
                          "again)") from None


def _members(tar: tarfile.TarFile, archive: Path):
    """Each member of :data:`MEMBERS` in ``tar`` (its first occurrence), checked, with its
    name."""
    wanted = {f"{FOLDER}/{name}": name for name in MEMBERS}
    found = set()
    for member in tar:
        name = wanted.get(member.name.removeprefix("./"))
        if name is None or name in found:
            continue
        _check_member(archive, member, name)
        found.add(name)
        yield member, name


def _check_complete(archive: Path, found) -> None:
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
        with os.fdopen(files.open_regular(path, files.NEW), "wb") as out:  # a new file
            shutil.copyfileobj(source, out, CHUNK)
            files.sync(out)
    except OSError as e:
        raise files.storage_error(path, e) from None


def read(batches, counts: dict | None = None, digest=None) -> tuple[tuple, tuple, list[str]]:
    """The training split (the five ``data_batch_*.bin``, in order) and the test split of the
    folder ``batches`` as ``(x, y)``: x uint8 of shape (N, 3, 32, 32), y int64 class ids; and
    the class names of ``batches.meta.txt``. ``counts`` (``{"train": records per training
    batch, "test": ...}``) and ``digest``: see the module's docstring."""
    batches = Path(batches)
    with contextlib.ExitStack() as stack:
        opened = {name: stack.enter_context(_member(batches / name)) for name in (META, *TRAIN, TEST)}
        classes = _class_names(opened.pop(META).read().decode(errors="replace"), batches)
        sources = {name: batches / name for name in opened}
        sizes = {name: os.fstat(f.fileno()).st_size for name, f in opened.items()}
        records = _checked(sizes, counts, sources, batches)
        flat, start = memoryview(records.reshape(-1)), 0
        for name, f in opened.items():
            _fill(f, sources[name], flat[start:start + sizes[name]])
            start += sizes[name]
    return _splits(records, sizes, sources, len(classes), digest) + (classes,)


def read_archive(archive, counts: dict | None = None, digest=None) -> tuple[tuple, tuple, list[str]]:
    """What :func:`read` gives, from the members of ``archive`` read in place: nothing is
    extracted or written. A member whose declared size the machine's available memory cannot
    hold is refused before it is inflated."""
    archive = Path(archive)
    members = {}
    with _opened(archive) as tar:
        for member, name in _members(tar, archive):
            check_fits(2 * member.size, f"{archive}: {member.name}", "check that the archive is "
                       "CIFAR-10's binary release, or extract it to read its batches from disk")
            with tar.extractfile(member) as source:
                members[name] = source.read()
    _check_complete(archive, members)
    classes = _class_names(members[META].decode(errors="replace"), archive)
    sizes = {name: len(members[name]) for name in (*TRAIN, TEST)}
    sources = {name: Path(f"{archive}:{FOLDER}/{name}") for name in sizes}
    records = _checked(sizes, counts, sources, archive)
    flat, start = memoryview(records.reshape(-1)), 0
    for name in sizes:
        flat[start:start + sizes[name]] = members.pop(name)
        start += sizes[name]
    return _splits(records, sizes, sources, len(classes), digest) + (classes,)


def _checked(sizes: dict, counts: dict | None, sources: dict, where: Path) -> numpy.ndarray:
    """An array for the records of batches of ``sizes`` (name: bytes), each checked to be a
    whole number of records and, with ``counts``, the published number; ``sources`` name the
    batches (name: path), ``where`` the folder or archive that holds them."""
    for name, size in sizes.items():
        if size == 0 or size % RECORD:
            raise ConfigError(f"{sources[name]} has {size} bytes, not a multiple of {RECORD} (a "
                              f"record: a label byte and 3x32x32 pixels); {_again(where)}")
        wanted = counts and counts["test" if name == TEST else "train"]
        if wanted and size // RECORD != wanted:
            split = "test" if name == TEST else "train"
            total = wanted * (1 if name == TEST else len(TRAIN))
            raise ConfigError(f"{sources[name]} holds {size // RECORD} records, not the {wanted} of "
                              f"CIFAR-10's published batches (dataset.examples.{split}={total}): "
                              f"it is not a copy of the release; {_again(where)}")
    return numpy.empty((sum(sizes.values()) // RECORD, RECORD), numpy.uint8)


def _again(where: Path) -> str:
    if where.name.endswith(".tar.gz"):
        return "replace it with cifar-10-binary.tar.gz"
    return f"delete {where} to extract it again from the archive, or replace it"


def _splits(records: numpy.ndarray, sizes: dict, sources: dict, n_classes: int, digest) -> tuple:
    """The training and test ``(x, y)`` of ``records`` (the batches of ``sizes`` in order),
    their labels checked; ``digest`` updated with the records."""
    if digest is not None:
        digest.update(records)
    start = 0
    for name, size in sizes.items():
        _check_labels(sources[name], records[start // RECORD:(start + size) // RECORD, 0], n_classes)
        start += size
    n_train = sum(sizes[name] for name in TRAIN) // RECORD
    x, y = records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].astype(numpy.int64)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def _class_names(text: str, where: Path) -> list[str]:
    names = [line.strip() for line in text.splitlines()]
    names = [name for name in names if name]
    if not names:
        raise ConfigError(f"{where / META} names no classes (one name a line); {_again(where)}")
    return names


def _member(path: Path):
    """The extracted member ``path`` open for reading, as a regular file (never through a
    link); one missing, a link or anything else is a ConfigError naming it."""
    try:
        return os.fdopen(files.open_regular(path, os.O_RDONLY), "rb")
    except FileNotFoundError:
        raise ConfigError(f"{path.parent} lacks {path.name}; delete the folder to extract it again "
                          f"from cifar-10-binary.tar.gz, or complete it") from None
    except ConfigError:  # a link, a folder, a FIFO
        what = "a symbolic link" if path.is_symlink() else "not a regular file"
        raise ConfigError(f"{path} is {what}: CIFAR-10's batches are read only as the files "
                          "extracted from the archive, never through a link; delete the folder to "
                          "extract it again from cifar-10-binary.tar.gz, or put the file itself "
                          "there") from None


def _fill(f, path: Path, view: memoryview) -> None:
    """Reads the open file ``f`` (``path``) into ``view`` (its size)."""
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
