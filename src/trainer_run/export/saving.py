"""An export written to a file (:func:`save`) and where it goes when no file is named
(:func:`default_path`): ``<run>/export/model_<best|last|file name>[_iter<N>].<format>``, its name
made of checked values only (:func:`file_name`)."""

from __future__ import annotations

import re
import reprlib
from pathlib import Path

from trainer_run.export import flat_arrays as flat
from trainer_run.storage import run_files

from ..errors import ConfigError, check
from ..storage import files, npz
from . import onnx_graph

FORMATS = ("npz", "onnx")
"""What :func:`save` writes: flat arrays by name (:mod:`.flat_arrays`), or an ONNX graph
(:mod:`.onnx_graph`)."""


KINDS = ("best", "last", "file")
"""The weights a default file name may name (:attr:`trainer_run.runs.weights.Weights.which`)."""
LAST_ITERATION = 2**63 - 1
"""The largest iteration a file name may hold (a counter's range)."""


def default_path(run: Path, weights, form: str) -> Path:
    """Where the export of ``run``'s ``weights`` (:class:`trainer_run.runs.weights.Weights`) in the
    format ``form`` goes when no file is named: the run's ``export/`` folder, under the name
    :func:`file_name` gives."""
    return Path(run) / run_files.EXPORT / file_name(run, weights, form)


def file_name(run: Path, weights, form: str) -> str:
    """``model_<which>[_iter<N>].<form>`` (a file's weights: :func:`_named`), the one place an
    export's default name is made.
    Its parts are read from the run's records (the iteration from ``summary.json`` or a
    checkpoint's name), so they are checked first: a kind other than :data:`KINDS`, or an
    iteration that is not an integer from 0 to :data:`LAST_ITERATION` (a path, a negative
    number, a fraction, a bool), is a ConfigError saying the summary is damaged, raised
    before anything is written."""
    which, iteration = weights.which, weights.iteration
    check(which in KINDS, f"the weights of run {run} are of an unknown kind "
                          f"({reprlib.repr(which)}); name the file to write with out=FILE")
    if iteration is not None and not (type(iteration) is int and 0 <= iteration <= LAST_ITERATION):
        raise ConfigError(f"{Path(run) / run_files.SUMMARY} is damaged: it records "
                          f"{reprlib.repr(iteration)} as the iteration of the run's {which} "
                          "weights, not a whole number of iterations; restore the file from a "
                          "copy of the run, or name the file to write with out=FILE")
    return f"{_named(weights)}{'' if iteration is None else f'_iter{iteration}'}.{form}"


def _named(weights) -> str:
    """``model_<which>``; for weights of a file, its name without the suffix (letters, digits,
    ``_`` and ``-`` only; ``model_`` in front unless it starts with ``model``), so that
    ``model_ema.npz`` and ``model_swa.npz`` export to ``model_ema`` and ``model_swa``."""
    if weights.which != "file":
        return f"model_{weights.which}"
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(weights.path).stem)[:100].strip("_") or "file"
    return stem if stem.startswith("model") else f"model_{stem}"


def save(trained, form: str, path: Path, run: Path | None = None) -> Path:
    """Writes ``trained`` (:class:`trainer_run.runner.trained.Trained`) in the format ``form`` to
    ``path`` atomically (replacing a file there) and returns it; with ``run``, ``path`` lies
    in that run folder, made without following a link. Everything is built before anything is
    written, so a refused export writes nothing. ConfigError for an unknown format, a model
    the format cannot hold, a folder at ``path`` or a missing folder above it; StorageError
    when the disk refuses."""
    check(form in FORMATS, f"format={form} is unknown; choose one of {', '.join(FORMATS)}")
    path = Path(path)
    if form == "onnx":
        content = onnx_graph.to_onnx(trained).SerializeToString()
    else:
        named = flat.arrays(trained)
        content = lambda f: npz.write(f, named)  # noqa: E731 - written once the file is open
    if path.is_dir():
        raise ConfigError(f"out={path} is a folder; name the file to write (e.g. {path}/model.{form})")
    if run is not None:
        files.make_folder(path.parent, run)
    elif not path.parent.is_dir():
        raise ConfigError(f"out={path}: the folder {path.parent} does not exist; make it first")
    files.write_atomic(path, content, run=run)
    return path
