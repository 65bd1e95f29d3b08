"""The main model's parameters in a run's checkpoint, found by the updaters' rule
(:mod:`trainer_run.runs.checkpoint_tree`), never by a path walk in the checkpoint module."""

from __future__ import annotations

import numpy as np
import pytest

import trainer_run
from tests.training.test_trainer import _trainer
from trainer_run import averaging
from trainer_run.backend import get_backend
from trainer_run.models import MLP
from trainer_run.runs.checkpoint_tree import chosen_params, main_params
from trainer_run.storage import checkpoint


def test_a_saved_run_state_gives_back_the_model_s_arrays(tmp_path):
    """A round trip through checkpoint.save: the arrays main_params finds are the trained
    model's, equal and of the same dtype, and load into a fresh model of the same shape."""
    trainer = _trainer(tmp_path / "run", max_iterations=10)
    trainer.run()
    model = trainer.updater.get_model()
    path = checkpoint.save({"config": {}, "choices": {}, "trainer": trainer.state_dict()},
                           tmp_path / "checkpoints", 10)
    arrays = main_params(checkpoint.load(path, checkpoint.RUN_STATE), path)
    assert sorted(arrays) == sorted(model.params())
    for name, p in model.params().items():
        np.testing.assert_array_equal(arrays[name], p.data, strict=True)
    fresh = MLP(2, 2, get_backend("numpy", seed=9), hidden_sizes=[16])
    assert not np.array_equal(fresh.l1.W.data, model.l1.W.data)
    trainer_run.load_weights(fresh, path)
    for name, p in fresh.params().items():
        np.testing.assert_array_equal(p.data, model.params()[name].data)


def test_the_snapshot_s_checkpoint_holds_the_parameters_of_its_iteration(tmp_path):
    trainer = _trainer(tmp_path, max_iterations=20)
    trainer.run()
    arrays = main_params(checkpoint.load(checkpoint.find(tmp_path)))
    for name, p in trainer.updater.get_model().params().items():
        np.testing.assert_array_equal(arrays[name], p.data)


@pytest.mark.parametrize("state", [
    {},
    {"trainer": {"updater": {"iteration": 3}}},
    {"trainer": {"updater": {"models": {"other": {"W": np.ones(2)}}}}},
    {"trainer": {"updater": {"models": {"main": {"W": "not an array"}}}}},
])
def test_a_state_without_the_model_s_parameters_is_refused_in_one_line(state):
    with pytest.raises(checkpoint.CheckpointError) as caught:
        main_params(state, "runs/x/checkpoints/iter_00000003")
    assert str(caught.value) == ("checkpoint runs/x/checkpoints/iter_00000003 holds no model "
                                 "parameters (no trainer/updater/models/main)")


def test_a_checkpoint_gives_the_ema_weights_as_best_only_when_the_objective_ranked_them():
    main = {"l/W": np.ones((2, 2), np.float32), "bn/avg_mean": np.zeros(2, np.float32)}
    ema = {"params": {"l/W": np.full((2, 2), 0.5, np.float64)}, "count": 3}
    state = {"trainer": {"updater": {"models": {"main": main}},
                         "extensions": {averaging.EMA: {**ema, averaging.CHOSEN: True}}}}
    chosen = chosen_params(state)
    assert chosen.keys() == main.keys()
    np.testing.assert_array_equal(chosen["l/W"], np.full((2, 2), 0.5))
    assert chosen["l/W"].dtype == np.float32  # in the model's dtype
    np.testing.assert_array_equal(chosen["bn/avg_mean"], main["bn/avg_mean"])
    state["trainer"]["extensions"][averaging.EMA][averaging.CHOSEN] = False
    assert chosen_params(state) is None
    assert chosen_params({"trainer": {"extensions": {}}}) is None
