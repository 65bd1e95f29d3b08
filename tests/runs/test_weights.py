"""One way to load saved weights into a model (trainer_run.load_weights, weights.load): a run
directory (best, or last), a checkpoint directory or an .npz, each equal to the arrays the run
saved there; a folder of another tool's holding a model.npz is not a run (runs.directory.is_run,
the one test of a run of ours)."""

from __future__ import annotations

import shutil

import numpy
import pytest
from helpers import load_npz

import trainer_run
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.models import MLP
from trainer_run.runs import weights
from trainer_run.runs.checkpoint_tree import main_params
from trainer_run.storage import checkpoint


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("load") / "run"
    trainer_run.train(["trainer.max_iterations=30", "trainer.eval_interval=10", "optimizer=sgd",
                       "optimizer.learning_rate=0.5"], run_dir=folder)
    return folder


def _fresh():
    return MLP(2, 2, get_backend("numpy", seed=7), hidden_sizes=[64, 64])


def _values(model) -> dict:
    return {k: p.data.copy() for k, p in model.params().items()}


def test_each_source_loads_the_arrays_saved_there(run):
    best = (run / "checkpoints" / "best").read_text().strip()
    best_dir = run / "checkpoints" / best
    expected = {
        (run, None): main_params(checkpoint.load(best_dir), best_dir),
        (run, "last"): load_npz(run / "model.npz"),
        (run, "best"): main_params(checkpoint.load(best_dir), best_dir),
        (run / "model.npz", None): load_npz(run / "model.npz"),
        (run / "checkpoints" / "iter_00000020", None):
            main_params(checkpoint.load(run / "checkpoints" / "iter_00000020"), run),
    }
    for (source, which), arrays in expected.items():
        model = _fresh()
        trainer_run.load_weights(model, source, which)
        got = _values(model)
        assert got.keys() == arrays.keys()
        assert all(numpy.array_equal(got[k], arrays[k]) for k in got), (source, which)


def test_another_tools_folder_with_a_model_npz_is_not_a_run(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(run / "model.npz", other / "model.npz")
    shutil.copy(run / "summary.json", other / "summary.json")
    with pytest.raises(ConfigError, match="holds no run of trainer-run's"):
        trainer_run.load_weights(_fresh(), other)
    model = _fresh()
    trainer_run.load_weights(model, other / "model.npz")  # the file itself is weights
    assert numpy.array_equal(_values(model)["l1/W"], load_npz(run / "model.npz")["l1/W"])


def test_weights_resolve_refuses_what_holds_no_weights(tmp_path):
    with pytest.raises(ConfigError, match="no such run, checkpoint or .npz file"):
        weights.resolve(tmp_path / "missing")
    with pytest.raises(ConfigError, match="holds no run"):
        weights.resolve(tmp_path)
    with pytest.raises(ConfigError, match="^no weights named"):  # init_from= left empty
        weights.resolve("")
