"""The user's data from the command line: npz, npy (memory-mapped), CSV with and without a
header; the data line, the saved record, the test split; every mismatch as one line, exit 2,
before any training."""

import csv
import json

import numpy as np
import pytest
from helpers import load_npz, run_cli

SHORT = ("trainer.max_iterations=12", "trainer.eval_interval=6", "trainer.log_interval=6",
         "model.hidden_sizes=[16]", "dataset.batch_size=20", "hydra.run.dir=run")


def _problem(n=200, seed=0, features=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)
    return x, y


def _logits(params, x):
    h = np.maximum(x @ params["l1/W"].T + params["l1/b"], 0)
    return h @ params["l2/W"].T + params["l2/b"]


def _reference(params, x, y):
    """Softmax cross entropy and accuracy of the saved MLP, computed here in float64."""
    z = _logits({k: v.astype(np.float64) for k, v in params.items()}, x.astype(np.float64))
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -log_p[np.arange(len(y)), y].mean(), (z.argmax(axis=1) == y).mean()


def _lines(result):
    """What the run said of its data: the note (stdout, after the run directory's line and the
    backend's), then stderr's lines (a hint, or the error)."""
    out = [line for line in result.stdout.splitlines()
           if line.strip() and not line.startswith("backend: ")]
    note = out[1:2] if out and out[0].startswith("run directory: ") else []
    return note + [line for line in result.stderr.splitlines() if line.strip()]


def test_npz_with_a_validation_and_a_test_file_trains_and_tests_the_final_parameters(tmp_path):
    x, y = _problem()
    np.savez(tmp_path / "train.npz", inputs=x[:120], labels=y[:120])
    np.savez(tmp_path / "val.npz", inputs=x[120:160], labels=y[120:160])
    np.savez(tmp_path / "test.npz", inputs=x[160:], labels=y[160:])
    result = run_cli("dataset=npz", "dataset.path=train.npz", "dataset.x_key=inputs",
                     "dataset.y_key=labels", "dataset.val_path=val.npz", "dataset.test_path=test.npz",
                     *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _lines(result)[0] == ("train.npz: 120 training, 40 validation, 40 test examples of shape "
                                 "(5,); classification into 3 classes (auto: the labels are "
                                 "integers; set dataset.task to change)")
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    params = load_npz(tmp_path / "run/model.npz")
    for split, (xs, ys) in {"test": (x[160:], y[160:]), "val": (x[120:160], y[120:160])}.items():
        loss, accuracy = _reference(params, xs, ys)
        assert summary[f"{split}/loss"] == pytest.approx(loss, rel=1e-5)
        assert summary[f"{split}/accuracy"] == pytest.approx(accuracy)
    assert "test/accuracy" in result.stdout  # below the metrics table
    record = json.loads((tmp_path / "run/data.json").read_text())
    assert (record["task"], record["in_shape"], record["out_size"]) == ("classification", [5], 3)


def test_npy_is_memory_mapped_split_stratified_and_standardized_from_the_training_part(tmp_path):
    x, y = _problem(n=100)
    x = x * 3 + 7
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    result = run_cli("dataset=npy", "dataset.x_path=x.npy", "dataset.y_path=y.npy",
                     "dataset.val_fraction=0.25", "dataset.normalize=standardize", *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _lines(result)[0].startswith("x.npy and y.npy: 75 training, 25 validation examples")
    with np.load(tmp_path / "run/normalization.npz") as values:
        mean, std = values["mean"], values["std"]
    # the 25 held-out rows are the ones whose values the training mean leaves out
    counts = np.bincount(y, minlength=3)
    assert counts.sum() == 100
    full = x.astype(np.float64)
    assert not np.allclose(mean, full.mean(axis=0), rtol=1e-6)  # fitted on a part only
    assert np.all(np.abs(mean - full.mean(axis=0)) < 3 * full.std(axis=0))
    assert np.all(std > 0)


def test_csv_with_a_header_and_string_labels_saves_the_class_names(tmp_path):
    x, y = _problem(n=90)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    with open(tmp_path / "iris.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["a", "b", "species", "c", "d", "note", "e"])
        for row, label in zip(x, names):
            writer.writerow([row[0], row[1], label, row[2], row[3], "free text", row[4]])
    result = run_cli("dataset=csv", "dataset.path=iris.csv", "dataset.target=species", *SHORT,
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "run/data.json").read_text())
    assert record["classes"] == ["setosa", "versicolor", "virginica"]
    assert record["in_shape"] == [5]  # the text column is no feature
    assert "the labels are names" in _lines(result)[0]
    assert load_npz(tmp_path / "run/model.npz")["l2/W"].shape == (3, 16)


def test_csv_without_a_header_takes_the_target_by_index_and_listed_features(tmp_path):
    x, y = _problem(n=60)
    rows = np.column_stack([y, x])
    np.savetxt(tmp_path / "plain.csv", rows, delimiter=";", fmt=["%d"] + ["%.6f"] * 5)
    result = run_cli("dataset=csv", "dataset.path=plain.csv", "dataset.target=0", "dataset.delimiter=';'",
                     "dataset.features=[1,2,-1]", *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "examples of shape (3,); classification into 3 classes" in _lines(result)[0]
    assert load_npz(tmp_path / "run/model.npz")["l1/W"].shape == (16, 3)


def test_float_labels_train_a_regression_with_a_hint_on_the_second_line(tmp_path):
    x, y = _problem(n=60)
    np.savez(tmp_path / "d.npz", x=x, y=y.astype(np.float64))
    result = run_cli("dataset=npz", "dataset.path=d.npz", *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first, second = _lines(result)[:2]
    assert "regression with 1 target(s) (auto: the labels are floats" in first
    assert second == ("hint: the labels are whole numbers stored as floats; if they are classes, "
                      "set dataset.task=classification")
    forced = run_cli("dataset=npz", "dataset.path=d.npz", "dataset.task=classification",
                     *SHORT[:-1], "hydra.run.dir=run2", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "classification into 3 classes (dataset.task=classification)" in _lines(forced)[0]


def test_images_keep_their_shape_are_unit_scaled_and_flattened_by_the_mlp(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(60, 8, 8), dtype=np.uint8)
    labels = (images[:, :4].mean(axis=(1, 2)) > images[:, 4:].mean(axis=(1, 2))).astype(np.int64)
    np.savez(tmp_path / "img.npz", x=images[:40], y=labels[:40])
    np.savez(tmp_path / "val.npz", x=images[40:], y=labels[40:])
    result = run_cli("dataset=npz", "dataset.path=img.npz", "dataset.val_path=val.npz",
                     "dataset.normalize=unit", *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "examples of shape (1, 8, 8)" in _lines(result)[0]
    params = load_npz(tmp_path / "run/model.npz")
    assert params["l1/W"].shape == (16, 64)
    record = json.loads((tmp_path / "run/data.json").read_text())
    assert (record["in_shape"], record["normalize"], record["scale"]) == ([1, 8, 8], "unit", 255.0)
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    loss, accuracy = _reference(params, images[40:].reshape(20, -1) / 255.0, labels[40:])
    assert summary["val/loss"] == pytest.approx(loss, rel=1e-5)
    assert summary["val/accuracy"] == pytest.approx(accuracy)


def _files(tmp_path):
    x, y = _problem(n=40)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    np.savez(tmp_path / "short.npz", x=x, y=y[:-1])
    bad = x.copy()
    bad[7, 1] = np.nan
    np.savez(tmp_path / "nan.npz", x=bad, y=y)
    np.savez(tmp_path / "neg.npz", x=x, y=y - 1)
    np.savez(tmp_path / "frac.npz", x=x, y=y + 0.5)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "cut.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:-50])
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}] * 40, dtype=object), allow_pickle=True)
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n7,8,y\n")
    (tmp_path / "ragged.csv").write_text("a,b,label\n1,2,x\n3,4\n")
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 not really a zip")
    np.savez(tmp_path / "val7.npz", x=x[:6], y=np.array([0, 7, 1, 7, 7, 2]))
    huge = y.copy()
    huge[5] = 3_000_000_000
    np.savez(tmp_path / "huge.npz", x=x, y=huge)
    (tmp_path / "huge.csv").write_text("a,b,label\n1,2,0\n3,4,1\n5,6,1000000000\n7,8,1\n")


@pytest.mark.parametrize("args, words", [
    (("dataset=npz",), "dataset.path is not set"),
    (("dataset=d.npz",), "(to train on the file d.npz: dataset=npz dataset.path=d.npz)"),
    (("dataset=npz", "dataset.path=missing.npz"), "dataset.path=missing.npz: no such file (relative to"),
    (("dataset=npz", "dataset.path=d.npz", "dataset.x_key=inputs"),
     "dataset.x_key='inputs': d.npz has no array 'inputs' (it has x, y)"),
    (("dataset=npz", "dataset.path=broken.npz"), "dataset.path=broken.npz cannot be read as an .npz"),
    (("dataset=npz", "dataset.path=x.npy"), "is a single array, not an .npz archive; choose dataset=npy"),
    (("dataset=npz", "dataset.path=short.npz"), "short.npz: the inputs have 40 examples and the labels 39"),
    (("dataset=npz", "dataset.path=nan.npz"),
     "nan.npz: the inputs hold NaN or infinity (first at example 7)"),
    (("dataset=npz", "dataset.path=neg.npz"), "neg.npz: label [-1]"),
    (("dataset=npz", "dataset.path=d.npz", "dataset.val_path=val7.npz"),
     "val7.npz: class [7] is not among the training labels (3 examples there have it)"),
    (("dataset=npz", "dataset.path=huge.npz"),
     "huge.npz: label [3000000000] (example [5]) is beyond the 1,000,000 classes a run takes"),
    (("dataset=csv", "dataset.path=huge.csv"),
     "huge.csv: label [1000000000] (example [2]) is beyond the 1,000,000 classes a run takes"),
    (("dataset=npz", "dataset.path=frac.npz", "dataset.task=classification"),
     "frac.npz: dataset.task=classification needs whole-number class ids"),
    (("dataset=npz", "dataset.path=d.npz", "dataset.task=guess"), "dataset.task='guess' is unknown"),
    (("dataset=npz", "dataset.path=d.npz", "dataset.normalize=unit"),
     "d.npz: dataset.normalize=unit maps unsigned integers"),
    (("dataset=npy", "dataset.x_path=cut.npy", "dataset.y_path=x.npy"),
     "dataset.x_path: cut.npy is truncated"),
    (("dataset=npy", "dataset.x_path=x.npy", "dataset.y_path=obj.npy"),
     "dataset.y_path=obj.npy cannot be read as a .npy array"),
    (("dataset=csv", "dataset.path=t.csv", "dataset.target=species"),
     "dataset.target='species': t.csv has no column 'species' (its columns are a, b, label)"),
    (("dataset=csv", "dataset.path=t.csv", "dataset.target=5"), "dataset.target=5: t.csv has 3 columns"),
    (("dataset=csv", "dataset.path=ragged.csv"), "dataset.path=ragged.csv: row 3 has 2 cells"),
    (("dataset=csv", "dataset.path=t.csv", "dataset.task=regression"),
     "t.csv: dataset.task=regression needs numeric targets"),
    (("dataset=csv", "dataset.path=t.csv", "dataset.features=[a,label]"),
     "the target column"),
])
def test_every_mismatch_is_one_line_naming_the_file_exit_2_and_no_run_directory(tmp_path, args, words):
    _files(tmp_path)
    result = run_cli(*args, *SHORT, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = _lines(result)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_run_on_a_csv_resumed_from_a_checkpoint_is_bit_identical(tmp_path):
    x, y = _problem(n=80)
    with open(tmp_path / "t.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["a", "b", "c", "d", "e", "label"])
        writer.writerows([*row, ["no", "yes", "maybe"][label]] for row, label in zip(x, y))
    common = ("dataset=csv", "dataset.path=t.csv", "dataset.normalize=standardize",
              "dataset.test_path=t.csv", "trainer.checkpoint_interval=6", "trainer.progress=false",
              *SHORT[:-1])
    whole = run_cli(*common, "hydra.run.dir=whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    half = run_cli(*common, "trainer.max_iterations=6", "hydra.run.dir=half", cwd=tmp_path)
    assert half.returncode == 0, half.stderr
    resumed = run_cli("resume=half", "trainer.max_iterations=12", "trainer.progress=false",
                      cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    for name in ("model.npz", "data.json", "normalization.npz"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "half" / name).read_bytes()
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("whole", "half")]
    assert summaries[0]["test/loss"] == summaries[1]["test/loss"]
