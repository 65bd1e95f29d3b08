"""The optimizer base class and registry (optimizers/optimizer.py), as MXNet 1.9.1's ``Optimizer``: the
multipliers' lookup order, ``begin_num_update``, setting the rate, creating by name and registering
one's own."""

from __future__ import annotations

import numpy as np
import pytest

from tests.optimizers.test_optimizers import (
    assert_close,
    hand_for,
    lib_for,
    random_grads,
    random_weights,
    ref_sgd,
)
from trainer_run.errors import ConfigError
from trainer_run.optimizers import REGISTRY, SGD, Adam, IndexApplier, Optimizer, create, get_updater, register
from trainer_run.params import Parameter
from trainer_run.schedulers import CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_multiplier_lookup_order():
    """param_dict[index] first, then lr_mult[index], then lr_mult[name]; same for wd."""
    def one_step(opt, lr_mult, wd_mult):
        w = np.full(4, 2.0, np.float32)
        g = np.full(4, 1.0, np.float32)
        get_updater(opt)(0, g, w)
        expected, _ = ref_sgd(np.full(4, 2.0), np.full(4, 1.0), None, lr=0.1 * lr_mult,
                              wd=0.2 * wd_mult, rescale=1.0, clip=None, momentum=0.0)
        assert_close(w, expected)

    kw = dict(learning_rate=0.1, wd=0.2, param_idx2name={0: "a_bias"})
    # default: a_bias -> wd_mult 0, lr_mult 1
    one_step(SGD(**kw), 1.0, 0.0)
    # name-level multipliers
    opt = SGD(**kw)
    opt.set_lr_mult({"a_bias": 3.0})
    opt.set_wd_mult({"a_bias": 0.5})
    one_step(opt, 3.0, 0.5)
    # index beats name
    opt = SGD(**kw)
    opt.set_lr_mult({"a_bias": 3.0, 0: 4.0})
    opt.set_wd_mult({"a_bias": 0.5, 0: 2.0})
    one_step(opt, 4.0, 2.0)
    # param_dict beats both
    opt = SGD(**kw, param_dict={0: Parameter(np.zeros(4, np.float32), lr_mult=7.0,
                                             wd_mult=0.25)})
    opt.set_lr_mult({"a_bias": 3.0, 0: 4.0})
    opt.set_wd_mult({"a_bias": 0.5, 0: 2.0})
    one_step(opt, 7.0, 0.25)
    # names ending in _weight / _gamma keep wd
    for n in ("x_weight", "bn_gamma"):
        one_step(SGD(learning_rate=0.1, wd=0.2, param_idx2name={0: n}), 1.0, 1.0)


def test_begin_num_update_offsets_counts():
    rng = np.random.default_rng(6)
    weights = random_weights(rng)
    grads = random_grads(rng, steps=4)
    opt = lib_for("adam", begin_num_update=10)
    assert opt.num_update == 10
    updater = get_updater(opt)
    hand = hand_for("adam", weights, begin_num_update=10)
    for g in grads:
        for i in (0, 1):
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    assert opt.num_update == 14
    for i in (0, 1):
        assert_close(weights[i], hand.w[i])


def test_set_learning_rate():
    opt = SGD(learning_rate=0.1)
    opt.set_learning_rate(0.25)
    assert opt.learning_rate == 0.25
    w, g = np.ones(2, np.float32), np.ones(2, np.float32)
    get_updater(opt)(0, g, w)
    assert_close(w, np.full(2, 0.75))
    with pytest.raises(ConfigError):
        opt.set_learning_rate(-1.0)

    scheduled = SGD(learning_rate=0.1, lr_scheduler=CosineScheduler(max_update=5, base_lr=0.1))
    with pytest.raises(UserWarning):
        scheduled.set_learning_rate(0.5)


def test_create_is_case_insensitive():
    assert type(create("SGD")) is SGD
    assert type(create("sGd", momentum=0.5)) is SGD
    assert type(create("ADAM")) is Adam
    assert create("Adam").lr == 0.001          # Adam's own default learning rate
    assert create("sgd").lr == 0.01


def test_create_unknown_name_lists_the_choices():
    with pytest.raises(ConfigError) as info:
        create("nosuch")
    message = str(info.value)
    assert "nosuch" in message and "sgd" in message and "adam" in message


def test_register_custom_optimizer(monkeypatch):
    monkeypatch.setattr("trainer_run.optimizers.optimizer.REGISTRY", dict(REGISTRY))
    from trainer_run.optimizers import optimizer as optimizer_module

    class PlusOne(Optimizer):
        def update(self, index, weight, grad, state):
            self._update_count(index)
            weight += self._get_lr(index) * grad * self.rescale_grad

    assert register(PlusOne) is PlusOne
    assert optimizer_module.REGISTRY["plusone"] is PlusOne
    opt = create("PlusOne", learning_rate=0.5, rescale_grad=2.0)
    assert isinstance(opt, PlusOne)
    w = np.zeros(2, np.float32)
    get_updater(opt)(0, np.ones(2, np.float32), w)
    assert_close(w, np.full(2, 1.0))
    assert isinstance(get_updater(opt), IndexApplier)

    class SGD(Optimizer):      # same lower-case name as the built-in: MXNet warns
        pass

    with pytest.warns(UserWarning):
        register(SGD)
    assert "plusone" not in REGISTRY           # the real registry was not touched
