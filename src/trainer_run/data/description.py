"""The record of a run's data in its run directory, for evaluation and prediction outside the
run: ``data.json`` (the task, the input shape, the output size, the class names by id, the
normalization's kind, the line that described the data, the raw training inputs' dtype and
range under ``inputs`` (:mod:`.raw_inputs`), for the standard image sets and texts the files
read with their checksums, for a text its tokenizer's kind) and, for ``standardize``,
``normalization.npz`` (``mean`` and ``std`` per feature, loadable with ``numpy.load``); for a
text, ``tokenizer.json``, the tokenizer's state (:mod:`.text` reads it back).

:func:`read` checks what it reads, since a run directory is data that may be damaged or come
from anyone: a file that is not JSON or not an archive of plain arrays (never unpickled), a
value of the wrong kind (``in_shape: [-3]``, an unknown task), or ``standardize`` without a
``mean`` or ``std`` of the inputs' shape, is a :class:`~trainer_run.errors.ConfigError` of
one line naming the file and what is wrong with it. Both files are read as a run's files are
(:mod:`trainer_run.storage.reading`: regular files, not links, ``data.json`` of at most
``RECORD_BYTES``).
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path

import numpy

from trainer_run.storage import run_files

from ..errors import ConfigError
from ..storage import files, npz, reading, strict_json
from .datasets import Data

FILES = (run_files.DATA, run_files.NORMALIZATION, run_files.TOKENIZER, run_files.TOKENS,
         run_files.TOKENS_RECORD)
TASKS = ("classification", "regression")
KINDS = ("none", "unit", "standardize")


def write(data: Data, folder: Path) -> None:
    """Writes the record of ``data`` into ``folder`` (each file atomically)."""
    values = data.normalization
    arrays = {k: numpy.asarray(v) for k, v in values.items() if k in ("mean", "std")}
    summary = {"task": data.task, "in_shape": list(data.in_shape), "out_size": data.out_size,
               "classes": data.classes, "normalize": values.get("kind", "none"),
               "scale": float(values["scale"]) if "scale" in values else None,
               "description": data.note}
    if data.raw_inputs:
        summary["inputs"] = data.raw_inputs
    if data.files:
        summary["files"] = data.files
    if data.tokenizer is not None:
        summary["tokenizer"] = data.tokenizer.kind
        files.write_atomic(Path(folder) / run_files.TOKENIZER,
                           strict_json.dumps(data.tokenizer.state()), run=folder)
    files.write_atomic(Path(folder) / FILES[0], strict_json.dumps(summary, indent=2), run=folder)
    if arrays:
        npz.save(Path(folder) / FILES[1], arrays, run=folder)


def read(folder: Path) -> dict:
    """The record written by :func:`write`, with ``mean`` and ``std`` when there are any,
    checked as the module docstring says."""
    path = Path(folder) / FILES[0]
    record = read_json(path, Path(folder))
    problem = _problem(record)
    if problem:
        raise ConfigError(f"{path} is damaged: {problem}")
    values = Path(folder) / FILES[1]
    if values.exists() or values.is_symlink():
        record.update(_arrays(values, tuple(record["in_shape"])))
    if record.get("normalize") == "standardize" and not {"mean", "std"} <= set(record):
        raise ConfigError(f"{path} says the inputs were standardized and {values} is missing; it "
                          "holds their mean and std: copy it with the run")
    return record


def read_json(path: Path, folder: Path):
    """The JSON of the run's file ``path`` (in the run folder ``folder``), read as a run's
    record is (:func:`trainer_run.storage.reading.read_bytes`: a regular file, not a link, of at
    most ``RECORD_BYTES``; its refusals as they are); a file that is not JSON is one
    ConfigError line saying it is damaged."""
    data = reading.read_bytes(path, reading.RECORD_BYTES, folder)
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else e
        raise ConfigError(f"{path} is damaged: it is not JSON ({reason}); it is written by the "
                          "run, copy the run directory again") from None


def _problem(record) -> str | None:
    """What is wrong with the contents of ``data.json`` (None: nothing)."""
    if not isinstance(record, dict):
        return f"it holds a JSON {type(record).__name__}, not an object of keys"
    missing = [k for k in ("task", "in_shape", "out_size") if k not in record]
    if missing:
        return f"it has no {missing[0]!r}"
    shape = record["in_shape"]
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        return f"in_shape must be a list of positive integers, got {shape!r}"
    if record["task"] not in TASKS:
        return f"task must be one of {', '.join(TASKS)}, got {record['task']!r}"
    if not _count(record["out_size"]):
        return f"out_size must be a positive integer, got {record['out_size']!r}"
    classes = record.get("classes")
    if classes is not None and not (isinstance(classes, list) and all(
            isinstance(c, (str, int, float)) for c in classes)):
        return f"classes must be null or a list of names, got {classes!r}"
    kind = record.get("normalize", "none")
    if kind not in KINDS:
        return f"normalize must be one of {', '.join(KINDS)}, got {kind!r}"
    scale = record.get("scale")
    if kind == "unit" and not (_real(scale) and 0 < scale < float("inf")):
        return f"normalize is unit and scale must be a positive number, got {scale!r}"
    return None


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _arrays(path: Path, in_shape: tuple) -> dict:
    """``mean`` and ``std`` (and any other arrays) of ``normalization.npz``, read without
    pickle; each of ``mean`` and ``std`` finite floats of the inputs' shape, ``std`` positive."""
    try:
        arrays = npz.load(path)
    except ConfigError:  # a link or a special file: refused as every run's file is
        raise
    except (ValueError, OSError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise ConfigError(f"{path} cannot be read as an archive of arrays ({reason}); it is "
                          "written by the run, copy the run directory again") from None
    for key in ("mean", "std"):
        if key not in arrays:
            raise ConfigError(f"{path} has no {key!r} array (it has {', '.join(arrays) or 'none'}); "
                              "it is written by the run, copy the run directory again")
        value = arrays[key]
        if value.dtype.kind != "f" or not _fits(value.shape, in_shape):
            raise ConfigError(f"{path}: {key!r} must hold floats of the inputs' shape {in_shape}, "
                              f"and it holds {value.dtype} of shape {value.shape}")
        if not numpy.isfinite(value).all():
            raise ConfigError(f"{path}: {key!r} holds NaN or infinity; it is written by the run, "
                              "copy the run directory again")
    if not (arrays["std"] > 0).all():
        raise ConfigError(f"{path}: 'std' holds a value that is not positive; inputs divided by "
                          "it would be infinite")
    return arrays


def _fits(shape: tuple, in_shape: tuple) -> bool:
    """Whether values of ``shape`` apply to every input example (of ``in_shape``) alike."""
    try:
        return numpy.broadcast_shapes(shape, in_shape) == in_shape
    except ValueError:
        return False


def normalization(record: dict) -> dict:
    """The normalization values of a record read by :func:`read`, as
    :func:`trainer_run.data.input_scaling.transform` takes them (``{}`` for none)."""
    kind = record.get("normalize", "none")
    if kind == "unit":
        return {"kind": kind, "scale": numpy.float32(record["scale"])}
    if kind == "standardize":
        return {"kind": kind, "mean": record["mean"], "std": record["std"]}
    return {}
