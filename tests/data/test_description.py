"""trainer_run.data.description in-process: ``data.json`` (and ``normalization.npz``) written from a
Data, compared with the files as written by hand and read back equal; a damaged, oversized or
linked record refused with one line naming it (a link, a special file or an oversized one
refused as every run's file is, not as "damaged"). The command's refusals of every damaged
value, through ``trainer-eval``, are tests/command/test_bad_records.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy
import pytest

from trainer_run.data import description as record
from trainer_run.data.datasets import Data
from trainer_run.errors import ConfigError
from trainer_run.storage import reading


def data(normalization: dict, **fields) -> Data:
    values = {"train": None, "val": None, "in_shape": (3, 4, 4), "out_size": 10,
              "task": "classification", "note": "task: classification (10 classes)"} | fields
    return Data(normalization=normalization, **values)


def written(folder: Path) -> dict:
    return json.loads((folder / "data.json").read_text())


def test_a_standardized_record_is_read_back_as_written(tmp_path):
    mean = numpy.array([0.5, 0.25, -1.0], numpy.float32).reshape(3, 1, 1)
    std = numpy.array([[[2.0]], [[0.125]], [[1e-3]]], numpy.float32)
    classes = ["cat", "dog", "é", "3", "a b", "", "[x]", "7", "8", "9"]
    raw = {"dtype": "uint8", "min": 0, "max": 255}
    files = {"train.csv": "3f2a"}
    record.write(data({"kind": "standardize", "mean": mean, "std": std}, classes=classes,
                      raw_inputs=raw, files=files), tmp_path)
    assert written(tmp_path) == {"task": "classification", "in_shape": [3, 4, 4], "out_size": 10,
                                 "classes": classes, "normalize": "standardize", "scale": None,
                                 "description": "task: classification (10 classes)",
                                 "inputs": raw, "files": files}
    with numpy.load(tmp_path / "normalization.npz", allow_pickle=False) as saved:
        assert sorted(saved.files) == ["mean", "std"]
        assert saved["mean"].tobytes() == mean.tobytes() and saved["std"].dtype == numpy.float32
    back = record.read(tmp_path)
    assert {k: v for k, v in back.items() if k not in ("mean", "std")} == written(tmp_path)
    for key, value in (("mean", mean), ("std", std)):
        assert back[key].dtype == value.dtype and back[key].shape == value.shape
        assert back[key].tobytes() == value.tobytes()
    normalization = record.normalization(back)
    assert normalization["kind"] == "standardize" and normalization["mean"] is back["mean"]
    assert normalization["std"] is back["std"]


def test_a_unit_record_keeps_its_scale_and_writes_no_arrays(tmp_path):
    record.write(data({"kind": "unit", "scale": numpy.float32(255)}, in_shape=(2,), out_size=3,
                      task="regression", note=""), tmp_path)
    assert written(tmp_path) == {"task": "regression", "in_shape": [2], "out_size": 3,
                                 "classes": None, "normalize": "unit", "scale": 255.0,
                                 "description": ""}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json"]
    back = record.read(tmp_path)
    assert back == written(tmp_path)
    normalization = record.normalization(back)
    assert normalization == {"kind": "unit", "scale": 255.0}
    assert type(normalization["scale"]) is numpy.float32


def test_a_record_without_normalization(tmp_path):
    record.write(data({}), tmp_path)
    assert written(tmp_path)["normalize"] == "none" and written(tmp_path)["scale"] is None
    assert "inputs" not in written(tmp_path) and "files" not in written(tmp_path)
    back = record.read(tmp_path)
    assert back == written(tmp_path) and record.normalization(back) == {}


def test_writing_again_replaces_the_record(tmp_path):
    record.write(data({}, out_size=4), tmp_path)
    record.write(data({}, out_size=5), tmp_path)
    assert record.read(tmp_path)["out_size"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json"]


def test_mean_and_std_apply_alike_to_every_example_or_are_refused(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps(
        {"task": "regression", "in_shape": [3, 2], "out_size": 1, "normalize": "standardize"}))
    numpy.savez(tmp_path / "normalization.npz", mean=numpy.zeros((3, 1)), std=numpy.ones(2))
    back = record.read(tmp_path)
    assert back["mean"].shape == (3, 1) and back["std"].shape == (2,)
    numpy.savez(tmp_path / "normalization.npz", mean=numpy.zeros((3, 2)), std=numpy.ones((2, 3, 2)))
    with pytest.raises(ConfigError) as refused:
        record.read(tmp_path)
    assert str(refused.value) == (f"{tmp_path}/normalization.npz: 'std' must hold floats of the "
                                  "inputs' shape (3, 2), and it holds float64 of shape (2, 3, 2)")


def refused(folder: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        record.read(folder)
    return str(raised.value)


GOOD = {"task": "classification", "in_shape": [2], "out_size": 2}


@pytest.mark.parametrize("text, words", [
    ('{"task": "classification", ', "is damaged: it is not JSON (Expecting property name enclosed "
                                    "in double quotes: line 1 column 28 (char 27)); it is written by "
                                    "the run, copy the run directory again"),
    ("[" * 100_000, "is damaged: it is not JSON (nested too deeply); it is written by the run, "
                    "copy the run directory again"),
    ("3", "is damaged: it holds a JSON int, not an object of keys"),
    (json.dumps({"task": "classification", "in_shape": [2]}), "is damaged: it has no 'out_size'"),
    (json.dumps(GOOD | {"in_shape": [2, 0]}),
     "is damaged: in_shape must be a list of positive integers, got [2, 0]"),
    (json.dumps(GOOD | {"out_size": True}), "is damaged: out_size must be a positive integer, got True"),
    (json.dumps(GOOD | {"classes": [["a"]]}),
     "is damaged: classes must be null or a list of names, got [['a']]"),
    (json.dumps(GOOD | {"normalize": "unit", "scale": True}),
     "is damaged: normalize is unit and scale must be a positive number, got True"),
    (json.dumps(GOOD | {"normalize": "unit"}).replace("}", ', "scale": Infinity}'),
     "is damaged: normalize is unit and scale must be a positive number, got inf"),
    (json.dumps(GOOD | {"normalize": "standardize"}),
     "says the inputs were standardized and {folder}/normalization.npz is missing; it holds their "
     "mean and std: copy it with the run"),
])
def test_a_damaged_data_json_is_refused_naming_it(tmp_path, text, words):
    (tmp_path / "data.json").write_text(text)
    assert refused(tmp_path) == f"{tmp_path}/data.json " + words.format(folder=tmp_path)


def test_data_json_that_is_not_utf8_is_refused_as_not_json(tmp_path):
    (tmp_path / "data.json").write_bytes(b'{"task": "\xff"}')
    message = refused(tmp_path)
    assert message.startswith(f"{tmp_path}/data.json is damaged: it is not JSON ('utf-8' codec")
    assert message.endswith("; it is written by the run, copy the run directory again")


def test_an_oversized_data_json_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "data.json"
    with open(path, "wb") as f:
        f.truncate(reading.RECORD_BYTES + 1)  # sparse: nothing of it needs reading to refuse it
    assert refused(tmp_path) == (
        f"{path} holds {reading.RECORD_BYTES + 1} bytes, more than the 64 MiB a file of its kind in "
        "a run may hold; it is not a file trainer-run wrote: check that the run folder is the one "
        "meant")


def test_a_data_json_at_the_size_limit_is_read(tmp_path):
    text = json.dumps(GOOD)
    (tmp_path / "data.json").write_text(text + " " * (reading.RECORD_BYTES - len(text)))
    assert record.read(tmp_path) == GOOD


def test_a_linked_data_json_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(GOOD))
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(elsewhere, run / "data.json")
    assert refused(run) == (
        f"{run}/data.json is a symbolic link in run folder {run}; trainer-run reads and writes a "
        "run's files only inside the run folder, never through a link: remove the link (or copy "
        "the run without links) and try again")


def test_a_linked_normalization_npz_is_refused_naming_the_link(tmp_path):
    record.write(data({"kind": "standardize", "mean": numpy.zeros(1), "std": numpy.ones(1)},
                      in_shape=(1,)), tmp_path)
    npz = tmp_path / "normalization.npz"
    npz.rename(tmp_path / "real.npz")
    os.symlink(tmp_path / "real.npz", npz)
    assert refused(tmp_path) == (
        f"{npz} is a symbolic link; trainer-run reads and writes a run's files only inside the run "
        "folder, never through a link: remove the link (or copy the run without links) and try again")


def test_a_data_json_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "data.json").mkdir()
    assert refused(tmp_path) == (
        f"{tmp_path}/data.json is not a regular file (a folder, FIFO or device); trainer-run reads "
        "and writes a run's files only as regular files: remove it and try again")
