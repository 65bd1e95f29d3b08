"""A finished run's model measured on a split of its data or of another dataset, after training:
what ``trainer-eval`` does, less its command line and its printing (the lightning-hydra-template's
``eval.py ckpt_path=...``).

:func:`evaluate` takes the run directory and ``KEY=VALUE`` overrides (``checkpoint=best|last|PATH``,
``split=test|val|train|all``, ``dataset=NAME``, ``dataset.KEY=VALUE``, ``metrics=[...]``,
``trust=true``). It rebuilds the run's model with the weights ``checkpoint`` names
(:func:`trainer_run.load_model`: best by default when the run has one), builds the data from the
run's saved ``dataset`` section, or from the option ``dataset=NAME`` of our config files, with
the ``dataset.KEY=VALUE`` overrides on top, and evaluates the model on ``split`` with the run's
own normalization (never one fitted on the new data) and its task. The data is drawn with the
run's seed, so ``split=val`` is the run's validation split. Beside the model's own metrics it
computes the run's ``metrics`` (the config key, :mod:`trainer_run.metrics`), or those
``metrics=[...]`` names instead. :func:`write` keeps the record as ``<run>/eval/<time>.json``
(a name of its own), with the confusion matrix's picture beside when one was asked for
(``<time>_confusion.png``, with matplotlib); nothing else in the run is touched. A run from
someone else whose config names code is refused unless ``trust=true``
(:mod:`trainer_run.runs.trust`). The user's own modules import from the current folder, as for
``trainer-run`` (:func:`trainer_run.targets.locate`). Bad input raises
:class:`~trainer_run.errors.ConfigError`, the user's code that raises
:class:`~trainer_run.errors.UserCodeError`, a refused write
:class:`~trainer_run.errors.StorageError`.
"""

from __future__ import annotations

import copy
import os
import warnings
from datetime import datetime
from pathlib import Path

import numpy
import yaml

from trainer_run import metrics
from trainer_run.backend import get_backend
from trainer_run.compose import argv as args
from trainer_run.compose import options, places
from trainer_run.console import warn
from trainer_run.data import description as data_description
from trainer_run.data import input_scaling
from trainer_run.data.datasets import ArrayDataset, take
from trainer_run.errors import ConfigError, check
from trainer_run.metrics import confusion_files
from trainer_run.runner.build import build_data
from trainer_run.runner.trained import load_model, read_sections, signed_by_me
from trainer_run.storage import files, run_files, strict_json
from trainer_run.training.extensions import Evaluator

SPLITS = ("test", "val", "train", "all")
KEYS = ("checkpoint", "split", "trust", "dataset", "metrics")
EMPTY = {"checkpoint": "checkpoint=best, checkpoint=last, a checkpoint directory or an .npz file "
                        "(left out: best when the run has one)",
         "split": f"split={', '.join(SPLITS)} (left out: test)",
         "trust": "trust=true or trust=false (left out: false)",
         "dataset": "dataset=NAME, one of our dataset options (left out: the run's own data)",
         "metrics": "metrics=[NAME,...] (f1_macro, top_5, confusion_matrix, ...; left out: the "
                    "run's own; metrics=[]: the model's alone)"}
"""What each key takes, said when it is given empty (``split=``)."""


def evaluate(run_dir: Path, overrides: list[str]) -> dict:
    """The record of one evaluation of the run in ``run_dir`` with ``overrides`` (see the
    module docstring): ``run``, ``checkpoint``, ``split``, ``dataset`` (the section used),
    ``examples`` and ``metrics``, and ``confusion_matrix`` when one was asked for. A Python
    warning loading the model gives is said as a ``warning:`` line on stderr
    (:func:`trainer_run.console.warn`); nothing is written."""
    given = _parsed(overrides)
    split = given.get("split", "test")
    check(split in SPLITS, f"split={split} is unknown; choose one of {', '.join(SPLITS)}")
    trusted = given.get("trust", False)
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        trained = load_model(run_dir, given.get("checkpoint"), trust=trusted)
    for warning in told:
        warn(str(warning.message))
    saved = read_sections(run_dir, ("model", "dataset", "seed", "metrics"), trusted)
    section = _dataset_section(saved["dataset"], given)
    if given.get("dataset") is None and not signed_by_me(run_dir):  # a stranger's places
        places.bounded({"dataset": section}, run_dir, f"run {run_dir}", list(given))
    record = data_description.read(run_dir)
    examples = _split(section, saved.get("seed", 0), record["task"], split)
    _check_fits(examples, record, split)
    dataset = input_scaling.Normalized(examples, trained.normalization)
    matrices: dict = {}
    measured = metrics.build(given.get("metrics", saved.get("metrics") or []), record["task"],
                             trained.model, record["out_size"], record.get("classes"),
                             lambda prefix, matrix, classes: matrices.update(
                                 record=confusion_files.record(split, matrix, classes)))
    result = {"run": str(run_dir), "checkpoint": trained.weights.as_json(), "split": split,
              "dataset": section, "examples": len(dataset),
              "metrics": _measure(trained.model, dataset, section["batch_size"], split, measured)}
    return {**result, "confusion_matrix": matrices["record"]} if matrices else result


def write(run_dir: Path, result: dict) -> Path:
    """``result`` written to ``<run>/eval/<time>.json``, the time to the microsecond (``_2``,
    ``_3``, ... after it when that name is taken), and its path: the name is created
    exclusively (never an existing file, nor through a link:
    :func:`trainer_run.storage.files.make_folder`), so evaluations at once each keep their own
    record, then the record replaces it whole. A ``confusion_matrix`` is drawn beside it."""
    folder = Path(run_dir) / run_files.EVAL
    files.make_folder(folder, run_dir)  # never through a link: eval/ is refused if it is one
    path = _new_name(folder, datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f"))
    try:
        files.write_atomic(path, strict_json.dumps(result, indent=2), run=run_dir)
    except BaseException:
        path.unlink(missing_ok=True)  # the name taken for this record, still empty
        raise
    matrix = result.get("confusion_matrix")
    if matrix is not None:
        picture = path.with_name(f"{path.stem}_{run_files.CONFUSION}.png")
        confusion_files.draw(picture, matrix["matrix"], matrix["classes"],
                             f"{result['split']} confusion matrix ({Path(run_dir).name})", run_dir)
    return path


def _parsed(overrides: list[str]) -> dict:
    """``KEY=VALUE`` arguments by key: ``checkpoint``, ``split`` and ``dataset`` as given,
    ``trust`` a boolean (:func:`trainer_run.compose.argv.boolean`), ``dataset.KEY`` values read
    as YAML (empty: null). An empty value of the others is refused, saying what the key takes."""
    given: dict = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not (key in KEYS or key.startswith("dataset.")):
            raise ConfigError(f"{item!r} is not a KEY=VALUE this command takes; give "
                              f"checkpoint=, split=, trust=, dataset= or dataset.<key>=")
        if key in EMPTY and not value.strip():
            raise ConfigError(f"{key}= is empty; give {EMPTY[key]}")
        if key == "trust":
            given[key] = args.boolean(item)
            continue
        try:
            parsed = yaml.safe_load(value) if value else None
        except yaml.YAMLError:
            parsed = value
        given[key] = value if key in ("checkpoint", "dataset", "split") else parsed
    return given


def _dataset_section(saved: dict, given: dict) -> dict:
    """The run's dataset section, or the option ``dataset=NAME``'s, with the
    ``dataset.KEY=VALUE`` overrides on top (a dotted key reaches into a mapping)."""
    section = saved
    name = given.get("dataset")
    if name is not None:
        if name not in options.OPTIONS["dataset"]:
            raise ConfigError(f"dataset={name} is not available; choose one of "
                              f"{', '.join(options.OPTIONS['dataset'])}")
        section = options.option_section("dataset", name)
    section = copy.deepcopy(section)
    for key, value in given.items():
        if key.startswith("dataset."):
            *parents, last = key.split(".")[1:]
            node = section
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
    return section


def _split(section: dict, seed: int, task: str, split: str):
    """The examples of ``split``, unnormalized, drawn as the run drew its data (its seed's
    data stream, so ``val`` is the run's validation split)."""
    raw = {**section, "normalize": "none", "task": task}
    data_seed = numpy.random.SeedSequence(seed).spawn(3)[0]
    data, _ = build_data(raw, numpy.random.default_rng(data_seed), evaluated=split)
    if split == "all":
        return _joined([s for s in (data.train, data.val, data.test) if s is not None and len(s)])
    chosen = getattr(data, split)
    if chosen is None:
        raise ConfigError(f"the data of dataset._target_={section.get('_target_')} has no {split} "
                          f"split; choose split=val, split=all, or a dataset with a test split "
                          f"(e.g. dataset.test_path=...)")
    return chosen


def _joined(splits: list):
    """One dataset of every example of ``splits``, in order."""
    parts = [take(s, numpy.arange(len(s))) for s in splits]
    return ArrayDataset(*(numpy.concatenate(arrays) for arrays in zip(*parts)))


def _check_fits(examples, record: dict, split: str) -> None:
    """Refuses examples of another shape than the run's, or class ids its model lacks."""
    x, *_, y = take(examples, numpy.arange(min(len(examples), 1)))
    shape, expected = tuple(x.shape[1:]), tuple(record["in_shape"])
    if shape != expected:
        raise ConfigError(f"the {split} split's examples have shape {shape}; the run's model takes "
                          f"{expected}: give data shaped as the run's")
    if record["task"] == "classification":
        labels = take(examples, numpy.arange(len(examples)))[-1]
        if len(labels) and int(labels.max()) >= record["out_size"]:
            raise ConfigError(f"the {split} split has class id {int(labels.max())}; the run's "
                              f"model knows {record['out_size']} classes (0..{record['out_size'] - 1})")


def _measure(model, dataset, batch_size: int, split: str, measured) -> dict:
    backend = get_backend("numpy", seed=0)
    return Evaluator(dataset, model, int(batch_size), backend, prefix=f"{split}/",
                     metrics=measured).evaluate()


def _new_name(folder: Path, stamp: str) -> Path:
    """``folder/<stamp>.json`` (or ``<stamp>_<n>.json``, the first free one) created empty with
    O_EXCL and O_NOFOLLOW: no other evaluation gets it, and no link there is followed."""
    n = 1
    while True:
        path = folder / (f"{stamp}.json" if n == 1 else f"{stamp}_{n}.json")
        try:
            os.close(files.open_regular(path, files.NEW, 0o644))
            return path
        except FileExistsError:
            n += 1
        except OSError as e:
            raise files.storage_error(path, e) from None
