"""HeldOutEvaluator (training/extensions/held_out.py): the test split is measured with the best
weights it is given even when they are of the last iteration (the EMA's, when the objective
ranks the EMA weights, differ from the model's), and the model gets its own weights back."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tests.updaters.test_updaters import DATA, make, params
from trainer_run.training.extensions import Evaluator, HeldOutEvaluator


def test_best_weights_of_the_last_iteration_are_the_ones_tested():
    updater = make(50)
    updater.update()
    live = params(updater)
    best = {**updater.stores["main"].state_dict(np.asarray)}
    best = {k: v * np.float32(0.5) for k, v in best.items()}
    evaluator = Evaluator(DATA.val, updater.get_model(), 100, updater.backend, prefix="test/")
    held_out = HeldOutEvaluator(evaluator, lambda: (updater.iteration, best),
                                updater.stores["main"], updater.backend)
    held_out.finalize(SimpleNamespace(status="completed", updater=updater))
    assert held_out.weights == {"checkpoint": "best", "iteration": 1}
    check = make(50)
    check.stores["main"].load_state_dict(best, np.asarray)
    expected = Evaluator(DATA.val, check.get_model(), 100, check.backend, prefix="test/").evaluate()
    assert held_out.metrics == expected
    for k, value in params(updater).items():
        np.testing.assert_array_equal(value, live[k])


def test_best_weights_that_are_the_emas_say_so_and_last_weights_never_do():
    updater = make(50)
    updater.update()
    evaluator = Evaluator(DATA.val, updater.get_model(), 100, updater.backend, prefix="test/")
    best = updater.stores["main"].state_dict(np.asarray)
    for chosen, weights in (((lambda: (1, best)), {"checkpoint": "best", "iteration": 1,
                                                   "averaged": "ema"}),
                            ((lambda: None), {"checkpoint": "last", "iteration": 1})):
        held_out = HeldOutEvaluator(evaluator, chosen, updater.stores["main"], updater.backend,
                                    averaged="ema")
        held_out.finalize(SimpleNamespace(status="completed", updater=updater))
        assert held_out.weights == weights
