"""The memory rule (memory.py) from the command line: a size that cannot fit the machine's
available memory (a synthetic set's, a layer's) is refused in one line naming the key, before
anything is written; a training step beyond it ends the run in one line instead of being killed
by the kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import run_cli


@pytest.mark.parametrize("args, words", [
    (("dataset.size=100000000000",), "error: dataset.size=100000000000 (100000000000 examples"),
    (("model.hidden_sizes=[100000000000]",), "error: model: a parameter of shape (100000000000, 2)"),
])
def test_the_command_refuses_in_one_line_naming_the_key(tmp_path, args, words):
    result = run_cli(*args, "trainer.max_iterations=2", "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(words), result.stderr
    assert not (tmp_path / "run").exists()


def _with_available(mebibytes: int, code: str) -> str:
    """Python source that runs ``code`` in a process whose machine is said to have
    ``mebibytes`` of memory available."""
    return (f"import sys\nfrom trainer_run import memory\n"
            f"memory.available_bytes = lambda: {mebibytes} << 20\n{code}")


def test_a_training_step_beyond_available_memory_ends_the_run_in_one_line(tmp_path):
    """Each parameter of ``hidden_sizes=[1000000]`` fits in the 400 MiB the machine is said to
    have (the layer check passes), but a training step's activations (50 x 1000000 values
    each) do not: the command says so in one line, exit 2, instead of being killed by the
    kernel once memory runs out."""
    code = _with_available(400, "import runpy\nsys.argv[0] = 'trainer-run'\n"
                                "runpy.run_module('trainer_run.cli', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", code, "model.hidden_sizes=[1000000]",
                             "trainer.max_iterations=2", "trainer.progress=false", "hydra.run.dir=run"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: out of memory: unable to allocate "), result.stderr
    assert lines[0].endswith("the run needs more memory than the machine had available when it "
                             "started: lower dataset.batch_size or the model's sizes "
                             "(model.hidden_sizes, model.channels)"), result.stderr
