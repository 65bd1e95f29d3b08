"""The record of a run's data in its run directory, for evaluation and prediction outside the
run: ``data.json`` (the task, the input shape, the output size, the class names by id, the
normalization's kind, the line that described the data, the raw training inputs' dtype and
range under ``inputs`` (:mod:`.raw_inputs`) and, for the standard image sets, the files read
with their checksums) and, for ``standardize``,
``normalization.npz`` (``mean`` and ``std`` per feature, loadable with ``numpy.load``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy

from ..storage import files, reading, strict_json
from .datasets import Data

FILES = ("data.json", "normalization.npz")


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
    files.write_atomic(Path(folder) / FILES[0], strict_json.dumps(summary, indent=2), run=folder)
    if arrays:
        files.write_atomic(Path(folder) / FILES[1], lambda f: numpy.savez(f, **arrays), run=folder)


def read(folder: Path) -> dict:
    """The record written by :func:`write`, with ``mean`` and ``std`` when there are any;
    both files read as a run's files are (:mod:`trainer_run.storage.reading`: regular files,
    not links, ``data.json`` of at most ``RECORD_BYTES``)."""
    folder = Path(folder)
    record = json.loads(reading.read_text(folder / FILES[0], reading.RECORD_BYTES, folder))
    values = folder / FILES[1]
    if values.exists() or values.is_symlink():
        with reading.open_file(values, run=folder) as file, \
                numpy.load(file, allow_pickle=False) as arrays:
            record.update({k: arrays[k] for k in arrays.files})
    return record


def normalization(record: dict) -> dict:
    """The normalization values of a record read by :func:`read`, as
    :func:`trainer_run.data.input_scaling.transform` takes them (``{}`` for none)."""
    kind = record.get("normalize", "none")
    if kind == "unit":
        return {"kind": kind, "scale": numpy.float32(record["scale"])}
    if kind == "standardize":
        return {"kind": kind, "mean": record["mean"], "std": record["std"]}
    return {}
