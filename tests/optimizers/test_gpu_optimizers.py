"""Every registered optimizer on CuPy follows the NumPy trajectory: 100 steps of a fixed
sequence of gradients through the flat-group applier (``get_updater`` attached to a
``ParamStore``, as the updaters step), weights and optimizer states compared after steps 1,
2, 10 and 100. The gradients hold an entry that is exactly 0 at every step (a dead ReLU unit:
the case that made adamax's weights NaN on CuPy) and a parameter whose gradient is 0 every
other step. Optimizers are read from the registry, so a new one is covered without a line
here."""

from __future__ import annotations

import inspect

import numpy
import pytest
from gpu_helpers import assert_close, assert_within_float16_ulp, backend

from trainer_run.errors import ConfigError
from trainer_run.optimizers import REGISTRY, create, get_updater
from trainer_run.params import Parameter, ParamStore

NAMES = sorted(REGISTRY)
SHAPES = [(7, 5), (33,), (1,)]
LR_MULTS = [1.0, 1.0, 0.5]        # two groups: the last parameter steps apart
STEPS = 100
CHECKED = (1, 2, 10, STEPS)
TUNED = {"wd": 1e-3, "clip_gradient": 0.5, "rescale_grad": 0.7, "momentum": 0.9}
# Each of the 100 steps may round its last bit differently on the GPU (CUDA fuses a * b + c
# into one multiply-add, reductions add in another order): a running sum of 100 steps drifts
# by up to about 100 float32 ulps (6e-6 relative); atol covers states near 0 (Adam's var).
RTOL, ATOL = 3e-5, 1e-6


def gradients(dtype) -> list[list[numpy.ndarray]]:
    """The fixed sequence: one list of gradients (one per parameter of SHAPES) per step."""
    rng = numpy.random.default_rng(1)
    steps = []
    for step in range(STEPS):
        grads = [(rng.standard_normal(s) * 0.5).astype(dtype) for s in SHAPES]
        grads[0][0, 0] = 0                # always exactly 0
        if step % 2 == 0:
            grads[2][...] = 0             # 0 at every other step
        steps.append(grads)
    return steps


def options(name: str, tuned: bool) -> dict:
    """The optimizer's defaults, or with weight decay, clipping, rescaling and momentum (where
    its constructor takes it) on; an option the optimizer refuses (GroupAdaGrad's wd) is left
    out."""
    if not tuned:
        return {}
    takes = inspect.signature(REGISTRY[name].__init__).parameters
    kwargs = {k: v for k, v in TUNED.items() if k != "momentum" or "momentum" in takes}
    for key in list(kwargs):
        try:
            create(name, **kwargs)
        except ConfigError as e:
            if not str(e).startswith(key):
                raise
            del kwargs[key]
    return kwargs


def trajectory(device: str, name: str, kwargs: dict, dtype=numpy.float32,
               multi_precision: bool = False) -> dict:
    """``{step: (weights, optimizer states)}`` on the host, after each step of CHECKED."""
    b = backend(device)
    rng = numpy.random.default_rng(0)
    params = {f"p{i}": Parameter(b.asarray(rng.standard_normal(s).astype(dtype)), lr_mult=m)
              for i, (s, m) in enumerate(zip(SHAPES, LR_MULTS))}
    store = ParamStore(params, b.xp)
    optimizer = create(name, multi_precision=multi_precision, **kwargs)
    optimizer.set_rng(numpy.random.default_rng(5))      # SGLD's noise, drawn on the host
    applier = get_updater(optimizer)
    applier.attach(store)
    seen = {}
    for step, grads in enumerate(gradients(dtype), start=1):
        for p, g in zip(store, grads):
            p.grad[...] = b.asarray(g)
        applier.step()
        if step in CHECKED:
            seen[step] = ({k: b.to_numpy(p.data).copy() for k, p in params.items()},
                          applier.state_dict(b.to_numpy))
    return seen


def compare(device: str, name: str, tuned: bool) -> None:
    kwargs = options(name, tuned)
    got, expected = trajectory(device, name, kwargs), trajectory("numpy", name, kwargs)
    for step in CHECKED:
        assert numpy.isfinite(numpy.concatenate([w.ravel() for w in got[step][0].values()])).all(), \
            f"{name}: a weight is not finite after step {step}"
        assert_close(got[step][0], expected[step][0], RTOL, ATOL, f"{name} step {step} weights")
        assert_close(got[step][1], expected[step][1], RTOL, ATOL, f"{name} step {step} states")


def compare_float16(device: str, name: str) -> None:
    """float16 weights with float32 masters (multi_precision): the masters follow NumPy's as
    float32 values do, and each float16 weight is its master rounded, so within one float16
    ulp of NumPy's."""
    got = trajectory(device, name, {}, numpy.float16, multi_precision=True)
    expected = trajectory("numpy", name, {}, numpy.float16, multi_precision=True)
    for step in CHECKED:
        for k, w in expected[step][0].items():
            assert_within_float16_ulp(got[step][0][k], w, f"{name} step {step} {k}")
        assert_close(got[step][1], expected[step][1], RTOL, ATOL, f"{name} step {step} states")
        masters = [a for leaves in got[step][1].values() for a in leaves if a.dtype == numpy.float32]
        assert len(masters) >= len(SHAPES), f"{name}: no float32 master copies"


@pytest.mark.gpu
@pytest.mark.parametrize("tuned", [False, True], ids=["defaults", "tuned"])
@pytest.mark.parametrize("name", NAMES)
def test_the_trajectory_on_cupy_is_numpys(name, tuned):
    compare("cupy", name, tuned)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_float16_weights_with_float32_masters_on_cupy_follow_numpy(name):
    compare_float16("cupy", name)


def test_the_gradients_hold_an_entry_that_is_always_zero():
    """The case the comparisons must include (adamax's NaN on CuPy): checked here, on CPU."""
    steps = gradients(numpy.float32)
    assert all(g[0][0, 0] == 0 for g in steps) and all(not g[2].any() for g in steps[::2])
    assert all(g[0].any() and g[1].any() for g in steps)
    assert options("groupadagrad", True).get("wd") is None and options("sgd", True)["momentum"] == 0.9
