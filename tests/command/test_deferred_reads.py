"""``backend.deferred=true`` from the command line (on NumPy, as on a GPU): a run whose loss
breaks stops at the next read, names the update that broke, and leaves the weights the run
that reads at once leaves."""

from __future__ import annotations

import json

import numpy as np
from helpers import load_npz, run_cli


def test_the_command_with_deferred_reads_stops_where_the_loss_broke(tmp_path):
    """``backend.deferred=true`` on NumPy, as on a GPU: a rate of 1e30 breaks the loss of
    update 2; the log row of iteration 10 reads it, names iteration 2, and model.npz holds the
    weights after update 1, as the run that reads at once leaves them."""
    runs = {}
    for deferred in ("true", "false"):
        out = tmp_path / deferred
        result = run_cli("optimizer.learning_rate=1e30", "trainer.max_iterations=40",
                         "trainer.log_interval=10", "trainer.progress=false",
                         f"backend.deferred={deferred}", f"hydra.run.dir={out}")
        assert result.returncode == 3, result.stderr
        assert "the training loss is nan at iteration 2" in result.stderr
        runs[deferred] = out
    summary = json.loads((runs["true"] / "summary.json").read_text())
    assert (summary["status"], summary["iteration"]) == ("diverged", 10)
    got, expected = load_npz(runs["true"] / "model.npz"), load_npz(runs["false"] / "model.npz")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
