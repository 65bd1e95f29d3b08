"""Three steps of an SGD-family optimizer on small float32 arrays beside a hand recomputation
of its seed's rule in float64 (tests/optimizers/test_sgd.py, test_nag.py): the shared data,
the trajectory of both, and the checks every such optimizer passes the same way."""

from __future__ import annotations

import numpy as np

from trainer_run.optimizers import create, get_updater

RTOL, ATOL = 1e-5, 1e-6
W0 = np.array([0.5, -1.0, 2.0, 0.1, -0.3, 0.0], np.float32)
GRADS = [np.array([3.0, -0.2, 0.6, -4.0, 0.05, 1.0], np.float32),
         np.array([-0.7, 2.5, -0.1, 0.3, -1.9, 0.0], np.float32),
         np.array([0.0, -0.9, 1.3, 0.8, 0.25, -2.2], np.float32)]
KW = dict(learning_rate=0.1, wd=0.01, rescale_grad=0.5, clip_gradient=0.4)


def trajectory(name: str, hand, momentum, lrs=(None, None, None), **kw):
    """The library's weight and state, and the hand's (``hand(w, g, mom, momentum=, **kw)``
    in float64, returning ``(weight, mom)``), after each step of ``GRADS``; the learning rate
    set to ``lrs[k]`` before step ``k`` where not None."""
    kw = dict(KW, **kw)
    opt = create(name, momentum=momentum, **kw)
    updater = get_updater(opt)
    weight = W0.copy()
    w, mom = W0.astype(np.float64), np.zeros(W0.shape)
    for lr, g in zip(lrs, GRADS):
        if lr is not None:
            opt.set_learning_rate(lr)
            kw["learning_rate"] = lr
        updater(0, g.copy(), weight)
        w, mom = hand(w, g.astype(np.float64), mom, momentum=momentum, **kw)
        yield weight, updater.states[0], w, mom


def assert_matches(steps, momentum) -> None:
    """Every step of a :func:`trajectory` equals the hand's within float32 rounding; without
    momentum the optimizer keeps no state."""
    for weight, state, w, mom in steps:
        assert weight.dtype == np.float32
        np.testing.assert_allclose(weight, w, rtol=RTOL, atol=ATOL)
        if momentum == 0:
            assert state is None
        else:
            np.testing.assert_allclose(state, mom, rtol=RTOL, atol=ATOL)


def assert_scale_divided_out(make, scale: float) -> None:
    """Gradients carrying a loss ``scale`` (passed to the step) move the weight as the plain
    gradients do; ``make()`` builds the optimizer."""
    plain, scaled = get_updater(make()), get_updater(make())
    w_plain, w_scaled = W0.copy(), W0.copy()
    for g in GRADS:
        plain(0, g.copy(), w_plain)
        scaled(0, g * np.float32(scale), w_scaled, scale=scale)
        np.testing.assert_allclose(w_scaled, w_plain, rtol=RTOL, atol=ATOL)


def multi_precision_steps(optimizer, hand, momentum) -> tuple:
    """``optimizer`` (made with ``multi_precision=True``) stepping a float16 copy of ``W0``
    with float16 gradients: its state, the float16 weight, and the hand's weight and momentum
    from the same float16 values."""
    updater = get_updater(optimizer)
    weight = W0.astype(np.float16)
    w, mom = weight.astype(np.float64), np.zeros(W0.shape)
    for g in GRADS:
        g16 = g.astype(np.float16)
        updater(0, g16, weight)
        w, mom = hand(w, g16.astype(np.float64), mom, momentum=momentum, **KW)
    return updater.states[0], weight, w, mom
