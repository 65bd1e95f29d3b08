"""The profiler's accounting (training/profile.py) on a fake clock: each moment charged to the
innermost open stage, the rest to ``other``, everything adding up to the time since ``start``."""


import pytest

from trainer_run.profiling import NullProfiler, Profiler


class FakeClock:
    """Returns the given times one by one."""

    def __init__(self, *times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)


def test_time_goes_to_the_innermost_stage_and_the_rest_to_other():
    synced = []
    clock = FakeClock(10, 11, 13, 14, 16, 20, 21, 22, 23, 24.5, 30, 31)
    profiler = Profiler(clock, synchronize=lambda: synced.append(1))
    profiler.start()                                  # 10
    with profiler.stage("data"):                      # 11: other 1
        pass                                          # 13: data 2
    with profiler.stage("extensions"):                # 14: other 1
        with profiler.stage("extensions/evaluator"):  # 16: extensions 2
            pass                                      # 20: evaluator 4
    with profiler.stage("update"):                    # 21: extensions 1; 22: other 1
        with profiler.stage("communication"):         # 23: update 1
            pass                                      # 24.5: communication 1.5
    assert profiler.elapsed() == 21                   # 30: update 5.5; 31: other 1
    assert profiler.totals == {"other": 4, "data": 2, "extensions": 3, "extensions/evaluator": 4,
                               "update": 6.5, "communication": 1.5}
    assert profiler.by_stage() == {"data": 2, "forward": 0, "backward": 0, "communication": 1.5,
                                   "update": 6.5, "extensions": 7, "other": 4}
    assert profiler.extensions() == {"evaluator": 4}
    assert sum(profiler.by_stage().values()) == 21
    assert len(synced) == 11  # every boundary and the final reading, not start


def test_nothing_is_charged_before_start():
    profiler = Profiler(FakeClock(5, 6, 7))
    with profiler.stage("data"):
        pass
    assert profiler.totals == {}
    profiler.start()                                 # 5
    with profiler.stage("data"):                     # 6
        pass                                         # 7
    assert profiler.totals == {"other": 1, "data": 1}


def test_the_time_before_start_since_the_origin_is_start_up():
    profiler = Profiler(FakeClock(5, 6, 9, 9))
    profiler.origin = 2
    profiler.start()                                 # 5: start-up 3
    with profiler.stage("data"):                     # 6: other 1
        pass                                         # 9: data 3
    assert profiler.elapsed() == 7 and profiler.started == 2  # 9: other 0
    assert profiler.by_stage()["start-up"] == 3 and list(profiler.by_stage())[0] == "start-up"
    assert sum(profiler.by_stage().values()) == 7


def test_an_exception_closes_the_stage():
    profiler = Profiler(FakeClock(0, 1, 4, 6))
    profiler.start()
    with pytest.raises(ValueError), profiler.stage("forward"):
        raise ValueError
    assert profiler.elapsed() == 6
    assert profiler.totals == {"other": 3, "forward": 3}


def test_the_null_profiler_does_nothing():
    profiler = NullProfiler()
    profiler.start()
    with profiler.stage("data") as inside:
        assert inside is None
    assert profiler.stage("data") is profiler.stage("update")
    assert not profiler.enabled
