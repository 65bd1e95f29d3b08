"""The standard image sets as dataset callables: ``dataset=mnist``, ``fashion_mnist``,
``cifar10`` (downloaded once, checked against their md5) and ``dataset=idx`` (your own IDX
files).

Each returns :class:`~trainer_run.data.datasets.Splits` with a training and a test split
and no validation split (the run holds out ``dataset.val_fraction`` of the training
images): inputs uint8 of shape (N, 1, 28, 28) for the MNIST sets, (N, 3, 32, 32) for
CIFAR-10, labels int64 class ids; ``dataset.normalize`` (``unit`` in their configs) is
applied afterwards by the run's rules.

Files live in one folder per set under ``root``: ``<root>/mnist``, ``<root>/fashion_mnist``,
``<root>/cifar10``. ``root`` None means ``$TRAINER_RUN_DATA`` when set, else
``$XDG_CACHE_HOME/trainer-run`` (``~/.cache/trainer-run``). How files are found, downloaded
and verified: :mod:`trainer_run.data.download`; the defaults below are the published files'
md5 and mirrors (the configs in ``configs/dataset/`` repeat them, so a run can change them).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import ConfigError
from . import cifar
from .array_files import existing
from .datasets import Splits
from .download import MD5, TIME_LIMIT, checked, fetch, locked
from .idx import read_idx

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
FASHION_MNIST_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
"""Fashion-MNIST's class names by id, from its README."""
CIFAR10_NAMES = {"archive": "cifar-10-binary.tar.gz"}
CIFAR10_MD5 = {"archive": "c32a1d4ab5d03f1284b67883e8d87530"}
CIFAR10_MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)
TIMEOUT = 30.0


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
          time_limit: float = TIME_LIMIT) -> Splits:
    """MNIST's handwritten digits (60000 training and 10000 test images of 28x28, 10 classes)
    from ``<root>/mnist``, downloaded there when missing; ``md5``: the md5 of each file of
    :data:`MNIST_NAMES` by role; ``timeout`` and ``time_limit``: :func:`.download.fetch`'s."""
    return _mnist_format("mnist", root, mirrors, md5, (timeout, time_limit),
                         [str(d) for d in range(10)])


def fashion_mnist(root=None, mirrors=FASHION_MNIST_MIRRORS, md5=FASHION_MNIST_MD5,
                  timeout: float = TIMEOUT, time_limit: float = TIME_LIMIT) -> Splits:
    """Zalando's Fashion-MNIST (clothes; MNIST's sizes and format) from
    ``<root>/fashion_mnist``, downloaded there when missing."""
    return _mnist_format("fashion_mnist", root, mirrors, md5, (timeout, time_limit),
                         list(FASHION_MNIST_CLASSES))


def cifar10(root=None, mirrors=CIFAR10_MIRRORS, md5=CIFAR10_MD5, timeout: float = TIMEOUT,
            time_limit: float = TIME_LIMIT) -> Splits:
    """CIFAR-10 (50000 training and 10000 test colour images of 32x32, 10 classes) from
    ``<root>/cifar10``: its binary release, downloaded when missing and extracted once into
    ``<root>/cifar10/cifar-10-batches-bin`` (see :mod:`trainer_run.data.cifar`); ``md5``:
    the archive's, ``{"archive": ...}``."""
    files, mirrors, limits = _sources(CIFAR10_NAMES, md5, mirrors, (timeout, time_limit))
    folder = data_root(root) / "cifar10"
    with _under("root"):
        batches = cifar.extracted(folder)
        if batches is None:
            archive = fetch(folder, files, mirrors, *limits)[CIFAR10_NAMES["archive"]]
            with locked(folder):
                batches = cifar.extracted(folder) or cifar.extract(archive, folder)
        train, test, names = cifar.read(batches)
    return Splits(train, None, test, {"train": str(batches / "data_batch_*.bin"),
                                      "test": str(batches / cifar.TEST)}, list(names))


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


def _mnist_format(name: str, root, mirrors, md5, limits: tuple, classes: list) -> Splits:
    """The four IDX files of an MNIST-format set in ``<root>/<name>`` as splits."""
    files, mirrors, limits = _sources(MNIST_NAMES, md5, mirrors, limits)
    folder = data_root(root) / name
    with _under("root"):
        fetched = fetch(folder, files, mirrors, *limits)
        paths = {role: fetched[file] for role, file in MNIST_NAMES.items()}
        train = _images(paths["train_images"], paths["train_labels"])
        test = _images(paths["test_images"], paths["test_labels"])
    return Splits(train, None, test, {"train": str(paths["train_images"]),
                                      "test": str(paths["test_images"])}, classes)


def _images(images_path: Path, labels_path: Path) -> tuple:
    """Images (N, 1, H, W) and labels of one split of an MNIST-format set."""
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1:
        raise ConfigError(f"{images_path} and {labels_path} hold arrays of shapes {images.shape} "
                          f"and {labels.shape}, not images (N, H, W) and labels (N,); replace them")
    _check_counts(images_path, len(images), labels_path, len(labels))
    return images.reshape(len(images), 1, *images.shape[1:]), labels.astype("int64")


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
    file name) with ``md5`` (role: md5) and ``limits`` (timeout, time limit), checked; ``md5``
    must give every role, no other."""
    if not isinstance(md5, dict) or sorted(md5) != sorted(names):
        given = ", ".join(map(str, md5)) if isinstance(md5, dict) else repr(md5)
        raise ConfigError(f"md5 must give the md5 of each of {', '.join(names)} (the files "
                          f"{', '.join(names.values())}), got {given or 'none'}")
    for role, digest in md5.items():
        if not MD5.fullmatch(str(digest).lower()):
            raise ConfigError(f"md5.{role} must be 32 hex digits, got {digest!r}")
    return checked({names[role]: digest for role, digest in md5.items()}, mirrors, *limits)


@contextlib.contextmanager
def _under(key: str):
    """Re-raises a ConfigError from inside with ``key: `` in front, naming the argument to change
    (the runner then shows ``dataset.<key>: ...``)."""
    try:
        yield
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
