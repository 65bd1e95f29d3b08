"""The model protocol (trainer_run.module): training and evaluation modes reach every sub-module and
evaluating restores them; the summary counts parameters by layer."""

import numpy as np

from trainer_run.models import MLP, Linear, Module, evaluating, set_mode, summary


class _Backend:
    rng = np.random.default_rng(0)

    @staticmethod
    def asarray(a, dtype=None):
        return np.asarray(a, dtype=dtype)


def test_train_and_eval_reach_every_sub_module_and_evaluating_restores():
    outer = Module()
    outer.a = Linear(2, 2, _Backend())
    outer.inner = Module()
    outer.inner.deep = Module()
    assert outer.eval() is outer
    assert (outer.training, outer.a.training, outer.inner.deep.training) == (False, False, False)
    outer.train()
    with evaluating(outer):
        assert not outer.inner.deep.training
    assert outer.inner.deep.training
    plain = type("Plain", (), {"training": True})()
    set_mode(plain, False)
    assert plain.training is False
    set_mode(object(), False)  # neither a Module nor a training attribute: left as it is


def test_the_summary_counts_parameters_by_layer():
    model = MLP(3, 2, _Backend(), hidden_sizes=[5])
    assert summary(model) == {"class": "MLP", "parameters": 3 * 5 + 5 + 5 * 2 + 2,
                              "bytes": (3 * 5 + 5 + 5 * 2 + 2) * 4, "layers": {"l1": 20, "l2": 12}}


def test_the_summary_lists_frozen_parameters_and_multipliers_with_a_note_per_layer():
    model = MLP(3, 2, _Backend(), hidden_sizes=[5, 4])
    params = model.params()
    params["l1/W"].requires_grad = params["l1/b"].requires_grad = False
    params["l2/b"].requires_grad = False
    params["l2/W"].lr_mult = 10.0
    params["l3/W"].lr_mult = params["l3/b"].lr_mult = 2.0
    params["l3/b"].wd_mult = 0.0
    got = summary(model)
    assert got["frozen"] == ["l1/W", "l1/b", "l2/b"]
    assert got["trained"] == 5 * 4 + 4 * 2 + 2  # l2/W, l3/W, l3/b
    assert got["lr_mult"] == {"l2/W": 10.0, "l3/W": 2.0, "l3/b": 2.0}
    assert got["wd_mult"] == {"l3/b": 0.0}
    assert got["training"] == {"l1": "frozen", "l2": "W lr_mult=10, b frozen",
                               "l3": "W lr_mult=2, b lr_mult=2 wd_mult=0"}
    assert got["layers"] == {"l1": 20, "l2": 24, "l3": 10}
