"""Helpers the tests share (plain functions; the fixtures and hooks are in ``conftest.py``):
running the ``trainer-run`` command in a subprocess, preparing synthetic sets, reading what a
run wrote."""

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


def make_synthetic(name: str, size: int, val_fraction: float, rng, **options):
    """The synthetic set ``name`` (``trainer_run.data.<name>``) as a run prepares it, with
    ``val_fraction`` held out."""
    from trainer_run import data

    generator = getattr(data, name)
    return data.prepare(generator(size, rng, **options), rng, val_fraction,
                        n_classes=data.declared_classes(generator, options))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def run_files(directory: Path) -> dict:
    """The files a run wrote in ``directory`` by name with their bytes (not the lock file, which
    records the last process that held the directory)."""
    return {p.name: p.read_bytes() for p in Path(directory).iterdir()
            if p.is_file() and p.name != ".lock"}


def load_npz(path: Path) -> dict:
    with numpy.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def one_error_line(result) -> str:
    """The one line ``error: ...`` a refused command printed (exit 2, no traceback)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
