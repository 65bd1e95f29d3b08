"""An export written to a file (:func:`save`) and where it goes when no file is named
(:func:`default_path`): ``<run>/export/model_<best|last|file>[_iter<N>].<format>``."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, check
from ..runs import files as run_files
from ..storage import files, npz
from . import npz as flat
from . import onnx_graph

FORMATS = ("npz", "onnx")
"""What :func:`save` writes: flat arrays by name (:mod:`.npz`), or an ONNX graph
(:mod:`.onnx_graph`)."""


def default_path(run: Path, weights, form: str) -> Path:
    """Where the export of ``run``'s ``weights`` (:class:`trainer_run.weights.Weights`) in the
    format ``form`` goes when no file is named: the run's ``export/`` folder."""
    iteration = f"_iter{weights.iteration}" if weights.iteration is not None else ""
    return Path(run) / run_files.EXPORT / f"model_{weights.which}{iteration}.{form}"


def save(trained, form: str, path: Path, run: Path | None = None) -> Path:
    """Writes ``trained`` (:class:`trainer_run.trained.Trained`) in the format ``form`` to
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
