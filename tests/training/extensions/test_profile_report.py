"""ProfileReport (training/extensions/profile_report.py) on a fake clock: the report's derived columns
and its file."""

import json

from tests.test_profiling import FakeClock
from trainer_run.profiling import Profiler
from trainer_run.training.extensions import ProfileReport


class _Trainer:
    def __init__(self, out, iteration):
        self.out = str(out)
        self.updater = type("U", (), {"iteration": iteration})()


def test_report_columns_and_file(tmp_path):
    profiler = Profiler(FakeClock(0, 1, 3, 4, 5, 8))
    profiler.start()                                   # 0
    with profiler.stage("forward"):                    # 1
        pass                                           # 3: forward 2
    with profiler.stage("extensions/snapshot"):        # 4
        pass                                           # 5: snapshot 1
    report = ProfileReport(profiler, notes={"communication": "none"}, console=_Quiet())
    report.initialize(_Trainer(tmp_path, 10))
    report.finalize(_Trainer(tmp_path, 14))            # 8: other 2 + 3
    saved = json.loads((tmp_path / "profile.json").read_text())
    assert saved["session_s"] == 8 and saved["iterations"] == 4
    assert saved["stages"]["forward"] == {"total_s": 2, "percent": 25.0, "per_iteration_ms": 500.0}
    assert saved["stages"]["extensions"]["total_s"] == 1
    assert saved["stages"]["other"]["total_s"] == 5
    assert saved["extensions"] == {"snapshot": 1}
    assert saved["notes"] == {"communication": "none"}


class _Quiet:
    def print(self, *args, **kwargs):
        pass
