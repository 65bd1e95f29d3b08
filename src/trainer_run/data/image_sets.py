"""The standard image sets as dataset callables: ``dataset=mnist``, ``fashion_mnist``,
``cifar10`` (downloaded once, checked against their md5) and ``dataset=idx`` (your own IDX
files).

Each returns :class:`~trainer_run.data.datasets.Splits` with a training and a test split
and no validation split (the run holds out ``dataset.val_fraction`` of the training
images): inputs uint8 of shape (N, 1, 28, 28) for the MNIST sets, (N, 3, 32, 32) for
CIFAR-10, labels int64 class ids; ``dataset.normalize`` (``unit`` in their configs) is
applied afterwards by the run's rules.

Files are looked for under ``root`` in our layout (one folder per set: ``<root>/mnist``,
``<root>/fashion_mnist``, ``<root>/cifar10``), directly in ``root`` and in torchvision's
layout, gzipped or not (:mod:`trainer_run.data.copies`): a copy found is read where it is,
writing nothing. Missing files are downloaded into ``<root>/<set>``
(:mod:`trainer_run.data.download`). ``root`` None means ``$TRAINER_RUN_DATA`` when set, else
``$XDG_CACHE_HOME/trainer-run`` (``~/.cache/trainer-run``).

A file with the published md5 is used as it is; another (recompressed, uncompressed, or with
``md5.<role>`` None: not checked) only when its content is the set's: a valid IDX header of the
published type and shape, ``examples`` images (60000 training and 10000 test for MNIST), the
data its header declares; CIFAR-10's batches of the published number of records. It is then
named in a note, and its content's md5 recorded (``Splits.files``, kept in ``data.json``).
The defaults below are the published files' md5, sizes and mirrors (the configs in
``configs/dataset/`` repeat them, so a run can change them).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import numpy

from ..errors import ConfigError
from . import cifar, copies
from .array_files import existing
from .datasets import Splits
from .download import MD5, TIME_LIMIT, checked, fetch, locked
from .idx import content_md5, read_idx

MNIST_NAMES = {"train_images": "train-images-idx3-ubyte.gz",
               "train_labels": "train-labels-idx1-ubyte.gz",
               "test_images": "t10k-images-idx3-ubyte.gz", "test_labels": "t10k-labels-idx1-ubyte.gz"}
"""The files of an MNIST-format set by role (Fashion-MNIST's have the same names)."""
MNIST_MD5 = {"train_images": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
             "train_labels": "d53e105ee54ea40749a09fcbcd1e9432",
             "test_images": "9fb629c4189551a2d022fa330f9573f3",
             "test_labels": "ec29112dd5afa0611ce80d1b7f02629c"}
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "https://storage.googleapis.com/cvdf-datasets/mnist/")
FASHION_MNIST_MD5 = {"train_images": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                     "train_labels": "25c81989df183df01b3e8a0aad5dffbe",
                     "test_images": "bef4ecab320f06d8554ea6380940ec79",
                     "test_labels": "bb300cfdad3c16e7a12a480ee83cd310"}
MNIST_EXAMPLES = {"train": 60000, "test": 10000}
"""The published number of images of each split of MNIST and Fashion-MNIST."""
MNIST_SHAPE = (28, 28)
FASHION_MNIST_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
"""Fashion-MNIST's class names by id, from its README."""
CIFAR10_NAMES = {"archive": "cifar-10-binary.tar.gz"}
CIFAR10_MD5 = {"archive": "c32a1d4ab5d03f1284b67883e8d87530"}
CIFAR10_MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)
CIFAR10_EXAMPLES = {"train": 50000, "test": 10000}
"""The published number of CIFAR-10's images (the training ones in 5 batches of 10000)."""
TIMEOUT = 30.0
MNIST_CHECKED = "valid IDX headers of the published type, shape and size"
CIFAR10_CHECKED = "the published members and number of records"


def data_root(root=None) -> Path:
    """The folder holding one subfolder per image set: ``root`` if given (relative to the
    folder the command runs from), else ``$TRAINER_RUN_DATA``, else ``trainer-run`` in the
    user's cache folder (``$XDG_CACHE_HOME`` if it is an absolute path, else ``~/.cache``)."""
    if root is None:
        root = os.environ.get("TRAINER_RUN_DATA") or None
    if root is None:
        cache = os.environ.get("XDG_CACHE_HOME", "")
        root = Path(cache if os.path.isabs(cache) else "~/.cache").expanduser() / "trainer-run"
    return Path(root).expanduser().absolute()


def mnist(root=None, mirrors=MNIST_MIRRORS, md5=MNIST_MD5, timeout: float = TIMEOUT,
          time_limit: float = TIME_LIMIT, examples=MNIST_EXAMPLES) -> Splits:
    """MNIST's handwritten digits (60000 training and 10000 test images of 28x28, 10 classes)
    from a copy under ``root``, else downloaded into ``<root>/mnist``; ``md5``: the md5 of each
    file of :data:`MNIST_NAMES` by role (None, or a role's None: not checked); ``examples``:
    the images of each split a file must hold when its md5 is not the one given;
    ``timeout`` and ``time_limit``: :func:`.download.fetch`'s."""
    return _mnist_format("mnist", root, mirrors, md5, (timeout, time_limit), examples,
                         [str(d) for d in range(10)])


def fashion_mnist(root=None, mirrors=FASHION_MNIST_MIRRORS, md5=FASHION_MNIST_MD5,
                  timeout: float = TIMEOUT, time_limit: float = TIME_LIMIT,
                  examples=MNIST_EXAMPLES) -> Splits:
    """Zalando's Fashion-MNIST (clothes; MNIST's sizes and format) from a copy under ``root``,
    else downloaded into ``<root>/fashion_mnist``."""
    return _mnist_format("fashion_mnist", root, mirrors, md5, (timeout, time_limit), examples,
                         list(FASHION_MNIST_CLASSES))


def cifar10(root=None, mirrors=CIFAR10_MIRRORS, md5=CIFAR10_MD5, timeout: float = TIMEOUT,
            time_limit: float = TIME_LIMIT, examples=CIFAR10_EXAMPLES) -> Splits:
    """CIFAR-10 (50000 training and 10000 test colour images of 32x32, 10 classes) from its
    binary release (see :mod:`trainer_run.data.cifar`): an extracted ``cifar-10-batches-bin``
    under ``root``, else the archive (in ``<root>/cifar10``: extracted there once; in ``root``:
    read in place), else the archive downloaded into ``<root>/cifar10`` and extracted there;
    ``md5``: the archive's, ``{"archive": ...}``; ``examples``: the records the batches must
    hold."""
    files, mirrors, limits = _sources(CIFAR10_NAMES, md5, mirrors, (timeout, time_limit))
    counts = _examples(examples, per_train_file=len(cifar.TRAIN))
    root, name = data_root(root), CIFAR10_NAMES["archive"]
    with _under("root"):
        kind, path = _cifar10_source(root, files, mirrors, limits)
        if kind == "folder":
            return _cifar10_splits(cifar.read(path, counts), path, {"batches": {"path": str(path)}})
        read, source, record = _cifar10_archive(path, files[name], counts, root / "cifar10")
    note = copies.note([record], CIFAR10_CHECKED)
    return _cifar10_splits(read, source, {"archive": copies.public(record)}, [note] if note else [])


def idx(train_images=None, train_labels=None, test_images=None, test_labels=None) -> Splits:
    """Images and labels from IDX files (MNIST's format, gzipped or not) of any shape and type:
    ``train_images`` and ``train_labels``, and optionally ``test_images`` and ``test_labels``
    for a held-out test split. Paths are relative to the folder the command runs from."""
    train = _pair("train_images", train_images, "train_labels", train_labels)
    origin = {"train": str(train_images)}
    test = None
    if test_images is not None or test_labels is not None:
        test = _pair("test_images", test_images, "test_labels", test_labels)
        origin["test"] = str(test_images)
    return Splits(train, None, test, origin)


def _mnist_format(name: str, root, mirrors, md5, limits: tuple, examples, classes: list) -> Splits:
    """The four IDX files of an MNIST-format set, found under ``root`` or fetched, as splits."""
    files, mirrors, limits = _sources(MNIST_NAMES, md5, mirrors, limits)
    examples = _examples(examples)
    folders = copies.mnist_folders(data_root(root), name)
    with _under("root"):
        paths = copies.find(folders, MNIST_NAMES) or _fetched(folders, files, mirrors, limits)
        read = {role: _idx_file(path, files[MNIST_NAMES[role]], role, examples)
                for role, path in paths.items()}
        arrays = {role: array for role, (array, _) in read.items()}
        train = _images(paths, arrays, "train")
        test = _images(paths, arrays, "test")
    records = [record for _, record in read.values()]
    return Splits(train, None, test, {"train": str(paths["train_images"]),
                                      "test": str(paths["test_images"])}, classes,
                  files={role: copies.public(record) for role, (_, record) in read.items()},
                  notes=[n for n in [copies.note(records, MNIST_CHECKED)] if n])


def _fetched(folders: list[Path], files: dict, mirrors: list, limits: tuple) -> dict[str, Path]:
    """The set's files in our folder (``folders[0]``), the missing ones downloaded there."""
    ours = folders[0]
    paths = {role: copies.in_folder(ours, name) for role, name in MNIST_NAMES.items()}
    missing = {MNIST_NAMES[role]: files[MNIST_NAMES[role]] for role, p in paths.items() if p is None}
    fetched = fetch(ours, missing, mirrors, *limits, searched=folders[1:]) if missing else {}
    return {role: path or fetched[MNIST_NAMES[role]] for role, path in paths.items()}


def _idx_file(path: Path, digest: str | None, role: str, examples: dict) -> tuple:
    """The array of the IDX file ``path`` of ``role`` and its record: a file without the md5
    ``digest`` must hold the published type and shape (``examples`` images of 28x28)."""
    record = copies.identify(path, digest)
    array = read_idx(path)
    if record["published"]:
        return array, record
    split, kind = role.split("_")
    shape = (examples[split], *MNIST_SHAPE) if kind == "images" else (examples[split],)
    if array.dtype != numpy.uint8 or array.shape != shape:
        raise ConfigError(_not_the_set(path, record, array, shape, split))
    return array, copies.content(record, content_md5(array))


def _not_the_set(path: Path, record: dict, array, shape: tuple, split: str) -> str:
    """Why the file ``path`` (with its ``record``), holding ``array``, is not the set's."""
    found = f"{'x'.join(map(str, array.shape))} {array.dtype}"
    md5 = "" if record["expected"] is None else f"has md5 {record['md5']}, not {record['expected']}, and "
    fix = "replace it with the published file"
    if array.dtype == numpy.uint8 and array.shape[1:] == shape[1:]:
        fix += (f", or for a set of {len(array)} {split} images in this format set "
                f"dataset.examples.{split}={len(array)}")
    return (f"{path} {md5}holds {found} values, not the {'x'.join(map(str, shape))} uint8 of the "
            f"set's {split} split (dataset.examples.{split}={shape[0]}): {fix}")


def _images(paths: dict, arrays: dict, split: str) -> tuple:
    """Images (N, 1, H, W) and labels of one split of an MNIST-format set."""
    images_path, labels_path = paths[f"{split}_images"], paths[f"{split}_labels"]
    images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
    if images.ndim != 3 or labels.ndim != 1:
        raise ConfigError(f"{images_path} and {labels_path} hold arrays of shapes {images.shape} "
                          f"and {labels.shape}, not images (N, H, W) and labels (N,); replace them")
    _check_counts(images_path, len(images), labels_path, len(labels))
    return images.reshape(len(images), 1, *images.shape[1:]), labels.astype("int64")


def _cifar10_source(root: Path, files: dict, mirrors: list, limits: tuple) -> tuple[str, Path]:
    """Where CIFAR-10 is read from: the first place of :func:`copies.cifar10_sources` that
    holds it, else the archive downloaded into ``<root>/cifar10``."""
    for kind, path, marker in copies.cifar10_sources(root, cifar.FOLDER, CIFAR10_NAMES["archive"]):
        if marker.exists():
            return kind, path
    ours = root / "cifar10"
    fetched = fetch(ours, files, mirrors, *limits, searched=[root])
    return "archive", fetched[CIFAR10_NAMES["archive"]]


def _cifar10_archive(archive: Path, digest: str | None, counts: dict, ours: Path) -> tuple:
    """What :mod:`.cifar` reads from ``archive`` (extracted once when it lies in our folder
    ``ours``, else read in place), where from, and the archive's record: an archive without
    the md5 ``digest`` is accepted for its content, whose md5 the record then holds."""
    record = copies.identify(archive, digest)
    content = None if record["published"] else hashlib.md5(usedforsecurity=False)
    if archive.parent == ours:
        with locked(ours):
            source = cifar.extracted(ours) or cifar.extract(archive, ours)
        read = cifar.read(source, counts, content)
    else:
        source = Path(f"{archive}:{cifar.FOLDER}")
        read = cifar.read_archive(archive, counts, content)
    if content is not None:
        record = copies.content(record, content.hexdigest())
    return read, source, record


def _cifar10_splits(read: tuple, source: Path, files: dict, notes: tuple = ()) -> Splits:
    """The splits of what :mod:`.cifar` ``read`` from ``source``, with ``files`` (role: what
    ``data.json`` keeps of each) and ``notes``."""
    train, test, names = read
    return Splits(train, None, test, {"train": str(source / "data_batch_*.bin"),
                                      "test": str(source / cifar.TEST)}, list(names),
                  files=files, notes=list(notes))


def _pair(images_key: str, images, labels_key: str, labels) -> tuple:
    """The arrays of the IDX files ``images`` and ``labels`` (both needed), read and checked."""
    arrays = []
    for key, value in ((images_key, images), (labels_key, labels)):
        path = existing(key, value)
        with _under(key):
            arrays.append(read_idx(path))
    with _under(labels_key):
        _check_counts(images, len(arrays[0]), labels, len(arrays[1]))
    return tuple(arrays)


def _check_counts(images, n_images: int, labels, n_labels: int) -> None:
    if n_images != n_labels:
        raise ConfigError(f"{labels} holds {n_labels} labels and {images} {n_images} images; "
                          "give the labels of those images, one each")


def _sources(names: dict, md5, mirrors, limits: tuple) -> tuple[dict, list, tuple]:
    """The arguments of :func:`~trainer_run.data.download.fetch` for the files ``names`` (role:
    file name) with ``md5`` (role: md5 or None; None: none checked) and ``limits`` (timeout,
    time limit), checked; ``md5`` must give every role, no other."""
    md5 = dict.fromkeys(names) if md5 is None else md5
    if not isinstance(md5, dict) or sorted(md5) != sorted(names):
        given = ", ".join(map(str, md5)) if isinstance(md5, dict) else repr(md5)
        raise ConfigError(f"md5 must give the md5 of each of {', '.join(names)} (the files "
                          f"{', '.join(names.values())}), got {given or 'none'}")
    for role, digest in md5.items():
        if digest is not None and not MD5.fullmatch(str(digest).lower()):
            raise ConfigError(f"md5.{role} must be 32 hex digits or null (not checked), got "
                              f"{digest!r}")
    return checked({names[role]: digest for role, digest in md5.items()}, mirrors, *limits)


def _examples(examples, per_train_file: int = 1) -> dict:
    """``examples`` (``{"train": n, "test": n}``) checked; with ``per_train_file``, the training
    images are that many files' (the count given for ``train`` is per file)."""
    if not isinstance(examples, dict) or sorted(examples) != ["test", "train"]:
        raise ConfigError(f"examples must give the number of train and test images, got {examples!r}")
    for split, n in examples.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n % (per_train_file if
                                                                           split == "train" else 1):
            each = f" (a multiple of {per_train_file}: the training files hold equal shares)" \
                if split == "train" and per_train_file > 1 else ""
            raise ConfigError(f"examples.{split} must be a positive integer{each}, got {n!r}")
    return {"train": examples["train"] // per_train_file, "test": examples["test"]}


@contextlib.contextmanager
def _under(key: str):
    """Re-raises a ConfigError from inside with ``key: `` in front, naming the argument to change
    (the runner then shows ``dataset.<key>: ...``)."""
    try:
        yield
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
