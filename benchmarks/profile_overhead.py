"""What ``trainer.profile`` costs: the default run (1000 iterations of the MLP on spirals) with
profiling off and on, and what the instrumentation left in the loop costs when it is off.

- Runs: ``trainer-run trainer.progress=false`` with ``trainer.profile=false`` and ``true``,
  alternating ``--rounds`` times (the machine may be shared); each run's training time is its
  ``summary.json`` ``elapsed_s`` (the loop, from its first iteration to the summary). The
  best and the median of each are printed.
- Off: every marked stage calls :class:`~trainer_run.profiling.NullProfiler`'s ``stage``
  and enters the context it returns. Its cost per stage is timed here, and multiplied by the
  stages one iteration of the profiled run entered (counted by a
  :class:`~trainer_run.profiling.Profiler` subclass over the same default run, built
  in this process), gives the off-cost per iteration.

    python benchmarks/profile_overhead.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

from trainer_run.profiling import NullProfiler


def run_once(folder: Path, profile: bool) -> float:
    """The training time (``elapsed_s``) of one default run with ``trainer.profile``."""
    out = Path(tempfile.mkdtemp(dir=folder))
    subprocess.run([sys.executable, "-m", "trainer_run.cli", "trainer.progress=false",
                    f"trainer.profile={str(profile).lower()}", f"hydra.run.dir={out}"],
                   check=True, capture_output=True)
    return json.loads((out / "summary.json").read_text())["elapsed_s"]


def null_stage_seconds(number: int = 1_000_000) -> float:
    """Seconds per ``with NullProfiler().stage(name): pass``."""
    profiler = NullProfiler()
    timer = timeit.Timer("with stage('data'): pass", globals={"stage": profiler.stage})
    return min(timer.repeat(5, number)) / number


def stages_per_iteration(folder: Path) -> float:
    """Stage entries per iteration of the default run (``profile.json`` cannot say; a run's
    count is read from the one this function makes with a counting profiler)."""
    out = folder / "counted"
    code = (
        "import sys, json\n"
        "from trainer_run import profiling as profile\n"
        "class Counting(profile.Profiler):\n"
        "    entered = 0\n"
        "    def enter(self, name):\n"
        "        Counting.entered += 1\n"
        "        super().enter(name)\n"
        "profile.Profiler = Counting\n"
        "import trainer_run.runner.build as build\n"
        "build.Profiler = Counting\n"
        "from trainer_run.cli.entry import main\n"
        f"sys.argv = ['trainer-run', 'trainer.progress=false', 'trainer.profile=true', "
        f"'hydra.run.dir={out}']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    open('{folder / 'count'}', 'w').write(str(Counting.entered))\n")
    subprocess.run([sys.executable, "-c", code], capture_output=True)
    iterations = json.loads((out / "summary.json").read_text())["iteration"]
    return int((folder / "count").read_text()) / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for profile in (False, True):
                times[profile].append(run_once(folder, profile))
        for profile, values in times.items():
            print(f"trainer.profile={str(profile).lower():5}  best {min(values):.3f} s  "
                  f"median {statistics.median(values):.3f} s  over {len(values)} runs of 1000 "
                  f"iterations")
        per_stage = null_stage_seconds()
        stages = stages_per_iteration(folder)
        off = per_stage * stages
        best = min(times[False]) / 1000
        print(f"off: {per_stage * 1e9:.0f} ns per stage x {stages:.1f} stages per iteration = "
              f"{off * 1e6:.2f} us per iteration, {100 * off / best:.3f}% of an iteration "
              f"({best * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
