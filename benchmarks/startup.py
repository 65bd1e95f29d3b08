"""Start-up: from the command to the first iteration, against ``python -c "import numpy"``.

Each round, alternating (the machine may be shared), runs:

- the peer: ``python -c "import numpy"`` (wall time of the process);
- ours: ``trainer-run trainer.max_iterations=1 trainer.profile=true``; its ``profile.json``
  gives ``start-up`` (from the process's creation to the first iteration) and the first
  iteration's own time (data, forward, backward, update); the process's wall time, which
  adds the closing work (the checkpoint, the summary, the table), is printed too;
- Hydra's floor: ``@hydra.main`` over our ``configs/`` with a task that returns at once
  (what composing our config costs any Hydra application: Hydra composes it twice, once
  to read ``hydra.mode`` and once for the job).

Medians are printed, with ours minus the peer against the target (at most 0.6 s more). The
commands run with Python's bytecode cache on, as a user's do (``PYTHONDONTWRITEBYTECODE`` is
dropped from their environment, and a first round, not counted, writes the cache).

    python benchmarks/startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainer_run.compose.options import CONFIGS

TARGET_S = 0.6
PEER = 'peer: python -c "import numpy"'
FIRST_ITERATION = ("data", "forward", "backward", "communication", "update")
HYDRA_FLOOR = f"""
import hydra
@hydra.main(config_path={str(CONFIGS)!r}, config_name="config", version_base="1.3")
def task(cfg):
    return None
task()
"""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def ours(folder: Path) -> tuple[float, float, float]:
    """(start-up, start-up + first iteration, wall) of one ``trainer-run`` in seconds."""
    out = Path(tempfile.mkdtemp(dir=folder))
    command = [sys.executable, "-m", "trainer_run.cli", "trainer.max_iterations=1",
               "trainer.profile=true", f"hydra.run.dir={out}"]
    elapsed = wall(command)
    stages = json.loads((out / "profile.json").read_text())["stages"]
    startup = stages["start-up"]["total_s"]
    first = sum(stages[name]["total_s"] for name in FIRST_ITERATION if name in stages)
    return startup, startup + first, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {k: [] for k in ("numpy", "startup", "first", "wall", "hydra")}
    with tempfile.TemporaryDirectory() as folder:
        ours(Path(folder))  # writes the bytecode cache
        for _ in range(args.rounds):
            rows["numpy"].append(wall([sys.executable, "-c", "import numpy"]))
            startup, first, elapsed = ours(Path(folder))
            rows["startup"].append(startup)
            rows["first"].append(first)
            rows["wall"].append(elapsed)
            rows["hydra"].append(wall([sys.executable, "-c", HYDRA_FLOOR,
                                       f"hydra.run.dir={folder}/floor", "hydra.output_subdir=null"]))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"medians of {args.rounds} rounds, seconds")
    print(f"{PEER:<48}{med['numpy']:>8.3f}")
    print(f"{'ours: command to first iteration':<48}{med['startup']:>8.3f}"
          f"   +{med['startup'] - med['numpy']:.3f} over the peer (target +{TARGET_S})")
    print(f"{'ours: command to the end of the first iteration':<48}{med['first']:>8.3f}"
          f"   +{med['first'] - med['numpy']:.3f}")
    print(f"{'ours: whole command (1 iteration, its closing)':<48}{med['wall']:>8.3f}")
    print(f"{'floor: an empty @hydra.main over our configs':<48}{med['hydra']:>8.3f}"
          f"   +{med['hydra'] - med['numpy']:.3f}")


if __name__ == "__main__":
    main()
