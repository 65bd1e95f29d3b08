"""The run's clock (training/clock.py): a run counts from its own start (a run from Python when
it is built, however long its process lived before); the command's process is its run, so its
first job counts from the process's start (its age from ``/proc/self/stat``, bounded by the
module's import), a later job when it asks; ``process_age`` read from a ``/proc/self/stat``
line the test writes, and from this process against ``ps``."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from run_folders import QUICK, environment

from trainer_run.training import clock

IMPORTED = 100.0                # the perf_counter reading at the module's import, in these tests


@pytest.fixture
def first_job(monkeypatch):
    """A command's process whose first job has not asked yet, its module imported at
    ``IMPORTED`` and ``perf_counter`` reading ``now[0]``."""
    now = [150.0]
    monkeypatch.setattr(clock, "_process_is_the_job", False)
    clock.from_process_start()
    monkeypatch.setattr(clock, "_IMPORTED", IMPORTED)
    monkeypatch.setattr(clock.time, "perf_counter", lambda: now[0])
    return now


@pytest.mark.parametrize(("age", "origin"), [
    (80.0, 70.0),       # started 30 s before the import: start-up counts
    (50.0, 100.0),      # exactly at the import
    (20.0, 100.0),      # a clock that says later than the import: the import bounds it
    (None, 100.0),      # no /proc: the import
])
def test_the_commands_first_job_starts_with_the_process_at_the_latest_at_the_import(
        first_job, monkeypatch, age, origin):
    monkeypatch.setattr(clock, "process_age", lambda: age)
    assert clock.job_origin() == origin


def test_a_later_job_of_the_process_starts_when_it_asks(first_job, monkeypatch):
    monkeypatch.setattr(clock, "process_age", lambda: 80.0)
    assert clock.job_origin() == 70.0
    first_job[0] = 400.0
    assert clock.job_origin() == 400.0
    first_job[0] = 900.25
    assert clock.job_origin() == 900.25


def test_a_job_outside_the_command_starts_when_it_asks_however_old_its_process(monkeypatch):
    monkeypatch.setattr(clock, "_process_is_the_job", False)
    monkeypatch.setattr(clock, "process_age", lambda: 3600.0)   # a notebook's kernel, an hour old
    monkeypatch.setattr(clock.time, "perf_counter", lambda: 5000.0)
    assert clock.job_origin() == 5000.0


def test_a_run_from_python_counts_from_its_start_not_from_its_process(tmp_path):
    """A kernel that idled 2 s after the import: the run's first row and its summary count
    from the run (a 6-iteration run takes well under 1.5 s), not the 2 s before it."""
    run = tmp_path / "run"
    code = ("import time, trainer_run; time.sleep(2); "
            f"trainer_run.train({list(QUICK)!r}, run_dir={str(run)!r})")
    done = subprocess.run([sys.executable, "-c", code], env=environment(tmp_path / "keys"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    assert 0 < rows[0]["elapsed_s"] < 1.5
    assert rows[0]["elapsed_s"] < summary["elapsed_s"] < 2


def stat_line(starttime_ticks: int, comm: str = "python") -> str:
    """A ``/proc/<pid>/stat`` line whose field 22 is ``starttime_ticks``."""
    fields = ["S", "1"] + [str(n) for n in range(5, 22)] + [str(starttime_ticks), "12345", "67"]
    return f"4242 ({comm}) " + " ".join(fields)


@pytest.fixture
def proc(monkeypatch):
    """``/proc/self/stat`` reads ``text[0]``, the boot clock 1000 s, 100 ticks a second."""
    text = [""]

    def fake_open(path, *args, **kwargs):
        assert path == "/proc/self/stat"
        return io.StringIO(text[0])

    monkeypatch.setattr(clock, "open", fake_open, raising=False)
    monkeypatch.setattr(clock.time, "clock_gettime", lambda which: 1000.0)
    monkeypatch.setattr(clock.os, "sysconf", lambda name: 100)
    return text


@pytest.mark.parametrize("comm", ["python", "my (odd) name", "a) b c"])
def test_process_age_is_the_boot_clock_less_field_22_in_seconds(proc, comm):
    proc[0] = stat_line(90_000, comm)       # started at 900 s of the boot clock
    assert clock.process_age() == pytest.approx(100.0)
    proc[0] = stat_line(100_000, comm)      # started now
    assert clock.process_age() == 0.0


@pytest.mark.parametrize("text", [
    stat_line(100_001),                 # after now: a clock that disagrees
    "4242 (python) S 1 2 3",            # too few fields
    "4242 (python) S " + "x " * 30,     # no number
    "no parenthesis here",
], ids=["later-than-now", "short", "not-a-number", "no-comm"])
def test_process_age_is_none_where_the_system_does_not_say(proc, text):
    proc[0] = text
    assert clock.process_age() is None


def test_process_age_is_none_without_proc(monkeypatch):
    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(path)

    monkeypatch.setattr(clock, "open", no_proc, raising=False)
    assert clock.process_age() is None


@pytest.mark.skipif(shutil.which("ps") is None or not os.path.exists("/proc/self/stat"),
                    reason="needs /proc and ps")
def test_this_process_age_agrees_with_ps_and_runs_with_perf_counter():
    etimes = int(subprocess.run(["ps", "-o", "etimes=", "-p", str(os.getpid())],
                                capture_output=True, text=True, check=True).stdout)
    age = clock.process_age()
    assert etimes - 0.05 <= age < etimes + 1.05        # ps floors to whole seconds
    t0 = time.perf_counter()
    time.sleep(0.05)
    later = clock.process_age()
    assert later - age == pytest.approx(time.perf_counter() - t0, abs=0.02)
