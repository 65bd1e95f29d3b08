"""Weight averaging from the config (src/trainer_run/runner/averages.py): trainer.ema_decay in
(0, 1), trainer.swa.start as a fraction, iterations or epochs, an objective that names averaged
weights the run lacks, each refused in one line that says how to fix it; from Python as from the
command, nothing left behind."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import trainer_run
from trainer_run.errors import ConfigError, JobFailed
from trainer_run.runner.averages import check_objective, ema_decay, swa_points


def at(iteration: int, epoch: float = 0.0, previous: float = 0.0):
    return SimpleNamespace(updater=SimpleNamespace(iteration=iteration, epoch_detail=epoch,
                                                   previous_epoch_detail=previous))


@pytest.mark.parametrize("value, line", [
    (1.0, "trainer.ema_decay must be < 1 (the weight of the average so far, e.g. 0.999), got 1.0"),
    (0, "trainer.ema_decay must be > 0, got 0"),
    ("high", "trainer.ema_decay must be a number, got 'high'"),
])
def test_a_decay_outside_0_1_is_refused(value, line):
    with pytest.raises(ConfigError, match="^" + line.replace("(", r"\(").replace(")", r"\)")):
        ema_decay(value)
    assert ema_decay(None) is None and ema_decay(0.999) == 0.999


def test_swa_start_as_a_fraction_iterations_or_epochs():
    fraction = swa_points({"start": 0.75, "interval": 10}, total=101)
    assert fraction.start_iteration == 76  # ceil(0.75 * 101)
    assert [i for i in range(1, 102) if fraction(at(i))] == [80, 90, 100]
    iterations = swa_points({"start": 35, "interval": "10iterations"}, total=100)
    assert [i for i in range(1, 101) if iterations(at(i))] == [40, 50, 60, 70, 80, 90, 100]
    epochs = swa_points({"start": "2epoch", "interval": "1epoch"}, total=100)
    assert epochs.start_epoch == 2.0
    assert not epochs(at(20, epoch=1.0, previous=0.9)) and epochs(at(40, epoch=2.0, previous=1.9))
    assert not epochs(at(41, epoch=2.05, previous=2.0)) and epochs(at(60, epoch=3.0, previous=2.95))
    assert swa_points({"start": 0, "interval": 5}, total=100).start_iteration == 0
    assert swa_points({"start": None, "interval": "1epoch"}, total=100) is None


@pytest.mark.parametrize("section, line", [
    ({"start": 1.5, "interval": 1}, "trainer.swa.start=1.5: a number with a point is a fraction "
                                    "of the run, in [0, 1)"),
    ({"start": "3epochs!", "interval": 1}, "trainer.swa.start=3epochs! is neither a fraction of "
                                           "the run (0.75), a number of iterations (1500) nor "
                                           "of epochs (3epoch, 0.5epoch)"),
    ({"start": -2, "interval": 1}, "trainer.swa.start=-2 is neither a fraction"),
    ({"start": 3, "interval": "often"}, "trainer.swa.interval=often is neither an integer "
                                        "number of iterations"),
])
def test_a_bad_swa_section_is_refused(section, line):
    with pytest.raises(ConfigError) as raised:
        swa_points(section, total=100)
    assert str(raised.value).startswith(line)


def test_an_objective_on_averaged_weights_the_run_lacks_is_refused(tmp_path):
    check_objective("val/ema/loss", 0.9)
    with pytest.raises(ConfigError, match="the SWA weights are measured once, after training"):
        check_objective("val/swa/accuracy", 0.9)
    with pytest.raises(JobFailed) as raised:
        trainer_run.train(["objective.metric=val/ema/accuracy", "trainer.max_iterations=5"],
                          run_dir=tmp_path / "run")
    assert str(raised.value) == ("objective.metric=val/ema/accuracy measures the EMA weights; "
                                 "set trainer.ema_decay (e.g. 0.999) to keep them")
    assert raised.value.exit_code == 2 and not (tmp_path / "run").exists()
