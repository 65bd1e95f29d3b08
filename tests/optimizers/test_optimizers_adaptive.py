"""AdaGrad, RMSProp, AdaDelta, Ftrl, Adamax, Nadam and FTML against MXNet 1.9.1, by hand.

The references below restate MXNet 1.x's update rules (the Python code of ``AdaGrad``,
``AdaDelta``, ``Adamax``, ``Nadam`` and the kernels ``rmsprop_update``,
``rmspropalex_update``, ``ftrl_update``, ``ftml_update``) and the ``Optimizer`` bookkeeping
in plain float64 NumPy, sharing no code with the library. The library runs in float32.

Two clipping rules exist in MXNet: the C++ kernels clip when ``clip_gradient`` is truthy
and >= 0; the Python-side optimizers call the ``clip`` operator whenever ``clip_gradient is
not None`` (0 zeroes the gradient, a negative bound gives the operator's odd result).
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from state_round_trip import check_round_trip, leaves

from tests.optimizers.test_optimizers import (
    assert_close,
    check_lr_mult_by_name_and_default_wd_rule,
    random_grads,
    random_weights,
)
from trainer_run.compose.schema import option_section
from trainer_run.errors import ConfigError
from trainer_run.optimizers import REGISTRY, create, get_updater
from trainer_run.params import Parameter, ParamStore

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)

STATE_ATOL = 1e-7
COMMON = dict(wd=0.05, rescale_grad=0.7, clip_gradient=0.5)   # wd on, rescale != 1, clipping bites
CONFIGS = {
    "adagrad": ("adagrad", dict(COMMON, learning_rate=0.1, eps=1e-7)),
    "rmsprop": ("rmsprop", dict(COMMON, learning_rate=0.01, gamma1=0.9, epsilon=1e-8)),
    "rmsprop_clip_weights": ("rmsprop", dict(COMMON, learning_rate=0.05, clip_weights=1.0)),
    "rmsprop_centered": ("rmsprop", dict(COMMON, learning_rate=0.01, centered=True, gamma1=0.9,
                                         gamma2=0.8, clip_weights=0.8)),
    # AdaDelta has no learning rate: an absurd one must change nothing
    "adadelta": ("adadelta", dict(COMMON, learning_rate=123.0, rho=0.9, epsilon=1e-5)),
    "ftrl": ("ftrl", dict(COMMON, learning_rate=0.1, lamda1=1.0, beta=1.0)),
    "adamax": ("adamax", dict(COMMON, learning_rate=0.01, beta1=0.9, beta2=0.999)),
    "nadam": ("nadam", dict(COMMON, learning_rate=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8,
                            schedule_decay=0.004)),
    "ftml": ("ftml", dict(COMMON, learning_rate=0.01, beta1=0.6, beta2=0.999, epsilon=1e-8)),
}
NAMES = ["adagrad", "rmsprop", "adadelta", "ftrl", "adamax", "nadam", "ftml"]
PYTHON_SIDE = {"adagrad", "adadelta", "adamax", "nadam"}
CONFIGS_DIR = Path(__file__).resolve().parent.parent.parent / "configs" / "optimizer"


# -- hand references (MXNet 1.9 semantics, float64) ------------------------------------------

def kernel_clip(x, c):
    """C++ kernels: clip only when clip_gradient is passed (truthy) and >= 0."""
    return np.clip(x, -c, c) if c and c >= 0 else x


def ndarray_clip(x, c):
    """Python side: ``clip(x, -c, c)`` whenever c is not None; MXNet's clip kernel tests
    ``x > a_max`` then ``x < a_min``."""
    if c is None:
        return x
    return np.where(x > c, c, np.where(x < -c, -c, x))


def ref_adagrad(h, w, g, s, t, lr, wd):
    g = ndarray_clip(h.rescale * g, h.clip)
    s["history"] = s["history"] + g * g
    div = g / np.sqrt(s["history"] + h.kw["eps"])
    return w + (div + w * wd) * -lr


def ref_rmsprop(h, w, g, s, t, lr, wd):
    g1, eps = h.kw.get("gamma1", 0.9), h.kw.get("epsilon", 1e-8)
    g = kernel_clip(h.rescale * g + wd * w, h.clip)
    s["n"] = (1 - g1) * g * g + g1 * s["n"]
    if h.kw.get("centered"):
        s["g"] = (1 - g1) * g + g1 * s["g"]
        s["delta"] = h.kw["gamma2"] * s["delta"] - lr * g / np.sqrt(s["n"] - s["g"] ** 2 + eps)
        w = w + s["delta"]
    else:
        w = w - lr * g / np.sqrt(s["n"] + eps)
    return kernel_clip(w, h.kw.get("clip_weights"))


def ref_adadelta(h, w, g, s, t, lr, wd):
    rho, eps = h.kw["rho"], h.kw["epsilon"]
    g = ndarray_clip(h.rescale * g, h.clip)
    s["acc_g"] = rho * s["acc_g"] + (1 - rho) * g * g
    delta = np.sqrt(s["acc_delta"] + eps) / np.sqrt(s["acc_g"] + eps) * g
    s["acc_delta"] = rho * s["acc_delta"] + (1 - rho) * delta * delta
    return w - (delta + wd * w)                      # no learning rate


def ref_ftrl(h, w, g, s, t, lr, wd):
    l1, beta = h.kw["lamda1"], h.kw["beta"]
    g = kernel_clip(h.rescale * g, h.clip)
    s["z"] = s["z"] + g - (np.sqrt(s["n"] + g * g) - np.sqrt(s["n"])) * w / lr
    s["n"] = s["n"] + g * g
    z = s["z"]
    return (np.sign(z) * l1 - z) / ((beta + np.sqrt(s["n"])) / lr + wd) * (np.abs(z) > l1)


def ref_adamax(h, w, g, s, t, lr, wd):
    b1, b2 = h.kw["beta1"], h.kw["beta2"]
    g = ndarray_clip(h.rescale * g + wd * w, h.clip)
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["u"] = np.maximum(b2 * s["u"], np.abs(g))
    with np.errstate(invalid="ignore"):               # 0 / 0 where no gradient was seen
        return w - lr / (1 - b1 ** t) * s["m"] / s["u"]


def ref_nadam(h, w, g, s, t, lr, wd):
    b1, b2, eps, decay = h.kw["beta1"], h.kw["beta2"], h.kw["epsilon"], h.kw["schedule_decay"]
    g = ndarray_clip(h.rescale * g + wd * w, h.clip)
    mom_t = b1 * (1 - 0.5 * 0.96 ** (t * decay))
    mom_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * decay))
    h.m_schedule *= mom_t                            # one schedule for the whole optimizer
    schedule_next = h.m_schedule * mom_next
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    m_bar = (1 - mom_t) * g / (1 - h.m_schedule) + mom_next * s["m"] / (1 - schedule_next)
    return w - lr * m_bar / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)


def ref_ftml(h, w, g, s, t, lr, wd):
    b1, b2, eps = h.kw["beta1"], h.kw["beta2"], h.kw["epsilon"]
    g = kernel_clip(h.rescale * g + wd * w, h.clip)
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    d_t = (1 - b1 ** t) / lr * (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)
    s["z"] = b1 * s["z"] + (1 - b1) * g - (d_t - b1 * s["d"]) * w
    s["d"] = d_t
    return -s["z"] / d_t


RULES = {"adagrad": ref_adagrad, "rmsprop": ref_rmsprop, "adadelta": ref_adadelta,
         "ftrl": ref_ftrl, "adamax": ref_adamax, "nadam": ref_nadam, "ftml": ref_ftml}


def state_names(kind, kw):
    """The library's state leaves, in order (MXNet's create_state)."""
    return {"adagrad": ("history",), "adadelta": ("acc_g", "acc_delta"), "ftrl": ("z", "n"),
            "adamax": ("m", "u"), "nadam": ("m", "v"), "ftml": ("d", "v", "z"),
            "rmsprop": ("n", "g", "delta") if kw.get("centered") else ("n",)}[kind]


class Hand:
    """MXNet's Optimizer bookkeeping (per-index counts, multipliers) + one rule, in float64."""

    def __init__(self, name, weights, *, lr_mult=None, wd_mult=None, **overrides):
        self.kind, kw = CONFIGS[name]
        self.kw = dict(kw, **overrides)
        self.rescale, self.clip = self.kw["rescale_grad"], self.kw["clip_gradient"]
        self.lr_mult, self.wd_mult = dict(lr_mult or {}), dict(wd_mult or {})
        self.counts, self.m_schedule = {}, 1.0
        self.w = {i: np.asarray(w, dtype=np.float64).copy() for i, w in weights.items()}
        self.s = {i: {k: np.zeros_like(w) for k in state_names(self.kind, self.kw)}
                  for i, w in self.w.items()}

    def step(self, index, grad):
        t = self.counts[index] = self.counts.get(index, 0) + 1
        lr = self.kw["learning_rate"] * self.lr_mult.get(index, 1.0)
        wd = self.kw["wd"] * self.wd_mult.get(index, 1.0)
        self.w[index] = RULES[self.kind](self, self.w[index], np.asarray(grad, np.float64),
                                         self.s[index], t, lr, wd)

    def states(self, index):
        return [self.s[index][k] for k in state_names(self.kind, self.kw)]


def lib_for(name, **extra):
    kind, kw = CONFIGS[name]
    return create(kind, **dict(kw, **extra))


def run_per_index(name, weights, grads, **extra):
    """Library (per-index updater) and hand side by side; returns (optimizer, updater, hand)."""
    opt = lib_for(name, **extra)
    updater = get_updater(opt)
    hand = Hand(name, weights, **extra)
    for g in grads:
        for i in sorted(g):
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    return opt, updater, hand


# -- 1. trajectories against the hand computation -------------------------------------------

@pytest.mark.parametrize("name", list(CONFIGS))
def test_trajectory_matches_mxnet_formula(name):
    rng = np.random.default_rng(1)
    weights = random_weights(rng)
    start = {i: w.copy() for i, w in weights.items()}
    grads = random_grads(rng, steps=6)
    opt, updater, hand = run_per_index(name, weights, grads)
    assert opt.num_update == 6
    for i in weights:
        assert weights[i].dtype == np.float32
        assert_close(weights[i], hand.w[i])
        for lib, ref in zip(leaves(updater.states[i]), hand.states(i), strict=True):
            assert_close(lib, ref, atol=STATE_ATOL)

    # gradient (and weight) clipping change the trajectory, so the test above covers them
    off = [dict(clip_gradient=None)]
    if CONFIGS[name][1].get("clip_weights"):
        off.append(dict(clip_weights=None))
    for overrides in off:
        unclipped = Hand(name, start, **overrides)
        for g in grads:
            for i in sorted(g):
                unclipped.step(i, g[i])
        assert not all(np.allclose(unclipped.w[i], hand.w[i], rtol=1e-3) for i in weights)
    if name == "ftrl":                                # lamda1 zeroes some weights, not all
        flat = np.concatenate([w.ravel() for w in weights.values()])
        assert 0 < (flat == 0).sum() < flat.size


@pytest.mark.parametrize("name", NAMES)
def test_lr_mult_by_name_and_default_wd_rule(name):
    check_lr_mult_by_name_and_default_wd_rule(partial(lib_for, name), partial(Hand, name), seed=2)


# -- 2. clipping rules ---------------------------------------------------------------------------

@pytest.mark.parametrize("clip", [0.0, -0.5])
@pytest.mark.parametrize("name", NAMES)
def test_zero_and_negative_clip_gradient(name, clip):
    """Python-side optimizers clip whenever clip_gradient is not None (0 zeroes the gradient);
    the C++ kernels treat 0 and negative bounds as 'no clipping'."""
    rng = np.random.default_rng(3)
    start = random_weights(rng)
    grads = random_grads(rng, steps=4)
    weights = {i: w.copy() for i, w in start.items()}
    _, _, hand = run_per_index(name, weights, grads, clip_gradient=clip)
    for i in weights:
        if name == "adamax" and clip == 0:            # g = 0 always: MXNet's 0 / 0 is NaN,
            assert np.isnan(hand.w[i]).all()          # here the weights stay (see below)
            assert np.array_equal(weights[i], start[i])
        else:
            assert_close(weights[i], hand.w[i])
    if name not in PYTHON_SIDE:
        off = {i: w.copy() for i, w in start.items()}
        run_per_index(name, off, grads, clip_gradient=None)
        for i in weights:
            assert np.array_equal(weights[i], off[i])


def test_adamax_entry_without_gradient_stays_put():
    """Deviation: MXNet's m / u is 0 / 0 = NaN for an entry whose gradient was always 0."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal(6).astype(np.float32)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(4)]
    for g in grads:
        g[2] = 0.0                                    # e.g. a dead ReLU unit
    per_index, listed = w0.copy(), w0.copy()
    a, b = get_updater(create("adamax", wd=0.0)), get_updater(create("adamax", wd=0.0))
    hand = Hand("adamax", {0: w0}, wd=0.0, clip_gradient=None, rescale_grad=1.0,
                learning_rate=0.002)
    for g in grads:
        a(0, g, per_index)
        b([0], [g], [listed])                         # the fused list path
        hand.step(0, g)
    assert np.isnan(hand.w[0][2])                     # what MXNet computes
    for w in (per_index, listed):
        assert w[2] == w0[2]
        keep = np.arange(6) != 2
        assert_close(w[keep], hand.w[0][keep])
    assert np.array_equal(per_index, listed)


# -- 3. multi_precision -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_multi_precision_updates_a_float32_master(name):
    rng = np.random.default_rng(5)
    weights = random_weights(rng, dtype=np.float16)
    grads = random_grads(rng, steps=5, dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # no float16 warning with multi_precision
        _, updater, hand = run_per_index(name, weights, grads, multi_precision=True)
    for i in weights:
        master, inner = updater.states[i]             # MXNet's (master, state) layout
        assert master.dtype == np.float32 and weights[i].dtype == np.float16
        assert_close(master, hand.w[i])
        assert np.array_equal(weights[i], master.astype(np.float16))
        for lib, ref in zip(leaves(inner), hand.states(i), strict=True):
            assert lib.dtype == np.float32
            assert_close(lib, ref, atol=STATE_ATOL)


# -- 4. fused path equals per-index path ------------------------------------------------------

UNIFORM = [("a", (3, 4), 1.0), ("b", (4,), 1.0), ("c", (5, 2), 1.0), ("big", (200, 200), 1.0)]
MIXED = [("a", (3, 4), 1.0), ("b", (4,), 2.0), ("c", (5, 2), 1.0), ("big", (200, 200), 2.0)]


def make_store(rng, specs, dtype=np.float32):
    params = {n: Parameter(rng.standard_normal(s).astype(dtype), name=n, lr_mult=m)
              for n, s, m in specs}
    start = {i: p.data.copy() for i, p in enumerate(params.values())}
    return ParamStore(params), start


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16_mp"])
@pytest.mark.parametrize("specs", [UNIFORM, MIXED], ids=["uniform", "mixed_lr_mult"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_fused_step_equals_per_index_path_exactly(name, specs, dtype):
    rng = np.random.default_rng(6)
    store, start = make_store(rng, specs, dtype)
    mults = {i: m for i, (_, _, m) in enumerate(specs)}
    grads = random_grads(rng, shapes=[s for _, s, _ in specs], steps=4, dtype=dtype)
    mp = dict(multi_precision=dtype == np.float16)

    fused_opt = lib_for(name, **mp)
    fused = get_updater(fused_opt)
    fused.attach(store)
    ref_opt = lib_for(name, **mp)
    ref_opt.set_lr_mult({i: m for i, m in mults.items() if m != 1.0})
    ref = get_updater(ref_opt)
    ref_w = {i: w.copy() for i, w in start.items()}
    hand = Hand(name, start, lr_mult=mults)
    # MXNet's Trainer updates in index order; step() keeps it for Nadam's shared schedule
    order = range(len(specs))

    calls = []
    original = fused_opt.fused_update
    fused_opt.fused_update = lambda *a, **k: (calls.append(a[0]), original(*a, **k))
    for g in grads:
        for i, p in enumerate(store):
            p.grad[...] = g[i]
        fused.step()
        for i in order:
            ref(i, g[i], ref_w[i])
            hand.step(i, g[i])
        for i, p in enumerate(store):
            assert np.array_equal(p.data, ref_w[i]), f"index {i} differs from the per-index path"
            if dtype == np.float32:
                assert_close(p.data, hand.w[i])
        for i in ref_w:
            for a, b in zip(leaves(fused.states[i]), leaves(ref.states[i]), strict=True):
                assert np.array_equal(a, b)
    per_index = fused_opt.order_sensitive and len(store.groups) > 1
    assert len(calls) == (0 if per_index else len(grads) * len(store.groups))
    assert getattr(fused_opt, "m_schedule", 1) == getattr(ref_opt, "m_schedule", 1)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_list_call_equals_one_call_per_index(name):
    rng = np.random.default_rng(7)
    w_a = random_weights(rng)
    w_b = {i: w.copy() for i, w in w_a.items()}
    ua, ub = get_updater(lib_for(name)), get_updater(lib_for(name))
    for g in random_grads(rng, steps=3):
        ua([0, 1], [g[0], g[1]], [w_a[0], w_a[1]])
        ub(0, g[0], w_b[0])
        ub(1, g[1], w_b[1])
    for i in (0, 1):
        assert np.array_equal(w_a[i], w_b[i])


# -- 5. state round trip ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16_mp"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_state_round_trip_mid_trajectory_is_bit_identical(name, dtype):
    rng = np.random.default_rng(9)
    specs = MIXED[:3]
    grads = random_grads(rng, shapes=[s for _, s, _ in specs], steps=6, dtype=dtype)
    init = {n: rng.standard_normal(s).astype(dtype) for n, s, _ in specs}

    check_round_trip(lambda: lib_for(name, multi_precision=dtype == np.float16), specs, init, grads,
                     plain=True)


# -- 6. registry, configs and argument checks ---------------------------------------------------

DEFAULTS = {"adagrad": dict(lr=0.01, float_stable_eps=1e-7),
            "rmsprop": dict(lr=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8, centered=False,
                            clip_weights=None),
            "adadelta": dict(rho=0.9, epsilon=1e-5),
            "ftrl": dict(lr=0.1, lamda1=0.01, beta=1.0),
            "adamax": dict(lr=0.002, beta1=0.9, beta2=0.999),
            "nadam": dict(lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, schedule_decay=0.004,
                          m_schedule=1.0),
            "ftml": dict(lr=0.01, beta1=0.6, beta2=0.999, epsilon=1e-8)}


@pytest.mark.parametrize("name", NAMES)
def test_create_by_name_with_mxnet_defaults_and_config_file(name):
    opt = create(name.upper())
    assert type(opt) is REGISTRY[name]
    assert type(opt).__name__.lower() == name
    for attribute, value in DEFAULTS[name].items():
        assert getattr(opt, attribute) == value, attribute
    section = dict(option_section("optimizer", name))
    section.pop("_target_")
    assert create(name, **section).hyper_parameters() == opt.hyper_parameters()


@pytest.mark.parametrize("name, kwargs", [
    ("adagrad", dict(eps=-1.0)), ("rmsprop", dict(gamma1=1.5)), ("rmsprop", dict(epsilon="x")),
    ("rmsprop", dict(clip_weights="big")), ("adadelta", dict(rho=-0.1)),
    ("ftrl", dict(lamda1=-0.01)), ("ftrl", dict(learning_rate=-1.0)), ("adamax", dict(beta2=2.0)),
    ("nadam", dict(schedule_decay=-1.0)), ("ftml", dict(beta1=1.5)),
])
def test_bad_arguments_raise_config_error(name, kwargs):
    with pytest.raises(ConfigError, match=f"^{next(iter(kwargs))}"):
        create(name, **kwargs)
