"""Time and peak memory of loading an all-numeric CSV, against ``numpy.loadtxt`` alone.

Writes a CSV of ``--rows`` rows (300,000) of 10 float features with 6 to 9 significant
digits (negative numbers and exponents among them) and an integer class label, under a
header row, into a temporary folder. Then, each in a fresh process:

- **loader**: ``trainer_run.data.csv_files.csv(path)``, the function ``dataset=csv`` calls;
- **loadtxt** (the peer): ``numpy.loadtxt(path, delimiter=",", skiprows=1, dtype=float32)``;
- **command** (unless ``--no-command``): ``trainer-run dataset=csv dataset.path=...
  trainer.max_iterations=1`` as a whole (start-up, the checks, one update, the run's files).

Each child prints its time (the best of ``--rounds``, the loader's and the peer's) and its
``VmHWM`` from ``/proc/self/status``, the kernel's exact peak of the resident set, with
``VmRSS`` just before loading (the interpreter and the libraries); ``grew`` is the peak less
that. The float32 data is rows x 11 columns x 4 bytes. The machine's load average is printed
before and after: on a shared machine times are indicative, memory is not affected.

    python benchmarks/csv_load.py [--rows 300000] [--rounds 3] [--no-command]
    python benchmarks/csv_load.py --rows 2200000 --rounds 1 --no-command   # a ~214 MB CSV
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
from proc_status import MIB, status

FEATURES = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-command", action="store_true", help="skip the whole-command timing")
    p.add_argument("--side", choices=["loader", "loadtxt"], help="run one side in this process")
    p.add_argument("--path", help="with --side: the CSV")
    return p.parse_args()


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """A header and ``rows`` rows of 10 varied floats and an integer label, in blocks."""
    rng = numpy.random.default_rng(seed)
    with open(path, "w") as f:
        f.write(",".join([f"f{i}" for i in range(FEATURES)] + ["label"]) + "\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            x = rng.normal(size=(n, FEATURES)) * 10.0 ** rng.integers(-3, 4, size=(n, FEATURES))
            y = rng.integers(0, 10, size=(n, 1))
            body = numpy.hstack([x, y]).astype(object)
            fmt = ",".join(["%.7g"] * FEATURES + ["%d"])
            f.write("\n".join(fmt % tuple(row) for row in body) + "\n")


def side(args) -> None:
    """One side's best time over the rounds and its memory, as one JSON line."""
    if args.side == "loader":
        from trainer_run.data.csv_files import csv

        def load():
            return csv(args.path)
    else:
        def load():
            return numpy.loadtxt(args.path, delimiter=",", skiprows=1, dtype=numpy.float32)
    before = status()["VmRSS"] / MIB
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        result = load()
        times.append(time.perf_counter() - start)
        del result
    print(json.dumps({"seconds": min(times), "before_mib": before, "peak_mib": status()["VmHWM"] / MIB}))


def run_side(name: str, path: Path, rounds: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--side", name, "--path", str(path),
                          "--rounds", str(rounds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_command(path: Path) -> float:
    """Seconds of a whole ``trainer-run`` of one update on the CSV."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainer_run.cli", "dataset=csv", f"dataset.path={path}",
                    "trainer.max_iterations=1", "trainer.progress=false", "logger=[]"],
                   cwd=path.parent, capture_output=True, text=True, check=True)
    return time.perf_counter() - start


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main():
    args = parse_args()
    if args.side:
        return side(args)
    print(f"load average before: {load_average()} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "table.csv"
        write_csv(path, args.rows)
        data_mib = args.rows * (FEATURES + 1) * 4 / 2**20
        print(f"CSV: {args.rows} rows x {FEATURES + 1} columns, {path.stat().st_size / 2**20:.1f} MiB; "
              f"float32 data {data_mib:.1f} MiB")
        results = {name: run_side(name, path, args.rounds) for name in ("loader", "loadtxt")}
        for name, r in results.items():
            grew = r["peak_mib"] - r["before_mib"]
            print(f"{name:8s} {r['seconds']:7.3f} s   peak {r['peak_mib']:7.1f} MiB "
                  f"(grew {grew:7.1f} MiB = {grew / data_mib:.2f}x the data; "
                  f"peak {r['peak_mib'] / data_mib:.2f}x)")
        ratio = results["loader"]["seconds"] / results["loadtxt"]["seconds"]
        print(f"loader / loadtxt time: {ratio:.2f}x ({'faster' if ratio <= 1 else 'slower'})")
        if not args.no_command:
            print(f"command (trainer.max_iterations=1): {run_command(path):.2f} s")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
