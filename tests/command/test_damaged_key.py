"""A damaged signing key (runs/signing_key.py) as the commands meet it: a new run, a resume and
``trainer-eval`` each refuse it in one line naming the key and the command that fixes it, and
write nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TINY = ("trainer.max_iterations=2", "trainer.eval_interval=2", "trainer.checkpoint_interval=2",
        "trainer.log_interval=2", "dataset.size=200")


def _command(module: str, env: dict, *arguments, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, arguments)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _one_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0][len("error: "):]


@pytest.mark.parametrize("damage", ["open", "folder", "garbage"])
def test_every_command_refuses_a_damaged_key_in_one_line_and_writes_nothing(tmp_path, damage):
    """A new run (which signs), and the resume and evaluation of a run naming the user's own
    model (which check its signature): each refuses, naming the key; no run directory is
    made and the old run is left as it was."""
    (tmp_path / "mine.py").write_text(
        "from trainer_run.models import MLP\n\n\nclass Mine(MLP):\n    pass\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(tmp_path)}
    run = tmp_path / "run"
    done = _command("trainer_run.cli", env, *TINY, "model._target_=mine.Mine", f"hydra.run.dir={run}",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    key = tmp_path / "config" / "trainer-run" / "key"
    if damage == "open":
        key.chmod(0o640)
    elif damage == "folder":
        key.parent.chmod(0o777)
    else:
        key.write_text("not a key\n")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    lines = {_one_error(_command("trainer_run.cli", env, *TINY, f"hydra.run.dir={tmp_path / 'new'}",
                                 cwd=tmp_path)),
             _one_error(_command("trainer_run.cli", env, f"resume={run}", "trainer.max_iterations=4",
                                 cwd=tmp_path)),
             _one_error(_command("trainer_run.cli.evaluate", env, run, "split=val", cwd=tmp_path))}
    assert len(lines) == 1
    line = lines.pop()
    assert str(key.parent if damage == "folder" else key) in line
    assert ("chmod 700" if damage == "folder" else "chmod 600" if damage == "open" else "rm ") in line
    assert not (tmp_path / "new").exists()
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
