"""runner/arguments.py: a group's section is called with the keys every option of the group
shares (``configs/_<group>.yaml``) known: a shared key the callable does not take is left out,
a misspelt one is refused naming the key meant, any other key the callable does not take is
refused naming what it takes (trainer_run.targets alone, knowing no shared key, refuses them
all)."""

from __future__ import annotations

import numpy
import pytest

from trainer_run import targets
from trainer_run.errors import ConfigError
from trainer_run.runner import arguments


class OnlyRate:
    """A user's optimizer that takes the rate alone of the keys optimizers share."""

    def __init__(self, learning_rate, momentum=0.0):
        self.learning_rate, self.momentum = learning_rate, momentum


SECTION = {"_target_": f"{__name__}.OnlyRate", "learning_rate": 0.3, "wd": 0.0,
           "clip_gradient": None, "multi_precision": False, "momentum": 0.5}


def _refused(function, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        function(*args, **kwargs)
    return str(info.value)


def test_a_shared_key_the_callable_does_not_take_is_left_out():
    built = arguments.instantiate("optimizer", SECTION)
    assert type(built) is OnlyRate and (built.learning_rate, built.momentum) == (0.3, 0.5)
    assert _refused(targets.instantiate, "optimizer", SECTION) == (
        "optimizer.wd is not an argument of OnlyRate(learning_rate, momentum); the config may set "
        "learning_rate, momentum")


def test_a_section_under_a_group_reads_the_groups_shared_keys():
    built = arguments.instantiate("optimizer.inner", SECTION)
    assert (built.learning_rate, built.momentum) == (0.3, 0.5)


def test_a_misspelt_shared_key_and_a_key_of_no_one_are_refused_in_one_line():
    assert _refused(arguments.instantiate, "optimizer", {**SECTION, "learning_rat": 0.1}) == (
        "optimizer.learning_rat is not a config key; did you mean optimizer.learning_rate?")
    assert _refused(arguments.instantiate, "optimizer", {**SECTION, "nesterov": True}) == (
        "optimizer.nesterov is not an argument of OnlyRate(learning_rate, momentum); the config "
        "may set learning_rate, momentum")


def make(size, rng, noise=0.0, batch_size=None):
    """A user's data set function: it takes ``rng`` (a standard argument), its own keys, and a
    key the runner reads itself (``batch_size``), which it never gets."""
    return size, rng, noise, batch_size


def test_arguments_give_the_callable_its_keys_and_the_standard_ones_it_takes_never_the_runners():
    rng = numpy.random.default_rng(0)
    section = {"_target_": f"{__name__}.make", "size": 10, "noise": 0.1, "batch_size": 5,
               "val_fraction": 0.2, "workers": 0}
    factory, kwargs, fixed = arguments.arguments("dataset", section, {"rng": rng, "out": "x"},
                                                 runner=("batch_size", "val_fraction"))
    assert factory is make and kwargs == {"size": 10, "noise": 0.1} and fixed == {"rng": rng}
    assert arguments.instantiate("dataset", section, {"rng": rng}, runner=("batch_size",)) == (
        10, rng, 0.1, None)
