"""Shared helpers: running the ``trainer-run`` command in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy


def run_cli(*args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Runs ``trainer-run <args>`` (as ``python -m trainer_run.cli``) and captures its output."""
    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def load_npz(path: Path) -> dict:
    with numpy.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
