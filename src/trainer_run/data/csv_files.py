"""CSV tables as datasets: ``dataset=csv dataset.path=data.csv dataset.target=label``.

The rules:

- **Header.** ``header=auto`` takes the first row as column names when some column holds a
  non-number there and a number in the second row; ``true`` or ``false`` decides instead.
- **Target** (the labels): a column name (with a header) or a 0-based index (negative counts
  from the end); the last column when unset.
- **Features:** the columns listed in ``features`` (names or indices), else every other
  column whose cells are all numbers.
- **Types.** A column whose cells are all integers within int64 holds integers, one of
  numbers holds floats (an empty cell is NaN), anything else holds strings. The target keeps its type, so
  the run's task rule applies to it (string labels become class ids); features become float32.
- **Refused:** an empty target cell (a NaN label: no class, no target value), and a feature
  beyond float32's range (it would become infinity), each named with its row.

A table of plain numbers (no quotes, no empty cells) is read by :mod:`.csv_numeric`, NumPy's
C parser block by block into float32: the same arrays, at ``numpy.loadtxt``'s speed.

``val_path`` and ``test_path`` name tables with the same columns holding a validation and a
held-out test split.
"""

from __future__ import annotations

import csv as csv_module

import numpy

from ..errors import ConfigError
from .array_files import existing
from .csv_numeric import is_number, looks_like_header, numeric_table
from .datasets import Splits

HEADERS = ("auto", True, False)


def csv(path: str | None = None, target: str | int | None = None, features: list | None = None,
        header: str | bool = "auto", delimiter: str = ",", val_path: str | None = None,
        test_path: str | None = None) -> Splits:
    """The table ``path`` as inputs (``features``) and labels (``target``), by the rules above."""
    if header not in HEADERS:
        raise ConfigError(f"header={header!r} is unknown; choose auto, true or false")
    files = {"train": ("path", path), "val": ("val_path", val_path), "test": ("test_path", test_path)}
    arrays, origin, columns = {}, {}, None
    for split, (key, value) in files.items():
        if value is None and split != "train":
            continue
        fast = _fast(key, value, header, delimiter, target, features, columns)
        if fast is not None:
            arrays[split], columns = fast
        else:
            names, cells = _read(key, value, header, delimiter)
            if columns is None:
                columns = _columns(names, cells, target, features, value)
            arrays[split] = _arrays(names, cells, columns, key, value)
        origin[split] = str(value)
    return Splits(arrays["train"], arrays.get("val"), arrays.get("test"), origin)


def _fast(key: str, value, header, delimiter: str, target, features, columns) -> tuple | None:
    """``((x, y), columns)`` when the table is all plain numbers (see :mod:`.csv_numeric`),
    else None: the same arrays as the general path, without its lists of strings."""
    def choose(names, first):
        return columns or _columns(names, [first], target, features, value)

    found = numeric_table(existing(key, value), header, delimiter, choose)
    if found is not None and not numpy.isfinite(found[0][0]).all():
        return None  # the general path names the cell (or prepare the NaN or infinity)
    return found


def _read(key: str, value, header, delimiter: str) -> tuple[list[str] | None, list[list[str]]]:
    """The column names (None without a header) and the rows of cells of one table."""
    path = existing(key, value)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = [row for row in csv_module.reader(f, delimiter=delimiter) if row]
    except (UnicodeDecodeError, csv_module.Error) as e:
        raise ConfigError(f"{key}={value} cannot be read as a CSV table ({e})") from None
    except OSError as e:  # the file is there, and reading it fails
        raise ConfigError(f"{key}={value} cannot be read ({e.strerror or e})") from None
    if header == "auto":
        header = len(rows) > 1 and looks_like_header(rows[0], rows[1])
    names, rows = (rows[0], rows[1:]) if header else (None, rows)
    if not rows:
        raise ConfigError(f"{key}={value} holds no rows of data")
    width = len(names or rows[0])
    ragged = next((i for i, row in enumerate(rows) if len(row) != width), None)
    if ragged is not None:
        raise ConfigError(f"{key}={value}: row {ragged + 1 + bool(names)} has "
                          f"{len(rows[ragged])} cells and the table {width} columns")
    return names, rows


def _columns(names, rows, target, features, value) -> tuple[list[int], int]:
    """The feature columns' and the target column's positions."""
    width = len(rows[0])
    label = width - 1 if target is None else _position("target", target, names, width, value)
    if features is not None:
        chosen = [_position("features", f, names, width, value) for f in features]
    else:
        chosen = [i for i in range(width) if i != label and _numeric(rows, i)]
    if label in chosen:
        raise ConfigError(f"features={list(features)}: the target column {target!r} cannot be a "
                          "feature too")
    if not chosen:
        raise ConfigError(f"path={value}: no numeric column besides the target; list the "
                          "features with dataset.features")
    return chosen, label


def _position(key: str, column, names, width: int, value) -> int:
    """The position of ``column`` (a name or an index) in a table of ``width`` columns."""
    if isinstance(column, int) and not isinstance(column, bool):
        if -width <= column < width:
            return column % width
        raise ConfigError(f"{key}={column}: {value} has {width} columns (0 to {width - 1})")
    if names is not None and str(column) in names:
        return names.index(str(column))
    known = f"its columns are {', '.join(names)}" if names else "it has no header row"
    raise ConfigError(f"{key}={column!r}: {value} has no column {column!r} ({known}); name a "
                      f"column or give its index")


def _numeric(rows, i: int) -> bool:
    return all(row[i].strip() == "" or is_number(row[i]) for row in rows)


def _arrays(names, rows, columns, key: str, value) -> tuple:
    """The features (float32) and the labels of ``rows`` of the table ``value`` (the argument
    ``key``'s)."""
    chosen, label = columns
    x = numpy.empty((len(rows), len(chosen)), numpy.float32)
    for j, i in enumerate(chosen):
        column = names[i] if names else i
        try:
            cells = numpy.array([float(row[i]) if row[i].strip() else numpy.nan for row in rows])
        except ValueError:
            raise ConfigError(f"features: column {column!r} of {value} holds text; list numeric "
                              "columns in dataset.features") from None
        with numpy.errstate(over="ignore"):
            x[:, j] = cells
        beyond = numpy.flatnonzero(numpy.isfinite(cells) & ~numpy.isfinite(x[:, j]))
        if beyond.size:
            raise ConfigError(f"{key}={value}: column {column!r} holds {cells[beyond[0]]:g} in row "
                              f"{beyond[0] + 1 + bool(names)}, beyond the range of float32 "
                              "(largest 3.403e+38) that features are read in; scale it down")
    labels = [row[label].strip() for row in rows]
    if "" in labels:
        column = names[label] if names else label
        raise ConfigError(f"{key}={value}: the target column {column!r} is empty in row "
                          f"{labels.index('') + 1 + bool(names)}; an empty cell is NaN and a "
                          "label cannot be: fill it or drop the row")
    return x, _typed(labels)


def _typed(cells: list[str]):
    """The cells as int64 integers, else floats (integers beyond int64 too), else strings."""
    for kind in (int, float):
        try:
            values = numpy.array([kind(c) for c in cells])
        except (ValueError, OverflowError):
            continue
        if values.dtype.kind != "O":  # Python integers beyond int64
            return values
    return numpy.array(cells)

