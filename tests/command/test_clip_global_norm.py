"""``updater.clip_global_norm`` from the command line: the first SGD step of a clipped run has
the norm ``lr * rescale_grad * max_norm`` (``rescale_grad`` applying after the clip, as in
MXNet's recipe); a bad value is one line and nothing is written."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_npz, run_cli

ONE_STEP = ("optimizer=sgd", "optimizer.momentum=0", "optimizer.wd=0", "trainer.max_iterations=1",
            "trainer.progress=false")


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """The default run's initial parameters: one update at learning rate 0."""
    out = tmp_path_factory.mktemp("start")
    done = run_cli(*ONE_STEP, "optimizer.learning_rate=0", f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    return load_npz(out / "model.npz")


def step_norm(start, run_dir) -> float:
    moved = load_npz(run_dir / "model.npz")
    return float(np.sqrt(sum(((moved[k].astype(np.float64) - start[k]) ** 2).sum() for k in start)))


@pytest.mark.parametrize("rescale", [1.0, 0.5])
def test_the_first_sgd_step_of_a_clipped_run_has_norm_lr_times_max_norm(tmp_path, start, rescale):
    """Plain SGD moves the weights by ``lr * rescale_grad * f * g``: clipped to ``max_norm``
    (1e-3, far below the gradient's norm), the step's norm is ``lr * rescale_grad * 1e-3``,
    ``rescale_grad`` applying after the clip as in MXNet's recipe."""
    done = run_cli(*ONE_STEP, "optimizer.learning_rate=0.5", "updater.clip_global_norm=1e-3",
                   f"optimizer.rescale_grad={rescale}", f"hydra.run.dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    assert step_norm(start, tmp_path) == pytest.approx(0.5 * rescale * 1e-3, rel=1e-4)


@pytest.mark.parametrize("value", ["0", "-1", "abc", "true", "inf"])
def test_a_bad_clip_global_norm_is_one_line_and_nothing_is_written(tmp_path, value):
    out = tmp_path / "run"
    done = run_cli(f"updater.clip_global_norm={value}", f"hydra.run.dir={out}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "error: updater.clip_global_norm" in done.stderr
    assert not out.exists()
