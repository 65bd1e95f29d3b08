"""A small trained run, copied for each test, and the commands run on it as a user would: the
helpers of the tests that prepare a run folder as an adversary would (links, special files,
anchors) and check that nothing outside it changes."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

QUICK = ("trainer.max_iterations=6", "trainer.checkpoint_interval=3", "trainer.eval_interval=3",
         "trainer.log_interval=3", "trainer.progress=false", "dataset.size=200")
MEMORY = 2 << 30
"""The address space a command gets (RLIMIT_AS): a run folder must not make it need more."""
RESIDENT = 1 << 30
"""The most memory a command may hold (its peak resident size) on any run folder."""
MEASURED = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
            "sys.stderr.write('\\nmaxrss=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
            "sys.exit(done.returncode)")
"""Runs a command and adds its peak resident size (KiB) to its stderr, as the last line."""
COMMANDS = {"trainer-run": "trainer_run.cli", "trainer-eval": "trainer_run.cli.evaluate",
            "trainer-report": "trainer_run.cli.report_command", "trainer-export": "trainer_run.cli.export"}


def environment(keys: Path) -> dict:
    """The environment of a user whose key lives under ``keys``."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(keys)}
    env.pop("PYTHONPATH", None)
    return env


def make_run(folder: Path, keys: Path, *overrides: str) -> Path:
    """A run trained for 6 iterations (checkpoints at 3 and 6, a best one) in ``folder``/run."""
    run = folder / "run"
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *QUICK, *overrides,
                           f"hydra.run.dir={run}"], env=environment(keys), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return run


def copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def command(name: str, *arguments, keys: Path, cwd: Path, timeout: float = 120):
    """``name`` (a key of :data:`COMMANDS`, or ``python`` for ``python -c``) run with
    ``arguments`` under :data:`MEMORY` and ``timeout`` seconds; the finished process, with
    ``elapsed`` (seconds) and ``peak`` (its peak resident size, bytes) added."""
    program = ["-c"] if name == "python" else ["-m", COMMANDS[name]]
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURED, sys.executable, *program,
                           *map(str, arguments)], cwd=cwd, env=environment(keys),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=_bounded)
    done.elapsed = time.monotonic() - start
    done.stderr, _, peak = done.stderr.rpartition("\nmaxrss=")
    done.peak = int(peak) * 1024
    return done


def load_model_script(run: Path, checkpoint: str | None = None) -> str:
    """Python that calls ``trainer_run.load_model`` on ``run`` and prints an ``error:`` line
    (exit 2) for the ConfigError it raises, as the commands do."""
    return ("import sys, trainer_run\nfrom trainer_run.errors import ConfigError\n"
            f"try:\n    trainer_run.load_model({str(run)!r}, {checkpoint!r})\n"
            "except ConfigError as e:\n    print('error:', e, file=sys.stderr)\n    sys.exit(2)\n")


def error_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def snapshot(root: Path) -> dict:
    """Every file and folder under ``root`` (links not followed) by path, with its bytes and
    modification time: what must not change."""
    found = {}
    for path in sorted(Path(root).rglob("*")):
        stat = os.lstat(path)
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(root))] = (content, stat.st_mtime_ns)
    return found
