"""Weight averaging in the loop (training/extensions/weight_average.py): the EMA extension's
val/ema/ metrics are the evaluator's on the hand-computed EMA weights and leave training as it
was; SWA averages at its points, recomputes batch normalization on the averaged weights and
measures them, all against hand computations; a run resumed from a checkpoint writes the same
model_ema.npz and model_swa.npz, to the bit, as the run that went on, and its best weights are
the EMA's when the objective ranks them."""

from __future__ import annotations

import numpy as np
from helpers import load_npz

import trainer_run
from tests.test_bn_update import Net
from tests.updaters.test_updaters import DATA, make, params
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator
from trainer_run.module import load_arrays
from trainer_run.runner.averages import SwaPoints
from trainer_run.runs import weights
from trainer_run.runs.checkpoint_tree import main_params
from trainer_run.storage import checkpoint
from trainer_run.training import PRIORITY_READER, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training.extensions import Evaluator
from trainer_run.training.extensions.weight_average import ExponentialAverage, StochasticAverage
from trainer_run.updaters import Batches, StandardUpdater


class Recorder:
    """A reader: the parameters and the observation after each iteration."""

    priority = PRIORITY_READER

    def __init__(self):
        self.params, self.observations = [], []

    def __call__(self, trainer):
        self.params.append(params(trainer.updater))
        self.observations.append(dict(trainer.observation))


def test_ema_metrics_are_the_evaluators_on_the_hand_ema_and_training_is_unchanged(tmp_path):
    updater = make(50)
    start = params(updater)
    evaluator = Evaluator(DATA.val, updater.get_model(), 100, updater.backend, prefix="val/ema/")
    ema = ExponentialAverage(updater.stores["main"], 0.75, evaluator, IntervalTrigger(3),
                             updater.backend, out=tmp_path)
    recorder = Recorder()
    trainer = Trainer(updater, StopTrigger(6), out=str(tmp_path))
    trainer.extend(ema)
    trainer.extend(recorder)
    trainer.run()
    hand = dict(start)
    check = make(50)  # a second model to measure the hand EMA with
    measure = Evaluator(DATA.val, check.get_model(), 100, check.backend, prefix="val/")
    for i, step in enumerate(recorder.params, 1):
        hand = {k: 0.75 * hand[k] + 0.25 * step[k] for k in hand}
        if i % 3 == 0:
            check.stores["main"].load_state_dict(hand, np.asarray)
            expected = measure.evaluate()
            assert {k for k in recorder.observations[i - 1] if k.startswith("val/")} == {
                "val/ema/loss", "val/ema/accuracy"}
            for name in ("loss", "accuracy"):
                assert recorder.observations[i - 1][f"val/ema/{name}"] == expected[f"val/{name}"]
    saved = load_npz(tmp_path / "model_ema.npz")
    for k in hand:
        np.testing.assert_array_equal(saved[k], hand[k], err_msg=k)
    plain = make(50)
    for _ in range(6):
        plain.update()
    for k, value in params(plain).items():
        np.testing.assert_array_equal(params(updater)[k], value, err_msg=k)


def test_swa_averages_at_its_points_and_recomputes_batch_norm_on_the_average(tmp_path):
    backend = get_backend("numpy", seed=4)
    model = Net(backend, in_size=2)
    iterator = SerialIterator(DATA.train, 100, rng=np.random.default_rng(7))
    updater = StandardUpdater(iterator, optimizers.create("sgd", learning_rate=0.1), model,
                              batches=Batches(backend))
    points = SwaPoints(IntervalTrigger(2), start_iteration=3)
    evaluator = Evaluator(DATA.val, model, 100, backend, prefix="val/swa/")
    swa = StochasticAverage(updater.stores["main"], points, model, DATA.train, 300, backend,
                            tmp_path, [evaluator])
    recorder = Recorder()
    trainer = Trainer(updater, StopTrigger(9), out=str(tmp_path))
    trainer.extend(swa)
    trainer.extend(recorder)
    trainer.run()
    live = {k: p.data.copy() for k, p in {**model.params(), **model.persistents()}.items()}
    snapshots = [recorder.params[i - 1] for i in (4, 6, 8)]
    saved = load_npz(tmp_path / "model_swa.npz")
    for k in snapshots[0]:
        mean = np.mean([s[k].astype(np.float64) for s in snapshots], axis=0)
        np.testing.assert_allclose(saved[k], mean, rtol=1e-6, atol=1e-7, err_msg=k)
    x = DATA.train.take(np.arange(len(DATA.train)))[0].astype(np.float64)
    h = x @ saved["l1/W"].T.astype(np.float64) + saved["l1/b"]
    batches = [h[s:s + 300] for s in range(0, len(h), 300)]  # 800 examples: 300, 300, 200
    np.testing.assert_allclose(saved["bn/avg_mean"], np.mean([b.mean(0) for b in batches], 0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(saved["bn/avg_var"],
                               np.mean([b.var(0, ddof=1) for b in batches], 0), rtol=1e-5)
    assert swa.summary()["swa"] == {"averaged": 3, "bn_batches": 3}
    for k, value in {**model.params(), **model.persistents()}.items():  # the model is its own again
        np.testing.assert_array_equal(value.data, live[k])
    load_arrays(model, saved)
    measured = Evaluator(DATA.val, model, 100, backend, prefix="val/swa/").evaluate()
    assert swa.metrics == measured


def test_a_resumed_run_writes_the_same_averages_to_the_bit(tmp_path):
    common = ["trainer.eval_interval=10", "trainer.checkpoint_interval=10", "optimizer=sgd",
              "optimizer.learning_rate=0.1", "dataset.size=400", "trainer.ema_decay=0.8",
              "trainer.swa.start=12", "trainer.swa.interval=4", "objective.metric=val/ema/loss",
              "trainer.progress=false", "trainer.max_iterations=30"]
    whole = trainer_run.train(common, run_dir=tmp_path / "whole")
    middle = whole.dir / "checkpoints" / "iter_00000020"
    again = trainer_run.train([*common, f"resume={middle}"], run_dir=tmp_path / "again")
    assert whole.summary["iteration"] == again.summary["iteration"] == 30
    assert whole.summary["swa"] == again.summary["swa"] == {"averaged": 5, "bn_batches": 0}
    for name in ("model.npz", "model_ema.npz", "model_swa.npz", "model_best.npz"):
        assert (whole.dir / name).read_bytes() == (again.dir / name).read_bytes(), name
    for key in ("val/ema/loss", "val/swa/loss", "objective"):
        assert whole.summary[key] == again.summary[key]
    best = weights.resolve(again.dir, "best")  # the best checkpoint: its EMA weights
    assert best.path.is_dir() and best.iteration == whole.summary["objective"]["best_iteration"]
    ema_best = load_npz(again.dir / "model_best.npz")
    live = main_params(checkpoint.load(best.path))
    for k, value in best.arrays().items():
        np.testing.assert_array_equal(value, ema_best[k], err_msg=k)
    assert not all(np.array_equal(v, ema_best.get(k)) for k, v in live.items())
