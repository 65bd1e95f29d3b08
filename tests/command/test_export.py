"""``trainer-export`` on a run trained for a few iterations, as a user runs it: the ONNX file
it writes gives in onnxruntime what ``load_model(run).predict`` gives on the same raw uint8
images; the default npz is the run's best weights bit for bit with its normalization; a run of
someone else naming code needs ``trust=true``; bad input is one line, and so is a damaged
``summary.json`` whose iteration would name the default file."""

from __future__ import annotations

import json
import os
import reprlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import onnxruntime
import pytest
from helpers import load_npz
from run_folders import copy_run, environment, make_run, snapshot

import trainer_run
from trainer_run.cli import export as command
from trainer_run.errors import ConfigError

USER_MODEL = '''
from trainer_run import functions as F
from trainer_run.layers import BatchNorm, Conv2D, Dropout, Linear
from trainer_run.models import Model


class Small(Model):
    def __init__(self, in_shape, out_size, backend):
        self.conv = Conv2D(in_shape[0], 3, 3, backend, pad=1)
        self.bn = BatchNorm(3, backend)
        self.drop = Dropout(0.3, backend)
        self.fc = Linear(3 * 2 * 2, out_size, backend)

    def forward(self, x):
        return self.fc(self.drop(F.max_pooling_2d(F.relu(self.bn(self.conv(x))), 2)))
'''
TRAIN = ("dataset=npz", "dataset.path=train.npz", "dataset.normalize=unit",
         "+model._target_=exported_models.Small", "trainer.max_iterations=10",
         "trainer.eval_interval=5", "trainer.progress=false", "hydra.run.dir=run")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A run of alice's own model on 4x4 uint8 images, and her environment."""
    folder = tmp_path_factory.mktemp("export").resolve()
    (folder / "exported_models.py").write_text(USER_MODEL)
    rng = numpy.random.default_rng(3)
    x = rng.integers(0, 256, size=(120, 1, 4, 4), dtype=numpy.uint8)
    numpy.savez(folder / "train.npz", x=x, y=(x[:, 0, :2].mean(axis=(1, 2)) > 127).astype(numpy.int64))
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "alice"), "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *TRAIN], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    yield folder, env
    sys.modules.pop("exported_models", None)  # imported here by load_model: no other test's


def test_the_onnx_file_gives_predicts_outputs_in_onnxruntime(folder, monkeypatch):
    folder, env = folder
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.export", "run", "format=onnx",
                           "out=small.onnx"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("written: small.onnx (best weights, iteration ")
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    monkeypatch.syspath_prepend(str(folder))
    loaded = trainer_run.load_model(folder / "run")
    x = numpy.random.default_rng(9).integers(0, 256, size=(7, 1, 4, 4), dtype=numpy.uint8)
    session = onnxruntime.InferenceSession(str(folder / "small.onnx"),
                                           providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x.astype(numpy.float32)})
    expected = loaded.predict(x)
    numpy.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * max(1, abs(expected).max()))


def test_another_users_export_needs_trust_and_the_default_npz_is_the_best_weights(folder, monkeypatch):
    folder, env = folder
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / "bob"))
    monkeypatch.syspath_prepend(str(folder))
    run = folder / "run"
    with pytest.raises(ConfigError, match=r"exported_models\.Small.*trust=true"):
        command.export(run, [])
    assert not (run / "export").exists()
    path, weights = command.export(run, ["trust=true"])
    assert path == run / "export" / f"model_best_iter{weights['iteration']}.npz"
    exported, best = load_npz(path), load_npz(run / "model_best.npz")
    assert set(exported) == {*best, "normalization/kind", "normalization/scale"}
    assert all(exported[k].dtype == best[k].dtype and numpy.array_equal(exported[k], best[k])
               for k in best)
    assert str(exported["normalization/kind"]) == "unit" and exported["normalization/scale"] == 255


@pytest.mark.parametrize(("args", "message"), [
    (["format="], r"^format= is empty; give format=npz or format=onnx"),
    (["format=pt"], r"^format=pt is unknown; choose one of npz, onnx$"),
    (["split=test"], r"^'split=test' is not a KEY=VALUE this command takes"),
    (["trust=yes"], r"^trust must be true or false")])
def test_bad_input_is_one_line(folder, args, message):
    folder, _ = folder
    with pytest.raises(ConfigError, match=message):
        command.export(folder / "run", args)


# -- the default file name from a damaged summary.json --------------------------------------------
DAMAGED = ["x/../../model", "/../..", -1, 1.5, True, "y" * 10_000]


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A 6-iteration run of the default model and the key of the user who trained it."""
    root = tmp_path_factory.mktemp("damaged").resolve()
    return make_run(root, root / "keys"), root / "keys"


def _damaged(plain_run, tmp_path, change) -> Path:
    run = copy_run(plain_run[0], tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    change(summary)
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def _export(keys, cwd, *arguments) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "trainer-export"), *arguments],
                          cwd=cwd, env=environment(keys), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value", DAMAGED, ids=["up-and-over", "root", "negative", "fraction",
                                                "bool", "10kB"])
@pytest.mark.parametrize("form", ["npz", "onnx"])
def test_a_damaged_iteration_in_the_summary_is_one_line_and_nothing_is_written(plain_run, tmp_path,
                                                                               value, form):
    run = _damaged(plain_run, tmp_path, lambda s: s.__setitem__("iteration", value))
    before = snapshot(run)
    done = _export(plain_run[1], tmp_path, "run", "checkpoint=last", f"format={form}")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines() == [
        f"error: run/summary.json is damaged: it records {reprlib.repr(value)} as the iteration "
        "of the run's last weights, not a whole number of iterations; restore the file from a "
        "copy of the run, or name the file to write with out=FILE"]
    assert snapshot(run) == before
    assert (run / "model.npz").read_bytes() == (plain_run[0] / "model.npz").read_bytes()


def test_a_damaged_best_iteration_is_refused_too_and_out_still_exports(plain_run, tmp_path):
    """The best weights from ``model_best.npz`` (its checkpoint gone) take their iteration
    from the summary's objective; ``out=`` names the file without it."""
    run = _damaged(plain_run, tmp_path,
                   lambda s: s["objective"].__setitem__("best_iteration", "../../model"))
    shutil.rmtree(run / "checkpoints")
    before = snapshot(run)
    done = _export(plain_run[1], tmp_path, "run")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "error: run/summary.json is damaged: it records '../../model' as the iteration of the "
        "run's best weights, not a whole number of iterations; restore the file from a copy of "
        "the run, or name the file to write with out=FILE"], done.stderr
    assert snapshot(run) == before
    done = _export(plain_run[1], tmp_path, "run", "out=best.npz")
    assert done.returncode == 0, done.stderr
    assert snapshot(run) == before and set(load_npz(tmp_path / "best.npz")) >= set(
        load_npz(run / "model_best.npz"))


def test_a_sound_iteration_names_the_default_file(plain_run, tmp_path):
    run = copy_run(plain_run[0], tmp_path / "run")
    done = _export(plain_run[1], tmp_path, "run", "checkpoint=last")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "written: run/export/model_last_iter6.npz (last weights, iteration 6)\n"
    last = load_npz(run / "model.npz")
    exported = load_npz(run / "export" / "model_last_iter6.npz")
    assert all(numpy.array_equal(exported[k], last[k]) for k in last)


def test_a_file_where_the_export_folder_goes_is_one_line_exit_2(plain_run, tmp_path):
    run = copy_run(plain_run[0], tmp_path / "run")
    (run / "export").write_text("mine")
    before = snapshot(run)
    done = _export(plain_run[1], tmp_path, "run")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: cannot make the folder run/export: run/export is a file, not a folder; move or "
        "remove it and try again"]
    assert snapshot(run) == before


TEXT = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.\n" * 20
TEXT_RUNS = {"gpt": ("model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=16"),
             "lstm_lm": ("model=lstm_lm", "model.n_embd=8", "model.hidden_size=8",
                         "model.num_layers=2")}


@pytest.mark.parametrize("model", sorted(TEXT_RUNS))
def test_a_language_models_onnx_file_gives_its_logits_for_any_batch_and_length(tmp_path, model):
    """A char-level run of data.json without a record of raw inputs: the export traces token
    ids below the tokenizer's vocabulary, and onnxruntime takes int64 ids (N, T)."""
    (tmp_path / "input.txt").write_text(TEXT)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", "experiment=char_gpt",
                           "dataset.path=input.txt", "dataset.block_size=16", "dataset.batch_size=4",
                           *TEXT_RUNS[model], "trainer.max_iterations=3", "trainer.eval_interval=3",
                           "trainer.progress=false", "hydra.run.dir=run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.export", "run", "format=onnx",
                           "out=text.onnx"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = trainer_run.load_model(tmp_path / "run")
    session = onnxruntime.InferenceSession(str(tmp_path / "text.onnx"),
                                           providers=["CPUExecutionProvider"])
    assert [i.shape for i in session.get_inputs()] == [["N", "T"]]
    ids = loaded.encode(TEXT[:16 * 5]).reshape(5, 16).astype(numpy.int64)
    (got,) = session.run(None, {"x": ids})
    numpy.testing.assert_allclose(got, loaded.predict(ids), rtol=1e-4, atol=1e-5)
    (shorter,) = session.run(None, {"x": ids[:2, :7]})  # causal: the first 7 positions' logits
    numpy.testing.assert_allclose(shorter, got[:2, :7], rtol=1e-4, atol=1e-5)
