"""ccSGD, NAG, Signum/signSGD, LBSGD, DCASGD, SGLD and Test against MXNet 1.9.1, by hand.

The ``ref_*`` functions restate MXNet's update rules in float64 NumPy (the kernels
``sgd_mom_update``, ``signum_update``, ``signsgd_update`` and the Python-side updates of
``NAG``, ``DCASGD``, ``SGLD``, ``LBSGD`` and ``Test``), and :class:`Hand` restates the
bookkeeping of ``mxnet.optimizer.Optimizer`` (per-index counts, multipliers). They share no
code with the library, which runs in float32 and is compared within float32 rounding.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from state_round_trip import check_round_trip, leaves, set_grads

from trainer_run.optimizers import REGISTRY, create, get_updater
from trainer_run.params import Parameter, ParamStore

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)

RTOL, ATOL = 1e-5, 1e-6
SHAPES = [(3, 4), (5,)]
STEPS = 8
# weight decay on, rescale_grad != 1, clipping that bites (|0.7 * grad| > 0.5 for ~60%)
KW = dict(learning_rate=0.1, wd=0.05, rescale_grad=0.7, clip_gradient=0.5)
CASES = {
    "ccsgd": ("ccsgd", dict(KW, momentum=0.9)),
    "nag": ("nag", dict(KW, momentum=0.9)),
    "nag_plain": ("nag", dict(KW)),
    "signum": ("signum", dict(KW, learning_rate=0.01, momentum=0.9, wd_lh=0.1)),
    "signsgd": ("signum", dict(KW, learning_rate=0.01, momentum=0.0)),
    "lbsgd": ("lbsgd", dict(KW, momentum=0.9, batch_scale=2, warmup_epochs=1,
                            updates_per_epoch=5)),
    "lbsgd_lars": ("lbsgd", dict(KW, batch_scale=3, warmup_strategy="lars")),
    "dcasgd": ("dcasgd", dict(KW, momentum=0.9, lamda=0.5)),
    "dcasgd_plain": ("dcasgd", dict(KW, lamda=0.5)),
    "sgld": ("sgld", dict(KW, learning_rate=0.01)),
    "test": ("test", dict(KW)),
}
NAMES = ["ccsgd", "nag", "signum", "lbsgd", "dcasgd", "sgld", "test"]
SEED = 1234                     # SGLD's noise: the library's rng and the hand's start alike


# -- hand references (float64) ------------------------------------------------------------------

def kernel_clip(x, c):
    """Kernels get clip_gradient only when truthy and clip only when it is >= 0."""
    return np.clip(x, -c, c) if c and c >= 0 else x


def clip_op(x, c):
    """MXNet's NDArray clip(x, -c, c): x > a_max -> a_max, elif x < a_min -> a_min."""
    return np.where(x > c, c, np.where(x < -c, -c, x))


def python_clip(x, c):
    """The Python-side updates (NAG, DCASGD, SGLD) clip whenever clip_gradient is not None."""
    return x if c is None else clip_op(x, c)


def ref_sgd(h, i, g, lr, wd, momentum):
    step = lr * kernel_clip(h.rescale * g, h.clip)
    if momentum == 0:
        return (1 - lr * wd) * h.w[i] - step
    h.mom[i] = momentum * h.mom[i] - lr * wd * h.w[i] - step
    return h.w[i] + h.mom[i]


def ref_nag(h, i, g, lr, wd):
    g = python_clip(h.rescale * g, h.clip) + wd * h.w[i]
    m = h.kw.get("momentum", 0.0)
    if m == 0:
        return h.w[i] - lr * g
    h.mom[i] = m * h.mom[i] + g
    return h.w[i] - lr * (g + m * h.mom[i])


def ref_signum(h, i, g, lr, wd):
    m = h.kw.get("momentum", 0.9)
    if m == 0:                                              # signsgd_update: the raw gradient
        return (1 - lr * wd) * h.w[i] - lr * np.sign(g)
    h.mom[i] = m * h.mom[i] - (1 - m) * wd * h.w[i] - (1 - m) * kernel_clip(h.rescale * g, h.clip)
    return (1 - lr * h.kw.get("wd_lh", 0.0)) * h.w[i] + lr * np.sign(h.mom[i])


def warmup_mult(n, scale, strategy, nwup):
    if n >= nwup:
        return float(scale)
    if nwup <= 1:
        return 1.0
    fraction = n / nwup
    return 1 + (scale - 1) * {"linear": fraction, "power2": fraction ** 2,
                              "sqrt": math.sqrt(fraction)}[strategy]


def ref_lbsgd(h, i, g, lr, wd):
    kw = h.kw
    scale = kw.get("batch_scale", 1)
    per_epoch = kw.get("updates_per_epoch", 32)
    total, n = h.cum.get(i, (0.0, kw.get("begin_epoch", 0) * per_epoch))
    total, n = total + g, n + 1
    if n % scale:                                           # not a macro-batch: no change
        h.cum[i] = (total, n)
        return h.w[i]
    h.cum[i] = (0.0, n)
    g = total / scale
    strategy = kw.get("warmup_strategy", "linear")
    if strategy == "lars":
        w2, g2 = np.sum(h.w[i] ** 2), np.sum(g ** 2)
        mult = min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100)
    else:
        mult = warmup_mult(n, scale, strategy, kw.get("warmup_epochs", 5) * per_epoch)
    return ref_sgd(h, i, g, lr * mult, wd, kw.get("momentum", 0.0))


def ref_dcasgd(h, i, g, lr, wd):
    g = python_clip(h.rescale * g, h.clip)
    w = h.w[i]
    step = -lr * (g + wd * w + h.kw["lamda"] * g * g * (w - h.prev[i]))
    h.mom[i] = h.kw.get("momentum", 0.0) * h.mom[i] + step
    h.prev[i] = w
    return w + h.mom[i]


def ref_sgld(h, i, g, lr, wd):
    g = python_clip(h.rescale * g, h.clip)
    noise = math.sqrt(lr) * h.rng.standard_normal(h.w[i].shape)
    return h.w[i] - lr / 2 * (g + wd * h.w[i]) + noise


REFS = {"ccsgd": lambda h, i, g, lr, wd: ref_sgd(h, i, g, lr, wd, h.kw.get("momentum", 0.0)),
        "nag": ref_nag, "signum": ref_signum, "lbsgd": ref_lbsgd, "dcasgd": ref_dcasgd,
        "sgld": ref_sgld}


class Hand:
    """MXNet's Optimizer bookkeeping around one ``ref_*`` rule, on float64 weights.

    ``lr_mult`` / ``wd_mult``: index -> multiplier; ``schedule``: a function of num_update.
    """

    def __init__(self, case, weights, *, lr_mult=None, wd_mult=None, schedule=None, **override):
        self.kind, kw = CASES[case]
        self.kw = dict(kw, **override)
        self.rescale, self.clip = self.kw.get("rescale_grad", 1.0), self.kw.get("clip_gradient")
        self.lr_mult, self.wd_mult = dict(lr_mult or {}), dict(wd_mult or {})
        self.schedule = schedule
        self.counts, self.num_update = {}, 0
        self.w = {i: np.asarray(w, np.float64).copy() for i, w in weights.items()}
        self.mom = {i: np.zeros_like(w) for i, w in self.w.items()}
        self.prev = {i: w.copy() for i, w in self.w.items()}       # DCASGD
        self.cum = {}                                              # LBSGD: (sum, num_cums)
        self.rng = np.random.default_rng(SEED)                     # SGLD

    def lr_wd(self, i):
        base = self.schedule(self.num_update) if self.schedule else self.kw["learning_rate"]
        return base * self.lr_mult.get(i, 1.0), self.kw.get("wd", 0.0) * self.wd_mult.get(i, 1.0)

    def count(self, i):
        self.counts[i] = self.counts.get(i, 0) + 1
        self.num_update = max(self.num_update, self.counts[i])

    def step(self, i, grad):
        g = np.asarray(grad, np.float64)
        if self.kind == "test":                   # not counted; lr, wd and clip unused
            self.w[i] = self.w[i] + self.rescale * g
            return
        if self.kind == "lbsgd":                  # LBSGD reads lr and wd before counting
            lr, wd = self.lr_wd(i)
            self.count(i)
        else:
            self.count(i)
            lr, wd = self.lr_wd(i)
        self.w[i] = REFS[self.kind](self, i, g, lr, wd)


# -- helpers ---------------------------------------------------------------------------------------

def lib(case, **override):
    kind, kw = CASES[case]
    opt = create(kind, **dict(kw, **override))
    opt.rng = np.random.default_rng(SEED)
    return opt


def random_weights(rng, shapes=SHAPES, dtype=np.float32):
    return {i: rng.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


def random_grads(rng, shapes=SHAPES, steps=STEPS, dtype=np.float32):
    return [{i: (1.5 * rng.standard_normal(s)).astype(dtype) for i, s in enumerate(shapes)}
            for _ in range(steps)]


def assert_close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=RTOL, atol=ATOL)


def run_per_index(opt, weights, grads, hand=None):
    updater = get_updater(opt)
    for g in grads:
        for i in sorted(weights):
            updater(i, g[i], weights[i])
            if hand is not None:
                hand.step(i, g[i])
                assert_close(weights[i], hand.w[i])
    return updater


# -- 1. trajectories against the hand computation -------------------------------------------

def test_gradients_exercise_clipping():
    grads = random_grads(np.random.default_rng(1))
    scaled = np.concatenate([KW["rescale_grad"] * g[i].ravel() for g in grads for i in g])
    assert 0.2 < np.mean(np.abs(scaled) > KW["clip_gradient"]) < 0.8


@pytest.mark.parametrize("case", list(CASES))
def test_trajectory_matches_mxnet_formulas(case):
    rng = np.random.default_rng(1)
    weights = random_weights(rng)
    hand = Hand(case, weights)
    opt = lib(case)
    updater = run_per_index(opt, weights, random_grads(rng), hand)
    if CASES[case][0] != "test":
        assert opt.num_update == STEPS
    for i in weights:
        state = updater.states[i]
        if case in ("ccsgd", "nag", "signum", "lbsgd"):
            assert_close(state, hand.mom[i])
        elif case.startswith("dcasgd"):
            mom, previous = state
            assert (mom is None) == (case == "dcasgd_plain")
            assert_close(previous, hand.prev[i])
        elif case == "test":
            assert state.dtype == np.float32 and np.array_equal(state, weights[i])
        else:
            assert state is None


@pytest.mark.parametrize("case", ["nag", "nag_plain", "dcasgd", "sgld"])
@pytest.mark.parametrize("clip", [0.0, -0.5])
def test_python_side_updates_clip_whenever_clip_gradient_is_not_none(case, clip):
    """0 clips every gradient to 0; a negative bound maps every value to +-bound (MXNet's
    clip operator with a_min > a_max), unlike the kernels, which ignore both."""
    rng = np.random.default_rng(3)
    weights = random_weights(rng)
    start = {i: w.copy() for i, w in weights.items()}
    grads = random_grads(rng)
    run_per_index(lib(case, clip_gradient=clip), weights, grads, Hand(case, start, clip_gradient=clip))
    unclipped = {i: w.copy() for i, w in start.items()}
    run_per_index(lib(case, clip_gradient=None), unclipped, grads)
    assert not np.allclose(weights[0], unclipped[0], rtol=1e-3)


# -- 2. multipliers by name -----------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_lr_mult_by_name_and_default_wd_rule(case):
    rng = np.random.default_rng(5)
    weights = random_weights(rng, shapes=[(4, 3), (3,)])
    opt = lib(case, param_idx2name={0: "fc_weight", 1: "fc_bias"})
    opt.set_lr_mult({"fc_weight": 0.5})
    # by hand: fc_weight gets lr * 0.5 and full wd; fc_bias gets lr and wd 0
    hand = Hand(case, weights, lr_mult={0: 0.5}, wd_mult={1: 0.0})
    run_per_index(opt, weights, random_grads(rng, shapes=[(4, 3), (3,)], steps=6), hand)


# -- 3. multi_precision ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_multi_precision_master_follows_the_hand_computation(case):
    rng = np.random.default_rng(6)
    weights = random_weights(rng, dtype=np.float16)
    grads = random_grads(rng, dtype=np.float16)
    hand = Hand(case, weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no float16 warning with multi_precision
        updater = get_updater(lib(case, multi_precision=True))
        for g in grads:
            for i in weights:
                updater(i, g[i], weights[i])
                hand.step(i, g[i])
    for i in weights:
        state = updater.states[i]
        master = state[1] if case == "ccsgd" else state[0]   # MXNet's SGD orders (mom, master)
        assert master.dtype == np.float32 and weights[i].dtype == np.float16
        assert_close(master, hand.w[i])
        assert np.array_equal(weights[i], master.astype(np.float16))


# -- 4. fused flat groups equal the per-index path ------------------------------------------------

UNIFORM = [("a", (3, 4), 1.0), ("b", (4,), 1.0), ("c", (5, 2), 1.0), ("big", (200, 200), 1.0)]
MIXED = [("a", (3, 4), 1.0), ("b", (4,), 2.0), ("c", (5, 2), 1.0), ("big", (200, 200), 2.0)]
LAYOUTS = {"uniform": (UNIFORM, np.float32), "mixed_lr_mult": (MIXED, np.float32),
           "float16_mp": (MIXED, np.float16)}


def make_store(rng, specs, dtype):
    params = {n: Parameter(rng.standard_normal(s).astype(dtype), name=n, lr_mult=m)
              for n, s, m in specs}
    return ParamStore(params), {i: p.data.copy() for i, p in enumerate(params.values())}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", list(CASES))
def test_fused_step_equals_per_index_path_exactly(case, layout):
    specs, dtype = LAYOUTS[layout]
    extra = dict(multi_precision=True) if dtype == np.float16 else {}
    rng = np.random.default_rng(7)
    store, start = make_store(rng, specs, dtype)
    grads = random_grads(rng, shapes=[s for _, s, _ in specs], steps=5, dtype=dtype)

    fused_opt = lib(case, **extra)
    fused = get_updater(fused_opt)
    fused.attach(store)
    calls = []
    original = fused_opt.fused_update
    fused_opt.fused_update = lambda *a, **k: (calls.append(a[0]), original(*a, **k))

    ref_opt = lib(case, **extra)
    ref_opt.set_lr_mult({i: m for i, (_, _, m) in enumerate(specs) if m != 1.0})
    ref = get_updater(ref_opt)
    ref_w = {i: w.copy() for i, w in start.items()}

    for g in grads:
        set_grads(store, g)
        fused.step()
        for group in store.groups:            # SGLD: the same noise order as a group's pass
            for i in group.indices:
                ref(i, g[i], ref_w[i])
        for i, p in enumerate(store):
            assert np.array_equal(p.data, ref_w[i]), f"index {i} differs from per-index path"
            for a, b in zip(leaves(fused.states[i]), leaves(ref.states[i]), strict=True):
                assert np.array_equal(a, b)
    fusable = fused_opt.fused_step is not None
    assert fusable == (CASES[case][0] != "lbsgd")
    assert len(calls) == (len(grads) * len(store.groups) if fusable else 0)
    assert fused_opt.num_update == ref_opt.num_update


# -- 5. state round trip --------------------------------------------------------------------------

@pytest.mark.parametrize("plain", [False, True], ids=["in_memory", "json_npz"])
@pytest.mark.parametrize("case", list(CASES))
def test_state_round_trip_mid_trajectory_is_bit_identical(case, plain):
    rng = np.random.default_rng(8)
    specs = MIXED[:3]
    grads = random_grads(rng, shapes=[s for _, s, _ in specs], steps=6)
    init = {n: rng.standard_normal(s).astype(np.float32) for n, s, _ in specs}
    saved, _ = check_round_trip(lambda: lib(case), specs, init, grads, plain)
    if case.startswith("lbsgd"):
        assert len(saved["optimizer"]["cumgrads"]) == len(specs)


# -- 6. LBSGD specifics ---------------------------------------------------------------------------



# -- 7. SGLD's noise ------------------------------------------------------------------------------



# -- 8. Test optimizer, registry ------------------------------------------------------------------



@pytest.mark.parametrize("name", NAMES)
def test_create_by_registered_name(name):
    opt = create(name.upper())
    assert type(opt) is REGISTRY[name] and type(opt).__name__.lower() == name
    assert opt.lr == 0.01
