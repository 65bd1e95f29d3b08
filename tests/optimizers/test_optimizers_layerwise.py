"""LAMB, LARS, GroupAdaGrad and AdamW against MXNet's update rules, recomputed in float64.

The references restate, with plain float64 NumPy and no library code:
``lamb_update_phase1`` / ``lamb_update_phase2`` (per-tensor trust ratio), LARS's
``multi_lars`` + ``preloaded_multi_sgd_mom_update`` (layer-wise rate from the unclipped
gradient, names ending in gamma/beta/bias excluded, momentum correction), the dense branch
of ``contrib.GroupAdaGrad`` (row-wise history) and ``adamw_update`` driven as MXNet's AdamW
drives it (``eta = lr * sqrt(1 - beta2**t) / (1 - beta1**t)``). The library runs in float32
and must agree within float32 rounding; its fused flat-buffer path must agree with its
per-index path bit for bit.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from state_round_trip import check_round_trip, leaves, set_grads

from trainer_run.errors import ConfigError
from trainer_run.optimizers import LAMB, LARS, AdamW, GroupAdaGrad, create, get_updater
from trainer_run.params import Parameter, ParamStore
from trainer_run.schedulers import CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)

RTOL, ATOL = 1e-5, 1e-6
STATE_ATOL = 1e-8
COMMON = dict(wd=0.05, rescale_grad=0.7, clip_gradient=0.5)   # decay on, rescale, clipping
CONFIGS = {   # case -> (registered name, arguments)
    "lamb": ("lamb", dict(COMMON, learning_rate=0.01)),
    "lamb_no_bias_correction": ("lamb", dict(COMMON, learning_rate=0.01,
                                             bias_correction=False)),
    "lars": ("lars", dict(COMMON, learning_rate=0.5, momentum=0.9, eta=0.1, eps=1e-3)),
    "lars_no_momentum": ("lars", dict(COMMON, learning_rate=0.5, eta=0.1)),
    "adamw": ("adamw", dict(COMMON, learning_rate=0.01)),
    "adamw_no_bias_correction": ("adamw", dict(COMMON, learning_rate=0.01,
                                               correct_bias=False)),
    "groupadagrad": ("groupadagrad", dict(learning_rate=0.1, rescale_grad=0.7,
                                          clip_gradient=0.5)),
}
SHAPES = {"groupadagrad": [(3, 4), (5, 2)]}     # GroupAdaGrad takes 2-D weights only
DEFAULT_SHAPES = [(3, 4), (5,)]
FUSED = ["lamb", "lamb_no_bias_correction", "lars", "lars_no_momentum", "adamw",
         "adamw_no_bias_correction"]


# -- hand references (float64) -----------------------------------------------------------------

def f32(x):
    """A kernel parameter: MXNet's kernels take beta1/beta2 as float32, and 1 - 0.999f is
    0.00099998713, 1.3e-5 away from 0.001 (visible at this test's tolerance)."""
    return float(np.float32(x))


def mx_clip(x, c):
    """Kernels get clip_gradient only when truthy and clip only when it is >= 0."""
    return x if not c or c < 0 else np.clip(x, -c, c)


def ref_lamb(w, g, mean, var, *, t, lr, wd, rescale, clip, beta1, beta2, epsilon,
             lower_bound=None, upper_bound=None, bias_correction=True):
    beta1, beta2 = f32(beta1), f32(beta2)
    g = mx_clip(rescale * g, clip)
    mean = beta1 * mean + (1 - beta1) * g
    var = beta2 * var + (1 - beta2) * g * g
    if bias_correction:
        r = (mean / (1 - beta1**t)) / (np.sqrt(var / (1 - beta2**t)) + epsilon) + wd * w
    else:
        r = mean / (np.sqrt(var) + epsilon) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(r)
    if lower_bound:
        r1 = max(r1, lower_bound)
    if upper_bound:
        r1 = min(r1, upper_bound)
    ratio = 1.0 if r1 == 0 or r2 == 0 else r1 / r2
    return w - lr * ratio * r, mean, var


def ref_lars(w, g, mom, *, lr, wd, rescale, clip, momentum, eta, eps, layerwise, norm_w):
    if layerwise:
        w_norm, g_norm = np.linalg.norm(norm_w), np.linalg.norm(g) * rescale   # unclipped
        if w_norm > 0 and g_norm > 0:
            lr = lr * eta * w_norm / (g_norm + wd * w_norm + eps)
    mom = momentum * mom - lr * wd * w - lr * mx_clip(rescale * g, clip)
    return w + mom, mom


def ref_adamw(w, g, mean, var, *, t, lr, wd, rescale, clip, beta1, beta2, epsilon,
              correct_bias=True):
    eta = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t) if correct_bias else lr  # Python side
    beta1, beta2 = f32(beta1), f32(beta2)                                         # kernel side
    g = mx_clip(rescale * g, clip)
    mean = beta1 * mean + (1 - beta1) * g
    var = beta2 * var + (1 - beta2) * g**2
    return w - eta * (mean / (np.sqrt(var) + epsilon) + wd * w), mean, var


def ref_groupadagrad(w, g, history, *, lr, rescale, clip, eps):
    g = rescale * g
    if clip is not None:                      # Python-side: `is not None`, not truthiness
        g = np.clip(g, -clip, clip)
    history = history + np.mean(g * g, axis=1, keepdims=True)
    return w - lr * g / np.sqrt(history + eps), history


class Hand:
    """MXNet's Optimizer bookkeeping (counts, num_update, multipliers, schedule, LARS's
    momentum correction) around one reference, on float64 copies of the weights.

    ``lr_mult`` / ``wd_mult``: index -> multiplier; ``names``: index -> name (LARS);
    ``half_norms``: LARS norms of the float16-rounded weight (multi-precision).
    """

    def __init__(self, case, weights, *, lr_mult=None, wd_mult=None, names=None, schedule=None,
                 half_norms=False, **overrides):
        self.kind, kw = CONFIGS[case][0], dict(CONFIGS[case][1], **overrides)
        self.lr, self.wd = kw.pop("learning_rate"), kw.pop("wd", 0.0)
        self.rescale, self.clip = kw.pop("rescale_grad", 1.0), kw.pop("clip_gradient", None)
        self.kw = kw
        self.lr_mult, self.wd_mult = dict(lr_mult or {}), dict(wd_mult or {})
        self.names, self.schedule, self.half_norms = dict(names or {}), schedule, half_norms
        self.counts, self.num_update = {}, 0
        self.lr_round, self.prev_lr, self.cur_lr = None, None, None
        self.w = {i: np.asarray(w, np.float64).copy() for i, w in weights.items()}
        zeros = {i: np.zeros_like(w) for i, w in self.w.items()}
        if self.kind == "groupadagrad":
            zeros = {i: np.zeros((w.shape[0], 1)) for i, w in self.w.items()}
        self.s1 = {i: z.copy() for i, z in zeros.items()}
        self.s2 = {i: z.copy() for i, z in zeros.items()}

    def step(self, i, grad):
        self.counts[i] = self.counts.get(i, 0) + 1
        self.num_update = max(self.num_update, self.counts[i])
        base = self.schedule(self.num_update) if self.schedule else self.lr
        lr, wd = base * self.lr_mult.get(i, 1.0), self.wd * self.wd_mult.get(i, 1.0)
        g, t, kw = np.asarray(grad, np.float64), self.counts[i], dict(self.kw)
        common = dict(lr=lr, rescale=self.rescale, clip=self.clip)
        if self.kind == "lamb":
            self.w[i], self.s1[i], self.s2[i] = ref_lamb(self.w[i], g, self.s1[i], self.s2[i],
                                                         t=t, wd=wd, **common, **_adam(kw))
        elif self.kind == "adamw":
            self.w[i], self.s1[i], self.s2[i] = ref_adamw(self.w[i], g, self.s1[i], self.s2[i],
                                                          t=t, wd=wd, **common, **_adam(kw))
        elif self.kind == "groupadagrad":
            self.w[i], self.s1[i] = ref_groupadagrad(self.w[i], g, self.s1[i], **common,
                                                     eps=kw.get("eps", 1e-5))
        else:
            if self.num_update != self.lr_round:   # a new round: momentum correction
                self.prev_lr = base if self.cur_lr is None else self.cur_lr
                self.cur_lr, self.lr_round = base, self.num_update
            momentum = kw.get("momentum", 0.0) * self.cur_lr / self.prev_lr
            name = self.names.get(i, str(i))
            norm_w = self.w[i].astype(np.float16).astype(np.float64) if self.half_norms else self.w[i]
            self.w[i], self.s1[i] = ref_lars(
                self.w[i], g, self.s1[i], wd=wd, **common, momentum=momentum,
                eta=kw.get("eta", 0.001), eps=kw.get("eps", 0.0), norm_w=norm_w,
                layerwise=not name.endswith(("gamma", "beta", "bias")))


def _adam(kw):
    out = dict(beta1=kw.pop("beta1", 0.9), beta2=kw.pop("beta2", 0.999),
               epsilon=kw.pop("epsilon", 1e-6))
    out.update(kw)
    return out


def lib(case, **extra):
    name, kw = CONFIGS[case]
    return create(name, **dict(kw, **extra))


def shapes_of(case):
    return SHAPES.get(CONFIGS[case][0], DEFAULT_SHAPES)


def random_weights(rng, shapes, dtype=np.float32):
    return {i: rng.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


def random_grads(rng, shapes, steps=6, dtype=np.float32):
    return [{i: (1.5 * rng.standard_normal(s)).astype(dtype) for i, s in enumerate(shapes)}
            for _ in range(steps)]


def assert_close(actual, expected, atol=ATOL):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=RTOL, atol=atol)


def lib_states(kind, state):
    """(first, second) state arrays of one index: (mean, var), (mom, None), (history, None)."""
    if kind in ("lamb", "adamw"):
        return state
    return state, None


# -- 1. trajectories against the hand computation ---------------------------------------------

@pytest.mark.parametrize("case", list(CONFIGS))
def test_trajectory_matches_mxnet_formula(case):
    rng = np.random.default_rng(1)
    shapes = shapes_of(case)
    weights = random_weights(rng, shapes)
    grads = random_grads(rng, shapes)
    pre = np.concatenate([0.7 * g[i].ravel() for g in grads for i in g])
    assert 0.2 < np.mean(np.abs(pre) > 0.5) < 0.8        # clipping bites, but not everywhere

    opt = lib(case)
    updater = get_updater(opt)
    hand = Hand(case, weights)
    for step, g in enumerate(grads, start=1):
        for i in g:
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
        for i in g:
            assert weights[i].dtype == np.float32
            assert_close(weights[i], hand.w[i])
        assert opt.num_update == step
    kind = CONFIGS[case][0]
    for i in weights:
        first, second = lib_states(kind, updater.states[i])
        if case == "lars_no_momentum":
            assert first is None
        else:
            assert_close(first, hand.s1[i], atol=STATE_ATOL)
        if second is not None:
            assert_close(second, hand.s2[i], atol=STATE_ATOL)


# -- 2. multipliers through param_idx2name -----------------------------------------------------

@pytest.mark.parametrize("case", ["lamb", "lars", "adamw", "groupadagrad"])
def test_lr_mult_by_name(case):
    rng = np.random.default_rng(5)
    shapes = shapes_of(case)
    names = {0: "fc_weight", 1: "fc_bias" if case != "groupadagrad" else "emb_weight"}
    weights = random_weights(rng, shapes)
    grads = random_grads(rng, shapes, steps=5)
    opt = lib(case, param_idx2name=names)
    opt.set_lr_mult({"fc_weight": 0.5})
    updater = get_updater(opt)
    wd_mult = {1: 0.0} if case != "groupadagrad" else {}       # fc_bias: no weight decay
    hand = Hand(case, weights, lr_mult={0: 0.5}, wd_mult=wd_mult, names=names)
    for g in grads:
        for i in g:
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    for i in weights:
        assert_close(weights[i], hand.w[i])


# -- 3. multi_precision ----------------------------------------------------------------------------

MASTER = {"lamb": lambda s: s[0], "lars": lambda s: s[1], "adamw": lambda s: s[1],
          "groupadagrad": lambda s: s[0]}


@pytest.mark.parametrize("case", ["lamb", "lars", "lars_no_momentum", "adamw", "groupadagrad"])
def test_multi_precision_master_follows_the_hand_computation(case):
    rng = np.random.default_rng(6)
    shapes = shapes_of(case)
    weights = random_weights(rng, shapes, dtype=np.float16)
    grads = random_grads(rng, shapes, steps=5, dtype=np.float16)
    updater = get_updater(lib(case, multi_precision=True))
    hand = Hand(case, weights, half_norms=CONFIGS[case][0] == "lars")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no float16 warning
        for g in grads:
            for i in g:
                updater(i, g[i], weights[i])
                hand.step(i, g[i])
    for i in weights:
        master = MASTER[CONFIGS[case][0]](updater.states[i])
        assert master.dtype == np.float32 and weights[i].dtype == np.float16
        assert_close(master, hand.w[i])
        assert np.array_equal(weights[i], master.astype(np.float16))


@pytest.mark.parametrize("kind", ["lamb", "lars", "adamw", "groupadagrad"])
def test_float16_without_multi_precision_warns(kind):
    shape = (2, 3)
    updater = get_updater(create(kind, momentum=0.9) if kind == "lars" else create(kind))
    with pytest.warns(UserWarning, match="multi_precision"):
        updater(0, np.ones(shape, np.float16), np.ones(shape, np.float16))


# -- 4. fused flat groups == per-index path -------------------------------------------------------

NAMES = ["fc_weight", "fc_bias", "bn_gamma", "big_weight"]
MIXED = [("fc_weight", (3, 4), 1.0), ("fc_bias", (4,), 2.0), ("bn_gamma", (5, 2), 1.0),
         ("big_weight", (200, 200), 2.0)]             # two groups, each mixing names LARS skips


def make_store(rng, specs, dtype=np.float32):
    params = {n: Parameter(rng.standard_normal(s).astype(dtype), name=n, lr_mult=m)
              for n, s, m in specs}
    return ParamStore(params), {i: p.data.copy() for i, p in enumerate(params.values())}


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16_mp"])
@pytest.mark.parametrize("case", FUSED)
def test_fused_step_equals_per_index_path_exactly(case, dtype):
    rng = np.random.default_rng(7)
    store, start = make_store(rng, MIXED, dtype)
    assert [g.indices for g in store.groups] == [[0, 2], [1, 3]]
    grads = random_grads(rng, [s for _, s, _ in MIXED], steps=5, dtype=dtype)
    idx2name = dict(enumerate(NAMES))
    mp = dtype == np.float16

    fused_opt = lib(case, param_idx2name=idx2name, multi_precision=mp)
    fused = get_updater(fused_opt)
    fused.attach(store)
    ref_opt = lib(case, param_idx2name=idx2name, multi_precision=mp,
                  param_dict=store.param_dict())
    ref = get_updater(ref_opt)
    ref_w = {i: w.copy() for i, w in start.items()}
    hand = Hand(case, start, lr_mult={1: 2.0, 3: 2.0}, names=idx2name, half_norms=mp)

    calls = []
    original = fused_opt.fused_step
    fused_opt.fused_step = lambda *a, **k: (calls.append(1), original(*a, **k))
    for g in grads:
        set_grads(store, g)
        fused.step()
        for i in ref_w:
            ref(i, g[i], ref_w[i])
            hand.step(i, g[i])
        for i, p in enumerate(store):
            assert np.array_equal(p.data, ref_w[i]), f"index {i} differs from the per-index path"
        for i in ref_w:
            for a, b in zip(leaves(fused.states[i]), leaves(ref.states[i]), strict=True):
                assert np.array_equal(a, b)
    assert len(calls) == len(grads) * 2
    if not mp:
        for i, p in enumerate(store):
            assert_close(p.data, hand.w[i])


# -- 5. state round trip -----------------------------------------------------------------------------

ROUND_TRIP = {
    "lamb": lambda: lib("lamb"),
    "lars_cosine": lambda: lib("lars", lr_scheduler=CosineScheduler(max_update=6, base_lr=0.5,
                                                                     final_lr=0.05)),
    "adamw": lambda: lib("adamw"),
    "adamw_multi_precision": lambda: lib("adamw", multi_precision=True),
    "groupadagrad": lambda: lib("groupadagrad"),
}


@pytest.mark.parametrize("plain", [False, True], ids=["in_memory", "json_npz"])
@pytest.mark.parametrize("case", list(ROUND_TRIP))
def test_state_round_trip_mid_trajectory_is_bit_identical(case, plain):
    dtype = np.float16 if case.endswith("multi_precision") else np.float32
    rng = np.random.default_rng(10)
    specs = [("a", (3, 4), 1.0), ("b", (5, 2), 2.0), ("c", (4, 3), 1.0)]
    grads = random_grads(rng, [s for _, s, _ in specs], steps=6, dtype=dtype)
    init = {n: rng.standard_normal(s).astype(dtype) for n, s, _ in specs}
    _, num_update = check_round_trip(ROUND_TRIP[case], specs, init, grads, plain)
    assert num_update == 3


# -- 6. registry, defaults, argument checks ----------------------------------------------------------

def test_create_by_name_with_mxnet_defaults():
    lamb, lars, adamw, gag = (create(n) for n in ("lamb", "LARS", "AdamW", "groupadagrad"))
    assert type(lamb) is LAMB and type(lars) is LARS and type(adamw) is AdamW
    assert type(gag) is GroupAdaGrad
    assert (lamb.lr, lamb.epsilon, lamb.lower_bound, lamb.bias_correction) == (0.001, 1e-6,
                                                                               None, True)
    assert (lars.lr, lars.eta, lars.eps, lars.momentum) == (0.01, 0.001, 0, 0.0)
    assert (adamw.lr, adamw.epsilon, adamw.correct_bias) == (0.001, 1e-6, True)
    assert (gag.lr, gag.float_stable_eps) == (0.01, 1e-5)


@pytest.mark.parametrize("name, kwargs", [
    ("lamb", dict(beta1=1.5)), ("lamb", dict(epsilon=-1.0)), ("lamb", dict(lower_bound="x")),
    ("lars", dict(eta=-0.1)), ("lars", dict(momentum=2.0)), ("lars", dict(eps=-1)),
    ("adamw", dict(beta2=-0.1)), ("groupadagrad", dict(eps=-1e-5)),
])
def test_bad_arguments_raise_config_error(name, kwargs):
    with pytest.raises(ConfigError, match=f"^{next(iter(kwargs))}"):
        create(name, **kwargs)
