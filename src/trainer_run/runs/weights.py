"""Which saved weights of a run: the best evaluation's, the last ones, or those of a file.

A run directory keeps its main model's parameters in three places: ``model.npz`` (when the
run ended, however it ended), ``checkpoints/iter_N`` (full training states; the file
``checkpoints/best`` names the one of the best evaluation by the run's objective, and
``model_best.npz`` holds its parameters) and nothing else. :func:`resolve` turns what a user
names into one :class:`Weights`:

- a run directory with ``checkpoint="best"``: the checkpoint ``checkpoints/best`` names (or
  ``model_best.npz`` when that checkpoint was deleted); with ``"last"``: ``model.npz``, or
  the newest complete checkpoint of a run that wrote none; with neither, best when the run has
  one, else last (Lightning's ``ckpt_path="best"``);
- a checkpoint directory ``iter_N``, or the file ``checkpoints/best`` (the checkpoint it
  names): that checkpoint;
- an ``.npz`` file of arrays by parameter path (a ``model.npz``).

A run that did not complete (``summary.json`` says failed, diverged or interrupted, or there
is none: killed, or still running) is still loaded, with :attr:`Weights.warning` saying so.
Everything read is data: arrays and JSON, never code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy

from trainer_run.errors import ConfigError
from trainer_run.module import load_arrays
from trainer_run.runs import checkpoint_tree
from trainer_run.runs import directory as run_directory
from trainer_run.runs import summary as run_summary
from trainer_run.storage import checkpoint, files, npz, reading, run_files

CHOICES = ("best", "last")
"""The names :func:`resolve` takes for a run's weights; anything else is a path."""


@dataclass(frozen=True)
class Weights:
    """One source of a model's parameters: ``path`` (an ``.npz`` file or a checkpoint
    directory), ``which`` (``best``, ``last`` or ``file``), the ``iteration`` they are from
    (None when unknown) and a ``warning`` for weights of a run that did not complete."""

    path: Path
    which: str
    iteration: int | None = None
    warning: str | None = None

    def arrays(self) -> dict:
        """The parameters by path (and persistent values), read without pickle; a file that
        cannot be read is a :class:`~trainer_run.errors.ConfigError` naming it. A run's best
        checkpoint gives the EMA weights when the run's objective ranked them
        (:func:`.checkpoint_tree.chosen_params`), as its ``model_best.npz`` holds."""
        try:
            if self.path.is_dir():
                state = checkpoint.load(self.path)
                best = self.which == "best"
                chosen = checkpoint_tree.chosen_params(state, self.path) if best else None
                return chosen or checkpoint_tree.main_params(state, self.path)
            return dict(npz.load(self.path))
        except (OSError, ValueError, checkpoint.CheckpointError) as e:
            raise ConfigError(f"{self.path} cannot be read as a model's weights: {e}") from None

    def describe(self) -> str:
        """``best (iteration 300, runs/x/checkpoints/iter_00000300)``."""
        at = f"iteration {self.iteration}, " if self.iteration is not None else ""
        return f"{self.which} ({at}{self.path})"

    def as_json(self) -> dict:
        """The JSON record of these weights: ``checkpoint``, ``iteration`` and the absolute
        ``path``."""
        return {"checkpoint": self.which, "iteration": self.iteration,
                "path": str(self.path.resolve())}


def load(model, source, which: str | None = None, what: str = "the model") -> Weights:
    """Loads into ``model`` (anything with ``params()``), in place, the weights ``source`` and
    ``which`` name (:func:`resolve`: a run's best or last, a checkpoint directory, an ``.npz``
    file); returns them, their :attr:`~Weights.warning` included. Weights that do not fit are
    a :class:`~trainer_run.errors.ConfigError` naming the first parameter missing or of another
    shape and ``what`` they were loaded into; nothing is copied then."""
    weights = resolve(source, which)
    try:
        load_arrays(model, weights.arrays())
    except ConfigError:  # weights that cannot be read, named by Weights.arrays
        raise
    except (KeyError, ValueError) as e:
        raise ConfigError(f"{weights.path} does not fit {what}: "
                          f"{e.args[0] if e.args else e}") from None
    return weights


def resolve(source, which: str | None = None) -> Weights:
    """The weights ``source`` (a run directory, a checkpoint directory, ``checkpoints/best``
    or an ``.npz`` file) and ``which`` (``best``, ``last``, None for the run's default, or
    a path, relative to the current folder or else to the run) name; see the module
    docstring. Raises :class:`~trainer_run.errors.ConfigError` in one line for what does
    not exist or holds no weights."""
    if not str(source).strip():
        raise ConfigError("no weights named: give a run directory, a checkpoint directory or an "
                          ".npz file")
    source = Path(source).expanduser()
    if which is not None and which not in CHOICES:
        given = Path(which).expanduser()
        path = given if given.exists() or given.is_absolute() else source / given
        if not path.exists():
            raise ConfigError(f"checkpoint={which} is neither best nor last, and no checkpoint "
                              f"or .npz file is there ({path})")
        return resolve(path)
    if not source.exists():
        raise ConfigError(f"{source}: no such run, checkpoint or .npz file")
    if source.name == checkpoint.BEST and (source.is_file() or source.is_symlink()):
        return _checkpoint(_named(source), "best")
    if source.is_file():
        if which is not None:
            raise ConfigError(f"{source} is a file of weights; checkpoint={which} names the "
                              "weights of a run directory")
        return Weights(source, "file")
    if checkpoint.is_checkpoint(source):
        return _checkpoint(source, "file")
    if not run_directory.is_run(source):
        raise ConfigError(f"{source} holds no run of trainer-run's (no {run_files.RECORD}/"
                          f"{run_files.MARK}); name a run directory, a checkpoint directory or an "
                          ".npz file")
    chosen = best(source) if which != "last" else None
    if chosen is None and which == "best":
        raise ConfigError(f"run {source} has no best checkpoint (no evaluation entered "
                          "trainer.keep_best, or it was 0); choose checkpoint=last")
    chosen = chosen or _last(source)
    warning = _unfinished(source)
    return Weights(chosen.path, chosen.which, chosen.iteration, warning)


def _checkpoint(path: Path, which: str) -> Weights:
    if not checkpoint.is_checkpoint(path):
        raise ConfigError(f"{path} is not a checkpoint directory (iter_<N> holding state.json "
                          "and arrays.npz)")
    return Weights(path, which, checkpoint.iteration_of(path))


def best(run: Path) -> Weights | None:
    """The best evaluation's weights: the checkpoint ``checkpoints/best`` names, else
    ``model_best.npz`` (its iteration from the summary), else None."""
    marker = run / run_files.CHECKPOINTS / checkpoint.BEST
    files.check_no_links(marker, run)
    if marker.exists():  # read as a regular file, or refused
        named = _named(marker)
        if checkpoint.is_checkpoint(named):
            return _checkpoint(named, "best")
    if (run / run_files.BEST_MODEL).is_file():
        objective = run_summary.recorded(run).get("objective") or {}
        return Weights(run / run_files.BEST_MODEL, "best", objective.get("best_iteration"))
    return None


def _named(marker: Path) -> Path:
    """The checkpoint the file ``marker`` (``checkpoints/best``) names, a folder beside it;
    ConfigError naming the marker for a link, or a name that leads elsewhere."""
    try:
        name = reading.read_text(marker, reading.MARKER_BYTES).strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{marker} cannot be read ({getattr(e, 'strerror', None) or e})") from None
    if checkpoint.leads_outside(name):
        raise ConfigError(f"{marker} names {name!r}, outside {marker.parent}: a run's best "
                          "checkpoint is one of its own; remove that file, or name the weights")
    named = marker.parent / name
    if named.is_symlink():
        raise files.link_in_run(named)
    return named


def _last(run: Path) -> Weights:
    """The weights the run ended with: ``model.npz``, else its newest complete checkpoint."""
    if (run / run_files.MODEL).is_file():
        return Weights(run / run_files.MODEL, "last", run_summary.recorded(run).get("iteration"))
    try:
        found = checkpoint.find(run)
    except ConfigError:
        raise ConfigError(f"run {run} has no model.npz and no complete checkpoint: it holds no "
                          "weights") from None
    return _checkpoint(found, "last")


def _unfinished(run: Path) -> str | None:
    """A warning for a run that did not complete, naming how it ended; None for one that did."""
    summary = run_summary.recorded(run)
    status = summary.get("status")
    if status == "completed":
        return None
    if status is None:
        return (f"run {run} has no summary.json: it was killed or is still running; these are "
                "the weights it saved last")
    return (f"run {run} ended with status {status} at iteration {summary.get('iteration')}; "
            "its weights are those it had then")


def initialize(model, arrays: dict, strict: bool = True,
               asarray=None) -> tuple[list[str], list[str]]:
    """Copies ``arrays`` (path -> array) into ``model``'s parameters and persistent values of
    the same path and shape, in place (fine-tuning's start); returns the paths loaded and a
    description of each that was not (a model's path the arrays lack or hold in another shape,
    an array the model has no place for); ``asarray`` puts an array on the model's device
    (None: onto each parameter's own).
    With ``strict``, any such mismatch raises :class:`~trainer_run.errors.ConfigError`
    listing them, and nothing is copied; without, so does a load in which nothing matches
    (weights of another model). An array to load holding NaN or infinity is refused in one
    line naming it, and nothing is copied."""
    from trainer_run.module import persistents_of
    from trainer_run.params import copy_params

    places = {**model.params(), **persistents_of(model)}
    matching, mismatched = [], []
    for path, param in places.items():
        if path not in arrays:
            mismatched.append(f"{path} missing")
        elif tuple(arrays[path].shape) != tuple(param.data.shape):
            mismatched.append(f"{path} of shape {tuple(arrays[path].shape)}, the model's "
                              f"{tuple(param.data.shape)}")
        else:
            matching.append(path)
    mismatched += [f"{path} unused (the model has no such parameter)" for path in arrays
                   if path not in places]
    if strict and mismatched:
        raise ConfigError(f"the weights do not match the model: {'; '.join(mismatched)}; give "
                          "weights of this model, or init_from_strict=false to load the ones "
                          "that match")
    if not matching:
        more = len(mismatched) - 3
        shown = "; ".join(mismatched[:3]) + (f"; and {more} more" if more > 0 else "")
        raise ConfigError(f"none of the weights fits the model, so nothing would be loaded: {shown}; "
                          "give weights of this model (the same parameter names and shapes)")
    for path in matching:
        _check_finite(path, arrays[path])
    copy_params({p: places[p] for p in matching}, {p: arrays[p] for p in matching}, asarray)
    return matching, mismatched


def _check_finite(path: str, array) -> None:
    """Refuses (ConfigError) a floating array holding NaN or infinity, naming it."""
    array = numpy.asarray(array)
    if array.dtype.kind in "fc" and not numpy.isfinite(array).all():
        raise ConfigError(f"{path} holds NaN or infinite values: weights of a run that diverged "
                          "cannot start one; give weights saved before it diverged (an earlier "
                          "checkpoint, <run>/checkpoints/iter_<N>)")
