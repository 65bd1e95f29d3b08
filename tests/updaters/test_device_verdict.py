"""The training loop keeps its verdicts and metrics on the device: no read between log rows
(counted, and enforced on the loss itself), and the same parameters, counts and stops as the
loop that reads at once (``Backend(deferred=True)`` runs the device's way on NumPy; from the
command line: tests/command/test_deferred_reads.py)."""


import numpy as np
import pytest
from helpers import make_synthetic

from trainer_run import host_reads, optimizers
from trainer_run.backend import Backend
from trainer_run.data import SerialIterator
from trainer_run.errors import Diverged
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.models import MLP
from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training.extension import Extension
from trainer_run.training.extensions import Evaluator, LogReport, Objective, Snapshot, Summary
from trainer_run.updaters import StandardUpdater, updater_of


def _updater(deferred, optimizer="adam", seed=0, dtype="float32", **options):
    backend = Backend("numpy", seed=seed, dtype=dtype, deferred=deferred)
    data = make_synthetic("spirals", 400, 0.25, np.random.default_rng(0))
    model = MLP(data.in_size, data.out_size, backend, hidden_sizes=[16], dtype=dtype)
    iterator = SerialIterator(data.train, 30, rng=np.random.default_rng(seed + 1))
    opt = optimizers.create(optimizer, learning_rate=0.01,
                            multi_precision=dtype == "float16")
    return updater_of(StandardUpdater, iterator, opt, model, backend=backend, **options), data


def _poisoned(updater, at):
    """Makes the loss (and so every gradient) NaN at the updates whose index is in ``at``."""
    original = updater.forward

    def forward(arrays, model=None):
        out = original(arrays, model)
        if updater.iteration in at:
            out["loss"] = out["loss"] * float("nan")
        return out

    updater.forward = forward


class _Reads(Extension):
    """Records the reads made so far, after every other extension of the iteration."""

    priority = -1000

    def __init__(self):
        self.counts = []

    def __call__(self, trainer):
        self.counts.append(host_reads.count())


class _Untouchable(np.ndarray):
    """A loss that refuses every read except :mod:`trainer_run.host_reads`'."""

    def __float__(self):
        raise AssertionError("the loss was read outside host_reads")

    __bool__ = __int__ = __index__ = __float__

    def item(self, *args):
        raise AssertionError("the loss was read outside host_reads")


@pytest.mark.parametrize("options, per_update", [
    (dict(), 0),
    (dict(clip_global_norm=0.1), 0),
    (dict(loss_scaler=LossScaler(32.0)), 0),
    (dict(nan_policy="skip"), 1),
    (dict(dtype="float16", loss_scaler=DynamicLossScaler()), 1),
], ids=["default", "clip", "static-scale", "skip", "dynamic"])
def test_no_read_between_log_rows(tmp_path, monkeypatch, options, per_update):
    """Nothing is read between log rows; under nan_policy=skip and dynamic loss scaling, one
    verdict per update, a copy that was queued an update earlier (host_reads.Later)."""
    updater, data = _updater(True, **options)
    original = updater.forward

    def forward(arrays, model=None):
        out = original(arrays, model)
        out["loss"].data = out["loss"].data.view(_Untouchable)
        return out

    updater.forward = forward
    real_array = host_reads.array
    monkeypatch.setattr(host_reads, "array",
                        lambda value: real_array(np.asarray(value).view(np.ndarray)))
    stop = StopTrigger(max_iterations=60)
    trainer = Trainer(updater, stop, out=str(tmp_path))
    rows = AnyOf(IntervalTrigger(10), stop)
    log = LogReport(rows, updater.get_optimizer("main"))
    model = updater.get_model()
    trainer.extend(Evaluator(data.val, model, 50, updater.backend), trigger=AnyOf(IntervalTrigger(20), stop))
    trainer.extend(Objective("train/loss", "min", IntervalTrigger(30)))
    trainer.extend(log)
    trainer.extend(Snapshot(), trigger=IntervalTrigger(30))
    trainer.extend(Summary(log, 30, updater.stores["main"]))
    reads = _Reads()
    trainer.extend(reads)
    trainer.run()
    assert len(reads.counts) == 60
    for i in range(1, 60):
        made = reads.counts[i] - reads.counts[i - 1]
        if (i + 1) % 10:  # the update after a row has no verdict waiting: the row read it
            expected = per_update if i % 10 else 0
            assert made == expected, f"iteration {i + 1} read the device {made} times"
        else:
            assert made >= 1  # the log row reads its sums at once
    assert len(log.log) == 6 and np.isfinite(log.log[-1]["train/loss"])


def _trajectory(deferred, steps, poison=(), scaler=None, **options):
    """The parameters after ``steps`` updates, and the updater; ``scaler``: a loss scaler's
    arguments (a static one with ``scale`` alone)."""
    if scaler is not None:
        kind = LossScaler if len(scaler) == 1 else DynamicLossScaler
        options["loss_scaler"] = kind(**scaler)
    updater, _ = _updater(deferred, **options)
    _poisoned(updater, set(poison))
    for _ in range(steps):
        updater.update()
    updater.settle()
    params = {n: p.data.copy() for n, p in updater.get_model().params().items()}
    return params, updater


@pytest.mark.parametrize("case", [
    dict(),
    dict(optimizer="sgd"),
    dict(scaler=dict(scale=64.0)),
    dict(nan_policy="skip", poison=(3, 4, 9)),
    dict(dtype="float16", scaler=dict(scale=2.0 ** 40, interval=5)),
    dict(dtype="float16", scaler=dict(scale=8.0, interval=3), poison=(6,)),
    dict(dtype="float16", scaler=dict(scale=8.0, interval=2, growth="nnabla"), poison=(9,)),
    dict(accum_grad=2, nan_policy="skip", poison=(2,)),
], ids=["adam", "sgd", "static-scale", "skip", "dynamic-overflows", "dynamic-nan", "dynamic-nnabla",
        "accum-skip"])
def test_the_device_verdict_gives_the_same_run_bit_for_bit(case):
    case = dict(case)
    poison = case.pop("poison", ())
    expected, immediate = _trajectory(False, 20, poison, **case)
    got, deferred = _trajectory(True, 20, poison, **case)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert deferred.readings() == immediate.readings()
    assert deferred.get_optimizer("main").state_dict() == immediate.get_optimizer("main").state_dict()
    if poison or len(case.get("scaler", {})) > 1:
        assert deferred.readings()["skipped_steps"] > 0  # the case did skip


def test_clipping_by_global_norm_on_the_device_matches_to_rounding():
    """The factor multiplies the gradients in place (MXNet's clip_global_norm) instead of being
    folded into the step's factor: one rounding more, no other difference."""
    for max_norm in (0.05, 1e6):  # every update clipped; none (the factor is 1)
        expected, _ = _trajectory(False, 20, clip_global_norm=max_norm)
        got, _ = _trajectory(True, 20, clip_global_norm=max_norm)
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)
    expected, _ = _trajectory(False, 20, clip_global_norm=0.05)
    far, _ = _trajectory(True, 20)
    assert any(not np.allclose(far[n], expected[n], rtol=1e-3) for n in expected)  # it clipped


def test_a_nan_stops_the_run_at_the_next_read_naming_its_update(tmp_path):
    """The update at index 6 (iteration 7) is not finite; the log row of iteration 10 reads it.
    The three updates after it were masked, so the parameters are those of 6 updates."""
    before, _ = _trajectory(False, 6)
    updater, _ = _updater(True)
    _poisoned(updater, {6})
    stop = StopTrigger(max_iterations=40)
    trainer = Trainer(updater, stop, out=str(tmp_path))
    trainer.extend(LogReport(AnyOf(IntervalTrigger(10), stop)))
    with pytest.raises(Diverged, match="training loss is nan at iteration 7; the update was not applied"):
        trainer.run()
    assert trainer.status == "diverged" and updater.iteration == 10
    for name, p in updater.get_model().params().items():
        np.testing.assert_array_equal(p.data, before[name], err_msg=name)


def test_a_nan_in_the_last_updates_still_stops_the_run(tmp_path):
    updater, _ = _updater(True)
    _poisoned(updater, {13})
    trainer = Trainer(updater, StopTrigger(max_iterations=14), out=str(tmp_path))
    trainer.extend(LogReport(IntervalTrigger(10)))
    with pytest.raises(Diverged, match="at iteration 14"):
        trainer.run()


def test_a_resumed_deferred_run_continues_bit_for_bit():
    case = dict(dtype="float16", poison=(4, 17), scaler=dict(scale=2.0 ** 20, interval=4))
    straight, _ = _trajectory(True, 24, **case)
    _, half = _trajectory(True, 12, **case)
    state = half.state_dict()
    resumed, _ = _updater(True, dtype="float16", loss_scaler=DynamicLossScaler(scale=1.0, interval=4))
    resumed.load_state_dict(state)
    _poisoned(resumed, {17})
    for _ in range(12):
        resumed.update()
    for name, p in resumed.get_model().params().items():
        np.testing.assert_array_equal(p.data, straight[name], err_msg=name)


def test_without_a_read_the_verdicts_are_read_every_pending_limit(monkeypatch):
    """Under nan_policy=stop the verdicts wait for a read, at most PENDING updates."""
    from trainer_run.updaters import device_verdict

    monkeypatch.setattr(device_verdict, "PENDING", 4)
    updater, _ = _updater(True)
    counts = []
    for _ in range(12):
        counts.append(host_reads.count())
        updater.update()
    made = [b - a for a, b in zip(counts, counts[1:])]
    assert made == [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]  # the 5th and 9th updates read 4 each
