"""A user's copy of a standard image set: the folders it may lie in, and how one of its files
is accepted, by its md5 or else by its content.

**Where.** Under the data root ``R`` (``dataset.root``, else ``$TRAINER_RUN_DATA``, else the
cache) the files of an MNIST-format set are looked for, in this order, in

1. ``R/<set>/`` (ours, where downloads go: ``R/mnist``, ``R/fashion_mnist``);
2. ``R/`` itself (``dataset.root`` naming the folder that holds the files);
3. torchvision's ``R/MNIST/raw/`` (``R/FashionMNIST/raw/``), and ``R/raw/`` when ``R`` is that
   ``MNIST`` (``FashionMNIST``) folder;

each file under its published name, gzipped (``train-images-idx3-ubyte.gz``) or not
(``train-images-idx3-ubyte``), the gzipped one first where both are. The first folder that
holds every file of the set is read where it is (:func:`find`): no lock is taken and nothing is
written. CIFAR-10's places are :func:`cifar10_sources`: an extracted ``cifar-10-batches-bin``
(ours, in ``R``, or ``R`` itself), then the archive (ours, or in ``R``).

**What is accepted** (:func:`identify`). A file whose md5 is the one expected
(``dataset.md5.<role>``, the published file's) is used as it is. Any other file, or any file
when the expected md5 is None (not checked), is accepted only for its content, which the
caller checks (a valid header, the published size); it is then recorded with its content's md5
and, where an md5 was expected, counted in a short note (:func:`note`).
"""

from __future__ import annotations

from pathlib import Path

from .download_folder import md5

TORCHVISION = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}
"""torchvision's folder of each MNIST-format set (its files are in ``<folder>/raw``)."""
GZ = ".gz"


def mnist_folders(root: Path, name: str) -> list[Path]:
    """The folders under ``root`` that may hold the MNIST-format set ``name``, in the order
    they are looked at."""
    folders = [root / name, root, root / TORCHVISION[name] / "raw"]
    if root.name == TORCHVISION[name]:
        folders.append(root / "raw")
    return folders


def in_folder(folder: Path, published: str) -> Path | None:
    """The file of the published name ``published`` (``*.gz``) in ``folder``, gzipped or
    not; None when neither is there."""
    for path in (folder / published, folder / published.removesuffix(GZ)):
        if path.is_file():
            return path
    return None


def find(folders: list[Path], names: dict) -> dict[str, Path] | None:
    """The path of each file of ``names`` (role: published name) in the first of ``folders``
    that holds them all, or None when none does; looks, reads and writes nothing else."""
    for folder in folders:
        paths = {role: in_folder(folder, name) for role, name in names.items()}
        if None not in paths.values():
            return paths
    return None


def cifar10_sources(root: Path, folder: str, archive: str) -> list[tuple[str, Path, Path]]:
    """CIFAR-10's places under ``root`` in the order they are looked at, as ``(kind, path,
    marker)``, a place holding the set when ``marker`` exists: ``"folder"`` for an extracted
    ``cifar-10-batches-bin`` (ours, ``root/cifar10/<folder>``; ``root/<folder>``; ``root`` itself
    when it holds ``data_batch_1.bin``), then ``"archive"`` for the archive
    (``root/cifar10/<archive>``, ours; ``root/<archive>``)."""
    ours, theirs = root / "cifar10" / folder, root / folder
    return [("folder", ours, ours), ("folder", theirs, theirs),
            ("folder", root, root / "data_batch_1.bin"),
            ("archive", root / "cifar10" / archive, root / "cifar10" / archive),
            ("archive", root / archive, root / archive)]


def identify(path: Path, expected: str | None) -> dict:
    """The record of the file ``path``: ``path``, ``md5`` (its md5, when one is ``expected``)
    and ``published`` (whether it is the ``expected`` md5), and ``expected``. A file not
    ``published`` must pass its content checks; :func:`content` then completes its record."""
    found = None if expected is None else md5(path)
    return {"path": str(path), "md5": found, "published": found is not None and found == expected,
            "expected": expected}


def content(record: dict, digest: str) -> dict:
    """The ``record`` of a file accepted for its content, with ``content_md5`` (``digest``,
    the md5 of its decompressed bytes)."""
    return {**record, "content_md5": digest}


def note(records: list[dict], checked: str) -> str | None:
    """One short line saying which files of ``records`` were accepted for their content
    (``checked`` says what was checked) although an md5 was expected, and why (uncompressed, or
    another md5), or None when there are none; ``data.json`` holds each file's checksums."""
    named = [r for r in records if r["expected"] is not None and not r["published"]]
    if not named:
        return None
    folders = ", ".join(sorted({str(Path(r["path"]).parent) for r in named}))
    why = sorted({"uncompressed" if Path(r["path"]).suffix != GZ else "another md5"
                  for r in named})
    what = (f"{Path(named[0]['path']).name} in {folders} is" if len(named) == 1
            else f"{len(named)} files in {folders} are")
    return (f"{what} used for content ({checked}), not md5 ({' or '.join(why)}); data.json "
            "records the checksums")


def public(record: dict) -> dict:
    """What ``data.json`` keeps of a file's record: ``path``, ``md5`` (when computed) and, for
    a file accepted for its content, ``content_md5``."""
    kept = {"path": record["path"]}
    if record["md5"] is not None:
        kept["md5"] = record["md5"]
    if "content_md5" in record:
        kept["content_md5"] = record["content_md5"]
    return kept
