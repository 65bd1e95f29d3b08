"""What a run and trainer-report say and write, as a careful user checks it (issue 36 items 15,
16, 18): ``summary.json``'s ``samples_per_s`` is the training throughput alone; trainer-report
writes its plot where the user asks, by default in the current folder, never into a run folder
it reads; ``precision=fp16`` on the NumPy backend warns at start that it is slow."""

from __future__ import annotations

import pytest
from helpers import run_cli

QUIET = ("trainer.progress=false",)


@pytest.mark.parametrize("precision, model, warned", [
    ("fp16", "mlp", True), ("fp16", "logistic_regression", True),
    ("fp32", "mlp", False), (None, "mlp", False)])
def test_fp16_on_numpy_warns_once_at_start_that_it_is_slow(tmp_path, precision, model, warned):
    chosen = [f"precision={precision}"] if precision else []
    result = run_cli("backend=numpy", *chosen, f"model={model}", "trainer.max_iterations=3",
                     *QUIET, f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "fp16" in line]
    if warned:
        assert said == ["warning: precision=fp16 on the NumPy backend trains many times slower than "
                        "fp32 (NumPy has no fast float16 arithmetic): choose precision=fp32 on the "
                        "CPU, or backend=cupy to train in fp16 on a GPU"]
    else:
        assert said == [] and "warning:" not in result.stderr
