"""Averages of the parameters (src/trainer_run/averaging.py) against hand computations: the EMA
after a few SGD updates is the recursion ``ema = decay * ema + (1 - decay) * param`` over the
recorded parameters, to the bit, taking in accumulated updates once and skipped ones never;
the equal-weight average is the mean of its snapshots; a device mask, the swap and the state
round trip; the best weights a checkpoint gives when the objective ranks the EMA."""

import numpy as np
import pytest

from tests.updaters.test_updaters import DATA, make, params
from trainer_run import averaging, optimizers
from trainer_run.averaging import Average
from trainer_run.backend import Backend
from trainer_run.data import SerialIterator
from trainer_run.models import MLP
from trainer_run.updaters import StandardUpdater, updater_of


def nan_at(iterations: set):
    """A loss function for :func:`make`'s updater whose loss is NaN at ``iterations`` (the
    updater's, counted by a ``forward_on_start`` callback)."""
    now = {"iteration": -1}

    def at(i):
        now["iteration"] = i

    def loss_func(model):
        def loss(*arrays):
            out = model(*arrays)
            if now["iteration"] in iterations:
                out = {**out, "loss": out["loss"] * np.float32("nan")}
            return out
        return loss

    return at, loss_func


@pytest.mark.parametrize("deferred", [False, True])
def test_ema_is_the_hand_recursion_over_kept_accumulated_updates(deferred):
    """``deferred``: the verdict is the device's, a boolean on the device (a NumPy scalar)."""
    at, loss_func = nan_at({2})
    updater = make(50, accum_grad=2, nan_policy="skip")
    if deferred:
        backend = Backend("numpy", seed=3, deferred=True)
        model = MLP(DATA.in_size, DATA.out_size, backend, hidden_sizes=[32, 32])
        iterator = SerialIterator(DATA.train, 50, rng=np.random.default_rng(7))
        updater = updater_of(StandardUpdater, iterator, optimizers.create("sgd", learning_rate=0.1),
                             model, backend=backend, accum_grad=2, nan_policy="skip")
    updater.loss_func = loss_func(updater.get_model())
    updater.callbacks.add("forward_on_start", at)
    average = Average(updater.stores["main"])
    average.start()
    trajectory, kept = [params(updater)], []
    for _ in range(5):
        updater.update()
        average.exponential(0.9, updater.kept)
        trajectory.append(params(updater))
        assert isinstance(updater.kept, bool) is not deferred
        kept.append(bool(updater.kept))
    assert kept == [True, True, False, True, True]  # iteration 2's loss is NaN: skipped
    hand = dict(trajectory[0])
    for step, was_kept in zip(trajectory[1:], kept):
        if was_kept:
            hand = {k: 0.9 * hand[k] + (1 - 0.9) * step[k] for k in hand}
    got = average.params(np.asarray)
    assert got.keys() == hand.keys()
    for k in hand:
        assert hand[k].dtype == got[k].dtype == np.float32
        np.testing.assert_array_equal(got[k], hand[k], err_msg=k)
    assert not np.array_equal(got["l1/W"], trajectory[-1]["l1/W"])


def test_a_device_mask_keeps_or_refuses_the_step():
    updater = make(50)
    masked, plain = Average(updater.stores["main"]), Average(updater.stores["main"])
    masked.start()
    plain.start()
    updater.update()
    before = masked.params(np.asarray)
    masked.exponential(0.5, np.asarray(False))
    for k, value in masked.params(np.asarray).items():
        np.testing.assert_array_equal(value, before[k])
    masked.exponential(0.5, np.asarray(True))
    plain.exponential(0.5, True)
    for k, value in masked.params(np.asarray).items():
        np.testing.assert_array_equal(value, plain.params(np.asarray)[k])


def test_equal_average_is_the_mean_of_its_snapshots_and_swaps_in_and_out():
    updater = make(50)
    average = Average(updater.stores["main"])
    snapshots = []
    for _ in range(4):
        updater.update()
        updater.update()
        average.equal()
        snapshots.append(params(updater))
    got = average.params(np.asarray)
    assert average.count == 4
    for k in got:
        mean = np.mean([s[k].astype(np.float64) for s in snapshots], axis=0)
        np.testing.assert_allclose(got[k], mean, rtol=1e-6, atol=1e-7, err_msg=k)
    live = params(updater)
    with average.swapped_in():
        for k, value in params(updater).items():
            np.testing.assert_array_equal(value, got[k])
    for k, value in params(updater).items():
        np.testing.assert_array_equal(value, live[k])


def test_state_round_trip_continues_the_same_average():
    first, second = make(50), make(50)
    a, b = Average(first.stores["main"]), Average(second.stores["main"])
    assert a.state_dict(np.asarray) == {"count": 0, "params": None}
    a.start()
    for _ in range(2):
        first.update()
        a.exponential(0.8)
    second.load_state_dict(first.state_dict())
    b.load_state_dict(a.state_dict(np.asarray), np.asarray)
    for _ in range(2):
        first.update()
        second.update()
        a.exponential(0.8)
        b.exponential(0.8)
    for k, value in a.params(np.asarray).items():
        np.testing.assert_array_equal(value, b.params(np.asarray)[k])


def test_the_ema_average_is_chosen_only_when_the_objective_ranked_it():
    average = {"l/W": np.full((2, 2), 0.5, np.float32)}
    assert averaging.chosen_average({"params": average, "count": 3, averaging.CHOSEN: True}) \
        is average
    assert averaging.chosen_average({"params": average, "count": 3, averaging.CHOSEN: False}) \
        is None
    assert averaging.chosen_average({"params": average, "count": 3}) is None
    assert averaging.chosen_average({"params": None, averaging.CHOSEN: True}) is None
    assert averaging.chosen_average(None) is None


def test_the_averages_walk_no_path_inside_a_checkpoint():
    """Where a checkpoint keeps the averages is the checkpoint tree's (runs/checkpoint_tree):
    averaging reads no key of a run checkpoint's layout."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(averaging.__file__).read_text())
    keys = {node.slice.value for node in ast.walk(tree)
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)}
    keys |= {node.args[0].value for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant)}
    assert keys & {"trainer", "updater", "models", "main", "extensions", "config"} == set()


@pytest.mark.parametrize("metric, ranks", [("val/ema/accuracy", True), ("val/accuracy", False),
                                           ("val/swa/loss", False), ("train/loss", False)])
def test_which_objective_ranks_the_ema(metric, ranks):
    assert averaging.ranks_ema(metric) is ranks
