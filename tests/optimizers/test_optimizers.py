"""Optimizers against MXNet 1.9.1's update rules, recomputed by hand in float64.

The reference functions below restate MXNet's kernels (``sgd_update``, ``sgd_mom_update``,
``adam_update``) and the Python-side bookkeeping of ``mxnet.optimizer.Optimizer``
(per-index update counts, ``num_update``, learning-rate and weight-decay multipliers) with
plain float64 NumPy. They share no code with the library: the library runs in float32
and is compared to them within float32 rounding.
"""

from __future__ import annotations

import math
import warnings
from functools import partial

import numpy as np
import pytest
from state_round_trip import check_round_trip, leaves, set_grads

from trainer_run.errors import ConfigError
from trainer_run.optimizers import SGD, Adam, create, get_updater
from trainer_run.params import Parameter, ParamStore
from trainer_run.schedulers import ConstantScheduler, CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)

RTOL, ATOL = 1e-5, 1e-6          # float32 library vs float64 hand computation (weights)
STATE_ATOL = 1e-8                # optimizer states can be tiny (Adam's var)
SHAPES = [(3, 4), (5,)]          # two parameters of different shapes

# Common hyper-parameters: weight decay on, rescale_grad != 1, clipping that bites.
SGD_KW = dict(learning_rate=0.1, wd=0.01, rescale_grad=0.7, clip_gradient=0.5)
ADAM_KW = dict(learning_rate=0.01, wd=0.05, rescale_grad=0.7, clip_gradient=0.5)
CONFIGS = {
    "sgd": ("sgd", dict(SGD_KW, momentum=0.0)),
    "sgd_momentum": ("sgd", dict(SGD_KW, momentum=0.9)),
    "adam": ("adam", dict(ADAM_KW)),
}


# -- hand references (MXNet 1.9 semantics, float64) ------------------------------------------

def mx_clip(x, c):
    """MXNet passes clip_gradient to the kernel only when truthy; the kernel ignores c < 0."""
    if not c or c < 0:
        return x
    return np.clip(x, -c, c)


def ref_sgd(w, g, mom, *, lr, wd, rescale, clip, momentum):
    """sgd_update / sgd_mom_update; returns (weight, mom)."""
    step = lr * mx_clip(rescale * g, clip)
    if momentum == 0:
        return (1 - lr * wd) * w - step, None
    mom = momentum * mom - lr * wd * w - step
    return w + mom, mom


def ref_adam(w, g, mean, var, *, t, lr, wd, rescale, clip, beta1, beta2, eps):
    """Adam.update (bias correction folded into lr) + adam_update; returns (w, mean, var)."""
    lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    g = mx_clip(rescale * g + wd * w, clip)          # wd added BEFORE clipping
    mean = beta1 * mean + (1 - beta1) * g
    var = beta2 * var + (1 - beta2) * g * g
    return w - lr_t * mean / (np.sqrt(var) + eps), mean, var


class Hand:
    """MXNet's Optimizer bookkeeping + one kernel, on float64 copies of the weights.

    ``lr_mult`` / ``wd_mult`` are index -> multiplier, resolved by the test writer;
    ``schedule`` is a function of ``num_update``.
    """

    def __init__(self, kind, weights, *, learning_rate, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None, momentum=0.0, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lr_mult=None, wd_mult=None, schedule=None, begin_num_update=0,
                 multi_precision=False):
        self.kind = kind
        self.lr, self.wd, self.rescale, self.clip = learning_rate, wd, rescale_grad, clip_gradient
        self.momentum, self.beta1, self.beta2, self.eps = momentum, beta1, beta2, epsilon
        self.lr_mult, self.wd_mult = dict(lr_mult or {}), dict(wd_mult or {})
        self.schedule = schedule
        self.begin = begin_num_update
        self.counts = {}
        self.num_update = begin_num_update
        # float16 weights start a float32 master copy; float64 here.
        self.w = {i: np.asarray(w, dtype=np.float64).copy() for i, w in weights.items()}
        self.s1 = {i: np.zeros_like(w) for i, w in self.w.items()}   # mom or mean
        self.s2 = {i: np.zeros_like(w) for i, w in self.w.items()}   # var
        self.lrs = []                                              # (index, lr) used

    def step(self, index, grad):
        # _update_count happens before the learning rate is read
        self.counts[index] = self.counts.get(index, self.begin) + 1
        self.num_update = max(self.num_update, self.counts[index])
        base = self.schedule(self.num_update) if self.schedule else self.lr
        lr = base * self.lr_mult.get(index, 1.0)
        wd = self.wd * self.wd_mult.get(index, 1.0)
        self.lrs.append((index, lr))
        g = np.asarray(grad, dtype=np.float64)
        if self.kind == "sgd":
            self.w[index], mom = ref_sgd(self.w[index], g, self.s1[index], lr=lr, wd=wd,
                                         rescale=self.rescale, clip=self.clip,
                                         momentum=self.momentum)
            if mom is not None:
                self.s1[index] = mom
        else:
            self.w[index], self.s1[index], self.s2[index] = ref_adam(
                self.w[index], g, self.s1[index], self.s2[index], t=self.counts[index], lr=lr,
                wd=wd, rescale=self.rescale, clip=self.clip, beta1=self.beta1,
                beta2=self.beta2, eps=self.eps)


def hand_for(name, weights, **extra):
    kind, kw = CONFIGS[name]
    return Hand(kind, weights, **kw, **extra)


def lib_for(name, **extra):
    kind, kw = CONFIGS[name]
    return create(kind, **kw, **extra)


def random_weights(rng, shapes=SHAPES, dtype=np.float32):
    return {i: rng.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


def random_grads(rng, shapes=SHAPES, steps=6, dtype=np.float32, scale=1.5):
    return [{i: (scale * rng.standard_normal(s)).astype(dtype) for i, s in enumerate(shapes)}
            for _ in range(steps)]


def assert_close(actual, expected, atol=ATOL):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=RTOL,
                               atol=atol)


def lib_states(name, state):
    """The library's state for one index as (mom or mean, var or None)."""
    if name == "adam":
        return state[0], state[1]
    return state, None


# -- 1. per-index path against the hand computation -------------------------------------------

@pytest.mark.parametrize("name", list(CONFIGS))
def test_per_index_updates_match_mxnet_formulas(name):
    rng = np.random.default_rng(1)
    weights = random_weights(rng)
    grads = random_grads(rng, steps=6)
    kw = CONFIGS[name][1]

    # the data actually exercises clipping (some entries clipped, some not)
    pre = np.concatenate([kw["rescale_grad"] * g[i].ravel() + (kw["wd"] * weights[i].ravel()
                                                                if name == "adam" else 0)
                          for g in grads for i in g])
    clipped = np.abs(pre) > kw["clip_gradient"]
    assert 0.2 < clipped.mean() < 0.8

    opt = lib_for(name)
    updater = get_updater(opt)
    hand = hand_for(name, weights)
    for step, g in enumerate(grads, start=1):
        for i in (0, 1):
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
        for i in (0, 1):
            assert weights[i].dtype == np.float32
            assert_close(weights[i], hand.w[i])
        assert opt.num_update == step

    for i in (0, 1):
        s1, s2 = lib_states(name, updater.states[i])
        if CONFIGS[name][1].get("momentum", 0) == 0 and name != "adam":
            assert s1 is None                       # plain SGD keeps no state
        else:
            assert_close(s1, hand.s1[i], atol=STATE_ATOL)
        if s2 is not None:
            assert_close(s2, hand.s2[i], atol=STATE_ATOL)


def test_list_call_equals_one_call_per_index():
    rng = np.random.default_rng(2)
    w_a = random_weights(rng)
    w_b = {i: w.copy() for i, w in w_a.items()}
    grads = random_grads(rng, steps=3)
    ua, ub = get_updater(lib_for("adam")), get_updater(lib_for("adam"))
    for g in grads:
        ua([0, 1], [g[0], g[1]], [w_a[0], w_a[1]])
        ub(0, g[0], w_b[0])
        ub(1, g[1], w_b[1])
    for i in (0, 1):
        assert np.array_equal(w_a[i], w_b[i])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_clip_gradient_none_zero_and_negative_mean_no_clipping(name):
    rng = np.random.default_rng(3)
    start = random_weights(rng)
    grads = random_grads(rng, steps=5, scale=3.0)
    results = {}                     # keyed by repr: 0 and 0.0 would collide as dict keys
    for clip in (None, 0, 0.0, -1.0, 0.5):
        weights = {i: w.copy() for i, w in start.items()}
        kind, kw = CONFIGS[name]
        updater = get_updater(create(kind, **dict(kw, clip_gradient=clip)))
        for g in grads:
            for i in (0, 1):
                updater(i, g[i], weights[i])
        results[repr(clip)] = weights
    for clip in ("0", "0.0", "-1.0"):
        for i in (0, 1):
            assert np.array_equal(results[clip][i], results["None"][i])
    hand = Hand(CONFIGS[name][0], start, **dict(CONFIGS[name][1], clip_gradient=None))
    for g in grads:
        for i in (0, 1):
            hand.step(i, g[i])
    for i in (0, 1):
        assert_close(results["None"][i], hand.w[i])
        # and clipping at 0.5 really changes the trajectory
        assert not np.allclose(results["0.5"][i], results["None"][i], rtol=1e-3, atol=1e-4)


# -- 2. multipliers through param_idx2name --------------------------------------------------

def check_lr_mult_by_name_and_default_wd_rule(lib, hand_of, seed):
    """Five steps of the optimizer ``lib(param_idx2name=...)`` with the ``lr_mult`` of
    "fc_weight" set to 0.5 equal the hand computation ``hand_of(weights, lr_mult=...,
    wd_mult=...)`` in which fc_weight gets lr * 0.5 and full wd, fc_bias lr and wd 0."""
    rng = np.random.default_rng(seed)
    weights = random_weights(rng, shapes=[(4, 3), (3,)])
    grads = random_grads(rng, shapes=[(4, 3), (3,)], steps=5)
    opt = lib(param_idx2name={0: "fc_weight", 1: "fc_bias"})
    opt.set_lr_mult({"fc_weight": 0.5})
    updater = get_updater(opt)
    hand = hand_of(weights, lr_mult={0: 0.5}, wd_mult={1: 0.0})
    for g in grads:
        for i in (0, 1):
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    for i in (0, 1):
        assert_close(weights[i], hand.w[i])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lr_mult_by_name_and_default_wd_rule(name):
    check_lr_mult_by_name_and_default_wd_rule(partial(lib_for, name), partial(hand_for, name), seed=4)


# -- 3. per-index counts ------------------------------------------------------------------------



# -- 4. schedulers attached ---------------------------------------------------------------------

def hand_cosine(n, *, base, final, max_update, warmup=0, begin_lr=0.0):
    if n < warmup:
        return begin_lr + (base - begin_lr) * n / warmup
    # called at every update in turn, MXNet keeps the value at max_update after it
    progress = (min(n, max_update) - warmup) / (max_update - warmup)
    return final + (base - final) * (1 + math.cos(math.pi * progress)) / 2


@pytest.mark.parametrize("begin", [0, 3])
def test_cosine_scheduler_drives_the_learning_rate(begin):
    sched = CosineScheduler(max_update=10, base_lr=0.2, final_lr=0.02, warmup_steps=3,
                            warmup_begin_lr=0.05)
    opt = SGD(learning_rate=0.2, lr_scheduler=sched, begin_num_update=begin)
    assert sched.base_lr == 0.2
    updater = get_updater(opt)
    rng = np.random.default_rng(7)
    weights = random_weights(rng)
    grads = random_grads(rng, steps=14)

    def schedule(n):
        return hand_cosine(n, base=0.2, final=0.02, max_update=10, warmup=3, begin_lr=0.05)

    hand = Hand("sgd", weights, learning_rate=0.2, schedule=schedule, begin_num_update=begin)
    for k, g in enumerate(grads, start=1):
        before = {i: weights[i].astype(np.float64) for i in (0, 1)}
        for i in (0, 1):
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
            # the k-th update (counted from begin_num_update) used scheduler(begin + k)
            lr_used = np.mean((before[i] - weights[i]) / g[i])
            assert lr_used == pytest.approx(schedule(begin + k), rel=1e-4)
            assert hand.lrs[-1] == (i, schedule(begin + k))
            assert_close(weights[i], hand.w[i])
        assert opt.learning_rate == pytest.approx(schedule(begin + k), rel=1e-12)


def test_optimizer_overwrites_scheduler_base_lr():
    """MXNet: Optimizer.__init__ sets scheduler.base_lr = learning_rate; the cosine keeps its
    own base_lr_orig from construction, so it is the one the schedule decays from."""
    sched = CosineScheduler(max_update=4, base_lr=0.1, final_lr=0.0)
    opt = SGD(learning_rate=0.3, lr_scheduler=sched)
    assert sched.base_lr == 0.3
    updater = get_updater(opt)
    w = np.ones(3, np.float32)
    g = np.ones(3, np.float32)
    for k in range(1, 7):
        before = w.astype(np.float64)
        updater(0, g, w)
        expected = hand_cosine(k, base=0.1, final=0.0, max_update=4)
        assert np.mean(before - w) == pytest.approx(expected, rel=1e-5, abs=1e-7)

    # a ConstantScheduler returns base_lr after warmup, i.e. the optimizer's rate
    const = ConstantScheduler(base_lr=0.1, warmup_steps=2, warmup_begin_lr=0.0)
    opt = SGD(learning_rate=0.3, lr_scheduler=const)
    updater = get_updater(opt)
    w = np.ones(3, np.float32)
    lrs = []
    for _ in range(4):
        before = w.astype(np.float64)
        updater(0, g, w)
        lrs.append(float(np.mean(before - w)))
    # update 1: warmup 0 + (0.1 - 0) * 1/2 (warmup target is the constructor's base_lr)
    assert lrs == pytest.approx([0.05, 0.3, 0.3, 0.3], rel=1e-5)


def test_a_scheduler_without_learning_rate_owns_the_rate():
    """MXNet 1.9: ``learning_rate=None`` beside a scheduler leaves its ``base_lr`` alone (SGD's
    signature has no rate of its own); without a scheduler the rate is 0.01."""
    sched = ConstantScheduler(base_lr=0.2)
    opt = SGD(lr_scheduler=sched)
    assert sched.base_lr == 0.2 and opt.learning_rate == 0.2
    w, g = np.ones(2, np.float32), np.ones(2, np.float32)
    get_updater(opt)(0, g, w)
    assert_close(w, np.full(2, 0.8))
    assert SGD().learning_rate == 0.01
    assert Adam(learning_rate=None, lr_scheduler=ConstantScheduler(base_lr=0.3)).learning_rate == 0.3


# -- 5. fused path equals per-index path ------------------------------------------------------

UNIFORM = [("a", (3, 4), 1.0), ("b", (4,), 1.0), ("c", (5, 2), 1.0), ("big", (200, 200), 1.0)]
MIXED = [("a", (3, 4), 1.0), ("b", (4,), 2.0), ("c", (5, 2), 1.0), ("big", (200, 200), 2.0)]


def make_store(rng, specs, dtype=np.float32):
    params = {name: Parameter(rng.standard_normal(shape).astype(dtype), name=name, lr_mult=m)
              for name, shape, m in specs}
    start = {i: p.data.copy() for i, p in enumerate(params.values())}
    return ParamStore(params), start


@pytest.mark.parametrize("specs", [UNIFORM, MIXED], ids=["uniform", "mixed_lr_mult"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_fused_step_equals_per_index_path_exactly(name, specs):
    rng = np.random.default_rng(8)
    store, start = make_store(rng, specs)
    shapes = [s for _, s, _ in specs]
    mults = {i: m for i, (_, _, m) in enumerate(specs)}
    grads = random_grads(rng, shapes=shapes, steps=5)

    if specs is MIXED:
        assert len(store.groups) == 2
        assert [g.indices for g in store.groups] == [[0, 2], [1, 3]]
    else:
        assert len(store.groups) == 1

    fused_opt = lib_for(name)
    fused = get_updater(fused_opt)
    fused.attach(store)

    ref_opt = lib_for(name)
    ref_opt.set_lr_mult({i: m for i, m in mults.items() if m != 1.0})
    ref = get_updater(ref_opt)
    ref_w = {i: w.copy() for i, w in start.items()}

    hand = hand_for(name, start, lr_mult=mults)

    # every group is fusable, so step() must take the fused path
    calls = []
    original = fused_opt.fused_update
    fused_opt.fused_update = lambda *a, **k: (calls.append(a[0]), original(*a, **k))

    for g in grads:
        set_grads(store, g)
        fused.step()
        for i in range(len(specs)):
            ref(i, g[i], ref_w[i])
            hand.step(i, g[i])
        for i, p in enumerate(store):
            assert np.array_equal(p.data, ref_w[i]), f"index {i} differs from per-index path"
            assert_close(p.data, hand.w[i])
        for i in range(len(specs)):
            for a, b in zip(leaves(fused.states[i]), leaves(ref.states[i]), strict=True):
                assert np.array_equal(a, b)
    assert len(calls) == len(grads) * len(store.groups)
    assert fused_opt.num_update == ref_opt.num_update == len(grads)


def test_mixing_per_index_calls_and_fused_steps():
    """A per-index call on an attached parameter updates the shared flat state; the next
    step() then falls back to per-index updates for the group whose counts now differ."""
    rng = np.random.default_rng(9)
    specs = [("a", (3, 4), 1.0), ("b", (6,), 1.0)]
    store, start = make_store(rng, specs)
    grads = random_grads(rng, shapes=[(3, 4), (6,)], steps=5)
    opt = lib_for("adam")
    u = get_updater(opt)
    u.attach(store)
    hand = hand_for("adam", start)
    params = list(store)
    for step, g in enumerate(grads):
        set_grads(store, g)
        if step == 1:                      # an extra update of index 0 only
            u(0, params[0].grad, params[0].data)
            hand.step(0, g[0])
        u.step()
        for i in (0, 1):
            hand.step(i, g[i])
        for i, p in enumerate(params):
            assert_close(p.data, hand.w[i])
    assert hand.counts == {0: 6, 1: 5}
    assert opt.num_update == 6
    mean0, var0 = u.states[0]
    assert_close(mean0, hand.s1[0], atol=STATE_ATOL)
    assert_close(var0, hand.s2[0], atol=STATE_ATOL)


# -- 6. multi_precision ---------------------------------------------------------------------------

def master_of(name, state):
    """MXNet orders SGD's multi-precision state (mom, master), others (master, state)."""
    return state[1] if name.startswith("sgd") else state[0]


@pytest.mark.parametrize("name", ["sgd", "sgd_momentum", "adam"])
def test_multi_precision_updates_a_float32_master(name):
    rng = np.random.default_rng(10)
    weights = random_weights(rng, dtype=np.float16)
    grads = random_grads(rng, steps=5, dtype=np.float16)
    opt = lib_for(name, multi_precision=True)
    updater = get_updater(opt)
    hand = hand_for(name, weights)              # float64 from the float16 start values
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no float16 warning with multi_precision
        for g in grads:
            for i in (0, 1):
                updater(i, g[i], weights[i])
                hand.step(i, g[i])
    for i in (0, 1):
        master = master_of(name, updater.states[i])
        assert master.dtype == np.float32 and weights[i].dtype == np.float16
        assert_close(master, hand.w[i])
        assert np.array_equal(weights[i], master.astype(np.float16))
        np.testing.assert_allclose(weights[i].astype(np.float64), hand.w[i], rtol=1e-3,
                                   atol=1e-3)
        if name == "sgd_momentum":
            assert_close(updater.states[i][0], hand.s1[i], atol=STATE_ATOL)
        if name == "adam":
            assert_close(updater.states[i][1][0], hand.s1[i], atol=STATE_ATOL)
            assert_close(updater.states[i][1][1], hand.s2[i], atol=STATE_ATOL)


@pytest.mark.parametrize("name", ["sgd", "sgd_momentum", "adam"])
def test_multi_precision_fused_equals_per_index(name):
    rng = np.random.default_rng(11)
    store, start = make_store(rng, MIXED, dtype=np.float16)
    grads = random_grads(rng, shapes=[s for _, s, _ in MIXED], steps=4, dtype=np.float16)
    fused = get_updater(lib_for(name, multi_precision=True))
    fused.attach(store)
    ref_opt = lib_for(name, multi_precision=True)
    ref_opt.set_lr_mult({1: 2.0, 3: 2.0})
    ref = get_updater(ref_opt)
    ref_w = {i: w.copy() for i, w in start.items()}
    for g in grads:
        set_grads(store, g)
        fused.step()
        for i in ref_w:
            ref(i, g[i], ref_w[i])
    for i, p in enumerate(store):
        assert p.data.dtype == np.float16
        assert np.array_equal(p.data, ref_w[i])
        assert np.array_equal(master_of(name, fused.states[i]), master_of(name, ref.states[i]))


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_float16_without_multi_precision_warns(kind):
    w = np.ones(3, np.float16)
    updater = get_updater(create(kind, momentum=0.9) if kind == "sgd" else create(kind))
    with pytest.warns(UserWarning, match="multi_precision"):
        updater(0, np.ones(3, np.float16), w)
    assert w.dtype == np.float16


# -- 7. state round trip --------------------------------------------------------------------------

ROUND_TRIP = {
    "sgd_momentum": lambda: lib_for("sgd_momentum"),
    "adam": lambda: lib_for("adam"),
    "adam_cosine": lambda: lib_for("adam", lr_scheduler=CosineScheduler(
        max_update=5, base_lr=0.01, final_lr=0.001, warmup_steps=1, warmup_begin_lr=0.002)),
    "sgd_multi_precision": lambda: lib_for("sgd_momentum", multi_precision=True),
}


@pytest.mark.parametrize("plain", [False, True], ids=["in_memory", "json_npz"])
@pytest.mark.parametrize("case", list(ROUND_TRIP))
def test_state_round_trip_mid_trajectory_is_bit_identical(case, plain):
    dtype = np.float16 if case == "sgd_multi_precision" else np.float32
    rng = np.random.default_rng(12)
    specs = MIXED[:3]
    grads = random_grads(rng, shapes=[s for _, s, _ in specs], steps=6, dtype=dtype)
    init = {n: rng.standard_normal(s).astype(dtype) for n, s, _ in specs}
    _, num_update = check_round_trip(ROUND_TRIP[case], specs, init, grads, plain)
    assert num_update == 3


def test_load_state_dict_needs_existing_states():
    u = get_updater(lib_for("adam"))
    with pytest.raises(KeyError):
        u.load_state_dict({"0": [np.zeros(3), np.zeros(3)]}, np.asarray)
    w = np.zeros(3, np.float32)
    u(0, np.ones(3, np.float32), w)
    with pytest.raises(ValueError):
        u.load_state_dict({"0": [np.zeros(3)]}, np.asarray)            # wrong count
    with pytest.raises(ValueError):
        u.load_state_dict({"0": [np.zeros(4), np.zeros(4)]}, np.asarray)  # wrong shape


# -- 8. registry and argument checks --------------------------------------------------------------



@pytest.mark.parametrize("kwargs", [dict(learning_rate=-0.1), dict(wd=-1.0),
                                    dict(momentum=-0.5), dict(momentum=1.5),
                                    dict(learning_rate="fast")])
def test_bad_arguments_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        create("sgd", **kwargs)
