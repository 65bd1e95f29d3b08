"""Array files as datasets: ``dataset=npz`` (named arrays in one file) and ``dataset=npy`` (one
memory-mapped array per file, so a set larger than memory trains).

Paths are relative to the folder the command runs from. Each loader returns
:class:`~trainer_run.data.datasets.Splits`; the run's rules (task, labels, validation split,
normalization) apply afterwards, see :mod:`trainer_run.data.prepare`. Arrays are loaded
without pickle: a file holding Python objects is refused.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy

from ..errors import ConfigError
from .datasets import Splits
from .mapped import open_npy


def npz(path: str | None = None, x_key: str = "x", y_key: str = "y", val_path: str | None = None,
        test_path: str | None = None) -> Splits:
    """The arrays ``x_key`` (inputs) and ``y_key`` (labels) of the ``.npz`` file ``path``;
    ``val_path`` and ``test_path`` name files with the same keys holding a validation and a
    held-out test split."""
    splits = {"train": ("path", path), "val": ("val_path", val_path), "test": ("test_path", test_path)}
    arrays, origin = {}, {}
    for split, (key, value) in splits.items():
        if value is None and split != "train":
            continue
        arrays[split] = _npz_arrays(key, value, x_key, y_key)
        origin[split] = str(value)
    return Splits(arrays["train"], arrays.get("val"), arrays.get("test"), origin)


def npy(x_path: str | None = None, y_path: str | None = None, val_x_path: str | None = None,
        val_y_path: str | None = None, test_x_path: str | None = None,
        test_y_path: str | None = None) -> Splits:
    """Inputs and labels from two ``.npy`` files each for training (``x_path``, ``y_path``)
    and, optionally, validation and a held-out test split; the inputs are memory-mapped
    (read as batches need them, their pages let go as reads go on: see
    :mod:`trainer_run.data.mapped`), the labels read into memory."""
    pairs = {"train": ("x_path", x_path, "y_path", y_path),
             "val": ("val_x_path", val_x_path, "val_y_path", val_y_path),
             "test": ("test_x_path", test_x_path, "test_y_path", test_y_path)}
    arrays, origin = {}, {}
    for split, (x_key, x_file, y_key, y_file) in pairs.items():
        if x_file is None and y_file is None and split != "train":
            continue
        arrays[split] = (_npy(x_key, x_file, mapped=True), _npy(y_key, y_file, mapped=False))
        origin[split] = f"{x_file} and {y_file}"
    return Splits(arrays["train"], arrays.get("val"), arrays.get("test"), origin)


def existing(key: str, value) -> Path:
    """The file ``value`` that the argument ``key`` names; refused naming both when it is
    unset, not there, a folder, or not a file that can be read."""
    if value is None:
        raise ConfigError(f"{key} is not set: give the file, e.g. {key}=data/train")
    path = Path(str(value)).expanduser()
    if path.is_dir():
        raise ConfigError(f"{key}={value} is a folder; give the path of a file in it")
    if not path.exists():
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        raise ConfigError(f"{key}={value}: no such file{where}")
    if not path.is_file():
        raise ConfigError(f"{key}={value} is not a regular file (a pipe or a device); give a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}={value} cannot be read: permission denied; make it readable")
    return path


def _npz_arrays(key: str, value, x_key: str, y_key: str) -> tuple:
    path = existing(key, value)
    try:
        archive = numpy.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(f"{key}={value} cannot be read as an .npz archive of arrays "
                          f"({_reason(e)}); write it with numpy.savez") from None
    if not isinstance(archive, numpy.lib.npyio.NpzFile):
        raise ConfigError(f"{key}={value} is a single array, not an .npz archive; choose "
                          "dataset=npy for .npy files")
    with archive:
        names = list(archive.files)
        for name_key, name in (("x_key", x_key), ("y_key", y_key)):
            if name not in names:
                raise ConfigError(f"{name_key}={name!r}: {value} has no array {name!r} (it has "
                                  f"{', '.join(names) or 'none'}); set dataset.x_key and "
                                  "dataset.y_key to the inputs' and the labels' names")
        try:
            return archive[x_key], archive[y_key]
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
            raise ConfigError(f"{key}={value}: its arrays cannot be read ({_reason(e)}); write "
                              "it with numpy.savez") from None


def _npy(key: str, value, mapped: bool):
    path = existing(key, value)
    if mapped:
        try:
            return open_npy(path)
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None
    try:
        return numpy.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ConfigError(f"{key}={value} cannot be read as a .npy array ({_reason(e)}); write "
                          "it with numpy.save") from None


def _reason(error: Exception) -> str:
    """Why NumPy refused an array, in our words where NumPy's advice would be to unpickle."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if "allow_pickle" in text:
        return ("it holds Python objects, which only unpickling could read, and trainer-run "
                "never unpickles a file; save numeric arrays")
    return text
