"""Loss scalers (trainer_run.loss_scaling), traced by hand (no updater involved): static and
dynamic scaling, retries, the state and the refused arguments."""

from __future__ import annotations

import pytest

from trainer_run.errors import ConfigError
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler


def _trace(scaler, verdicts):
    """(verdict, scale, clean_steps, skipped_steps) after recording each of ``verdicts``."""
    out = []
    for finite in verdicts:
        verdict = scaler.record(finite)
        out.append((verdict, scaler.scale, scaler.clean_steps, scaler.skipped_steps))
    return out


# -- static -----------------------------------------------------------------------------------
def test_static_scaler_always_applies_and_never_changes():
    scaler = LossScaler(1024)
    assert scaler.dynamic is False
    assert scaler.scale == 1024.0 and isinstance(scaler.scale, float)
    for finite in (True, False, False, True, False):
        assert scaler.record(finite) == "apply"
        assert scaler.scale == 1024.0
    assert scaler.readings() == {"loss_scale": 1024.0}


def test_static_scale_is_a_hyper_parameter_not_state():
    """A static scale comes from the constructor (the config), so a resume may change it."""
    scaler = LossScaler(1024)
    state = scaler.state_dict()
    assert state == {}
    other = LossScaler(8.0)
    other.load_state_dict(state)
    assert other.scale == 8.0
    assert other.readings() == {"loss_scale": 8.0}


# -- dynamic, skip ----------------------------------------------------------------------------
def test_dynamic_scaler_grows_after_exactly_interval_clean_steps_and_backs_off_on_overflow():
    scaler = DynamicLossScaler(scale=8, scaling_factor=2, interval=3)
    assert scaler.dynamic is True
    assert scaler.readings() == {"loss_scale": 8.0, "skipped_steps": 0}
    T, F = True, False
    steps = [T, T, T,      # 3 clean steps: grows 8 -> 16 on the third
             T, T, T,      # another interval: 16 -> 32
             T, T,         # two clean steps, no growth yet
             F,            # overflow: 32 -> 16, clean count restarts, step skipped
             T, T,         # two clean steps after the overflow: not enough to grow
             T,            # the third: 16 -> 32
             F, F,         # two overflows in a row: 32 -> 16 -> 8, two more skips
             T, T, T]      # grows again after exactly interval: 8 -> 16
    expected = [
        ("apply", 8.0, 1, 0), ("apply", 8.0, 2, 0), ("apply", 16.0, 0, 0),
        ("apply", 16.0, 1, 0), ("apply", 16.0, 2, 0), ("apply", 32.0, 0, 0),
        ("apply", 32.0, 1, 0), ("apply", 32.0, 2, 0),
        ("skip", 16.0, 0, 1),
        ("apply", 16.0, 1, 1), ("apply", 16.0, 2, 1),
        ("apply", 32.0, 0, 1),
        ("skip", 16.0, 0, 2), ("skip", 8.0, 0, 3),
        ("apply", 8.0, 1, 3), ("apply", 8.0, 2, 3), ("apply", 16.0, 0, 3),
    ]
    assert _trace(scaler, steps) == expected
    assert scaler.readings() == {"loss_scale": 16.0, "skipped_steps": 3}


def test_dynamic_scaler_with_interval_one_grows_every_clean_step():
    scaler = DynamicLossScaler(scale=1, scaling_factor=4, interval=1)
    assert [scaler.record(f) for f in (True, True, False, True)] == ["apply", "apply", "skip", "apply"]
    assert scaler.scale == 16.0  # 1 * 4 * 4 / 4 * 4
    assert scaler.skipped_steps == 1


def test_nnabla_growth_follows_the_seeds_counter_traced_by_hand():
    """nnabla's DynamicLossScalingUpdater.update, traced by hand with N=2 (k: its _counter,
    starting at 0): a clean step runs ``if k > N: scale *= 2; k = 0`` then ``k += 1``; an
    overflow runs ``scale /= 2; k = 0``. Scale and k after each step:
    C: 0>2 no, k=1 | C: k=2 | C: k=3 | C: 3>2, 8->16, k=0+1=1 (growth after N+2 = 4 steps)
    C: k=2 | C: k=3 | C: 3>2, 16->32, k=1 (after N+1 = 3 steps) | X: 32->16, k=0
    C: k=1 | C: k=2 | C: k=3 | C: 3>2, 16->32, k=1 (after N+2 = 4 steps again); X: an overflow."""
    scaler = DynamicLossScaler(scale=8, scaling_factor=2, interval=2, growth="nnabla")
    C, X = True, False  # clean, overflow
    steps = [C, C, C, C, C, C, C, X, C, C, C, C]
    hand = [8, 8, 8, 16, 16, 16, 32, 16, 16, 16, 16, 32]
    counter = [1, 2, 3, 1, 2, 3, 1, 0, 1, 2, 3, 1]
    traced = _trace(scaler, steps)
    assert [scale for _, scale, _, _ in traced] == hand
    assert [clean for _, _, clean, _ in traced] == counter
    assert [verdict for verdict, *_ in traced] == ["apply"] * 7 + ["skip"] + ["apply"] * 4
    # today's rule on the same steps: exactly N clean steps between growths
    ours = _trace(DynamicLossScaler(scale=8, scaling_factor=2, interval=2), steps)
    assert [scale for _, scale, _, _ in ours] == [8, 16, 16, 32, 32, 64, 64, 32, 32, 64, 64, 128]


# -- dynamic, retry ---------------------------------------------------------------------------
def test_retry_retries_max_retries_times_then_skips():
    scaler = DynamicLossScaler(scale=8, scaling_factor=2, interval=3, on_overflow="retry",
                               max_retries=2)
    assert _trace(scaler, [False, False, False]) == [
        ("retry", 4.0, 0, 0), ("retry", 2.0, 0, 0), ("skip", 1.0, 0, 1)]
    assert scaler.retries == 0
    # the retry count starts afresh for the next step
    assert [scaler.record(False) for _ in range(3)] == ["retry", "retry", "skip"]
    assert scaler.scale == 0.125 and scaler.skipped_steps == 2


def test_a_clean_step_after_a_retry_resets_the_retry_count():
    scaler = DynamicLossScaler(scale=8, scaling_factor=2, interval=3, on_overflow="retry",
                               max_retries=2)
    assert _trace(scaler, [False, True]) == [("retry", 4.0, 0, 0), ("apply", 4.0, 1, 0)]
    assert scaler.retries == 0
    # two more retries are allowed again before a skip
    assert _trace(scaler, [False, False, False]) == [
        ("retry", 2.0, 0, 0), ("retry", 1.0, 0, 0), ("skip", 0.5, 0, 1)]


def test_retry_with_max_retries_zero_behaves_like_skip():
    verdicts = [True, False, True, True, True, False, False, True]
    retry = DynamicLossScaler(scale=8, scaling_factor=2, interval=3, on_overflow="retry",
                              max_retries=0)
    skip = DynamicLossScaler(scale=8, scaling_factor=2, interval=3, on_overflow="skip")
    traced = _trace(retry, verdicts)
    assert traced == _trace(skip, verdicts)
    assert [v for v, *_ in traced] == ["apply", "skip", "apply", "apply", "apply", "skip", "skip",
                                       "apply"]
    assert retry.skipped_steps == 3


# -- state ------------------------------------------------------------------------------------
@pytest.mark.parametrize("on_overflow", ["skip", "retry"])
def test_restored_scaler_continues_like_the_original(on_overflow):
    first = [True, True, False, True, True, False]  # ends in a retry streak when retrying
    rest = [False, True, True, True, False, False, False, True, True, True, True]
    original = DynamicLossScaler(scale=8, scaling_factor=2, interval=3, on_overflow=on_overflow,
                                 max_retries=2)
    _trace(original, first)
    state = original.state_dict()
    assert set(state) == {"scale", "clean_steps", "retries", "skipped_steps"}
    assert state["retries"] == (1 if on_overflow == "retry" else 0)
    restored = DynamicLossScaler(on_overflow=on_overflow, max_retries=2, scaling_factor=2,
                                 interval=3)
    restored.load_state_dict(state)
    assert restored.readings() == original.readings()
    ours = _trace(original, rest)
    theirs = _trace(restored, rest)
    assert theirs == ours
    assert restored.retries == original.retries
    # the sequence is not trivial: it backs off, skips and grows
    assert {v for v, *_ in ours} >= {"apply", "skip"}
    assert len({scale for _, scale, *_ in ours}) > 1


def test_state_dict_is_a_snapshot():
    scaler = DynamicLossScaler(scale=8, scaling_factor=2, interval=3)
    state = scaler.state_dict()
    scaler.record(False)
    assert state == {"scale": 8.0, "clean_steps": 0, "retries": 0, "skipped_steps": 0}


# -- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"scale": 0}, "scale"),
    ({"scale": -1.0}, "scale"),
    ({"scaling_factor": 1}, "scaling_factor"),
    ({"scaling_factor": 0.5}, "scaling_factor"),
    ({"interval": 0}, "interval"),
    ({"interval": 2.5}, "interval"),
    ({"on_overflow": "explode"}, "on_overflow"),
    ({"max_retries": -1}, "max_retries"),
    ({"growth": "pytorch"}, "growth"),
])
def test_dynamic_scaler_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ConfigError) as info:
        DynamicLossScaler(**kwargs)
    assert str(info.value).startswith(name)
    if name == "scale":  # not "scaling_factor ..."
        assert str(info.value).startswith("scale ")


@pytest.mark.parametrize("scale", [0, -1024.0])
def test_static_scaler_rejects_a_scale_that_is_not_positive(scale):
    with pytest.raises(ConfigError, match=r"^scale must be > 0"):
        LossScaler(scale)


def test_on_overflow_error_lists_the_choices():
    with pytest.raises(ConfigError, match=r"^on_overflow='explode' is unknown; choose one of skip, retry"):
        DynamicLossScaler(on_overflow="explode")


# -- callbacks --------------------------------------------------------------------------------
