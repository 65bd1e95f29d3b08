"""A run's record of its data read back by ``load_model`` and ``trainer-eval``: a damaged
``data.json`` or ``normalization.npz`` is one line naming the file and what is wrong with it
(issue 36, item 5), never a traceback and never NumPy's advice to load a file unsafely."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
from helpers import run_cli

import trainer_run
from trainer_run.errors import ConfigError


@pytest.fixture(scope="module")
def standardized(tmp_path_factory) -> Path:
    """A finished run of two features whose inputs were standardized."""
    folder = tmp_path_factory.mktemp("records").resolve()
    result = run_cli("dataset.normalize=standardize", "trainer.max_iterations=4",
                     "model.hidden_sizes=[4]", "trainer.progress=false", "hydra.run.dir=run",
                     cwd=folder)
    assert result.returncode == 0, result.stderr
    assert (folder / "run" / "normalization.npz").is_file()
    return folder / "run"


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _edit(copy: Path, **changes) -> None:
    """``data.json`` of ``copy`` with keys set (``...``: removed)."""
    record = json.loads((copy / "data.json").read_text())
    for key, value in changes.items():
        if value is ...:
            del record[key]
        else:
            record[key] = value
    (copy / "data.json").write_text(json.dumps(record))


def _refused(copy: Path) -> str:
    with pytest.raises(ConfigError) as e:
        trainer_run.load_model(copy)
    message = str(e.value)
    assert "\n" not in message and "pickle" not in message.replace("only pickle could", "")
    assert "unsafe" not in message and "allow_pickle" not in message
    return message.replace(str(copy), "<run>")


def test_the_record_as_written_loads(standardized):
    trained = trainer_run.load_model(standardized)
    assert trained.in_shape == (2,) and trained.normalization["kind"] == "standardize"


@pytest.mark.parametrize("text, words", [
    ("{not json", "<run>/data.json is damaged: it is not JSON (Expecting property name"),
    ("", "<run>/data.json is damaged: it is not JSON (Expecting value"),
    (b"\xff\xfe\x00", "<run>/data.json is damaged: it is not JSON ("),
    ("[1, 2]", "<run>/data.json is damaged: it holds a JSON list, not an object of keys"),
    ("null", "<run>/data.json is damaged: it holds a JSON NoneType, not an object of keys"),
])
def test_a_data_json_that_is_not_a_json_object_is_named(standardized, tmp_path, text, words):
    copy = _copy(standardized, tmp_path)
    path = copy / "data.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    assert _refused(copy).startswith(words)


@pytest.mark.parametrize("changes, words", [
    ({"in_shape": [-3]}, "in_shape must be a list of positive integers, got [-3]"),
    ({"in_shape": [0]}, "in_shape must be a list of positive integers, got [0]"),
    ({"in_shape": [2.5]}, "in_shape must be a list of positive integers, got [2.5]"),
    ({"in_shape": [True]}, "in_shape must be a list of positive integers, got [True]"),
    ({"in_shape": "2"}, "in_shape must be a list of positive integers, got '2'"),
    ({"in_shape": ...}, "it has no 'in_shape'"),
    ({"task": ...}, "it has no 'task'"),
    ({"out_size": ...}, "it has no 'out_size'"),
    ({"task": "ranking"}, "task must be one of classification, regression, got 'ranking'"),
    ({"out_size": "2"}, "out_size must be a positive integer, got '2'"),
    ({"out_size": 0}, "out_size must be a positive integer, got 0"),
    ({"classes": {"a": 1}}, "classes must be null or a list of names, got {'a': 1}"),
    ({"normalize": "zscore"}, "normalize must be one of none, unit, standardize, got 'zscore'"),
    ({"normalize": "unit", "scale": None}, "normalize is unit and scale must be a positive number, "
                                           "got None"),
    ({"normalize": "unit", "scale": -255}, "normalize is unit and scale must be a positive number, "
                                           "got -255"),
])
def test_a_data_json_with_a_missing_or_wrong_value_is_named(standardized, tmp_path, changes, words):
    copy = _copy(standardized, tmp_path)
    _edit(copy, **changes)
    assert _refused(copy) == f"<run>/data.json is damaged: {words}"


def _pickled(path: Path) -> None:
    numpy.savez(path, mean=numpy.array([object(), object()], dtype=object),
                std=numpy.ones(2, numpy.float32))


@pytest.mark.parametrize("write, words", [
    (_pickled, "<run>/normalization.npz cannot be read as an archive of arrays (member 'mean.npy' "
               "holds Python objects, which only pickle could load); it is written by the run, copy "
               "the run directory again"),
    (lambda p: p.write_bytes(b"garbage"), "<run>/normalization.npz cannot be read as an archive of "
                                          "arrays (not a zip archive of .npy arrays); it is written "
                                          "by the run, copy the run directory again"),
    (lambda p: p.write_bytes(b""), "<run>/normalization.npz cannot be read as an archive of arrays "
                                   "(not a zip archive of .npy arrays); it is written by the run, "
                                   "copy the run directory again"),
    (lambda p: numpy.savez(p, std=numpy.ones(2, numpy.float32)),
     "<run>/normalization.npz has no 'mean' array (it has std); it is written by the run, copy the "
     "run directory again"),
    (lambda p: numpy.savez(p, mean=numpy.ones(2, numpy.float32)),
     "<run>/normalization.npz has no 'std' array (it has mean); it is written by the run, copy the "
     "run directory again"),
    (lambda p: numpy.savez(p, mean=numpy.ones(3, numpy.float32), std=numpy.ones(3, numpy.float32)),
     "<run>/normalization.npz: 'mean' must hold floats of the inputs' shape (2,), and it holds "
     "float32 of shape (3,)"),
    (lambda p: numpy.savez(p, mean=numpy.array(["a", "b"]), std=numpy.ones(2, numpy.float32)),
     "<run>/normalization.npz: 'mean' must hold floats of the inputs' shape (2,), and it holds <U1 "
     "of shape (2,)"),
    (lambda p: numpy.savez(p, mean=numpy.zeros(2), std=numpy.array([1.0, numpy.nan])),
     "<run>/normalization.npz: 'std' holds NaN or infinity; it is written by the run, copy the run "
     "directory again"),
    (lambda p: numpy.savez(p, mean=numpy.zeros(2), std=numpy.array([1.0, 0.0])),
     "<run>/normalization.npz: 'std' holds a value that is not positive; inputs divided by it would "
     "be infinite"),
    (lambda p: p.unlink(), "<run>/data.json says the inputs were standardized and "
                           "<run>/normalization.npz is missing; it holds their mean and std: copy "
                           "it with the run"),
])
def test_a_damaged_normalization_npz_is_named_and_never_unpickled(standardized, tmp_path, write,
                                                                   words):
    copy = _copy(standardized, tmp_path)
    write(copy / "normalization.npz")
    assert _refused(copy) == words


def test_values_that_apply_to_every_example_alike_are_read(standardized, tmp_path):
    copy = _copy(standardized, tmp_path)
    numpy.savez(copy / "normalization.npz", mean=numpy.float32(0.5), std=numpy.ones(1, numpy.float32))
    trained = trainer_run.load_model(copy)
    assert trained.normalization["mean"] == 0.5


@pytest.mark.parametrize("damage, words", [
    (lambda c: (c / "data.json").write_text("{"), "data.json is damaged: it is not JSON"),
    (lambda c: _edit(c, in_shape=[-3]), "data.json is damaged: in_shape must be a list of positive "
                                        "integers, got [-3]"),
    (lambda c: _pickled(c / "normalization.npz"), "normalization.npz cannot be read as an archive "
                                                  "of arrays (member 'mean.npy' holds Python "
                                                  "objects"),
])
def test_trainer_eval_says_it_in_one_line(standardized, tmp_path, damage, words):
    copy = _copy(standardized, tmp_path)
    damage(copy)
    result = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", str(copy), "split=val"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {copy}/") and words in lines[0], lines
    assert "allow_pickle" not in result.stderr and "unsafe" not in result.stderr
