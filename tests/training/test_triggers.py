"""The triggers (training/triggers.py): Chainer's interval rules."""

from trainer_run.training import IntervalTrigger, StopTrigger


class _Iterator:
    def __init__(self, epoch_detail):
        self.iteration, self.epoch_detail, self.previous_epoch_detail = 0, epoch_detail, None


class _T:
    def __init__(self, iteration, previous, current):
        self.updater = _Iterator(current)
        self.updater.iteration = iteration
        self.updater.previous_epoch_detail = previous


def test_interval_trigger_rules():
    every3 = IntervalTrigger(3)
    assert [every3(_T(i, None, 0)) for i in range(1, 7)] == [False, False, True, False, False, True]
    per_epoch = IntervalTrigger(1, "epoch")
    assert per_epoch(_T(0, 0.9, 1.2)) and not per_epoch(_T(0, 1.2, 1.5))
    half = IntervalTrigger(0.5, "epoch")
    assert half(_T(0, 0.4, 0.6)) and not half(_T(0, 0.6, 0.9))
    stop = StopTrigger(max_iterations=5, max_epochs=2)
    assert not stop(_T(4, None, 1.9)) and stop(_T(5, None, 1.0)) and stop(_T(1, None, 2.0))
    assert stop.total_iterations(iterations_per_epoch=2.0) == 4
