"""The model's mode (training while the updater steps, evaluation while validating) and the
model summary at the start of a run and in summary.json."""

import json

import pytest
from helpers import run_cli

MODE_MODELS = '''
from trainer_run import functions as F
from trainer_run.models import Linear, Module


class Reports(Module):
    """A linear classifier that reports the mode it was called in as a metric."""

    def __init__(self, in_size, out_size, backend):
        self.inner = Inner(in_size, out_size, backend)

    def __call__(self, x, t):
        y = self.inner(x)
        return {"loss": F.softmax_cross_entropy(y, t), "mode": float(self.training),
                "inner_mode": float(self.inner.training)}


class Inner(Module):
    def __init__(self, in_size, out_size, backend):
        self.l = Linear(in_size, out_size, backend)

    def __call__(self, x):
        return self.l(x)


class Plain:
    """No Module: a training attribute of its own, set by the runner."""

    training = None

    def __init__(self, in_size, out_size, backend):
        self.l = Linear(in_size, out_size, backend)

    def params(self):
        return {"l/W": self.l.W, "l/b": self.l.b}

    def __call__(self, x, t):
        return {"loss": F.softmax_cross_entropy(self.l(x), t), "mode": float(self.training)}
'''


@pytest.mark.parametrize("target", ["my_modes.Reports", "my_modes.Plain"])
def test_the_updater_trains_in_training_mode_and_the_evaluator_in_evaluation_mode(tmp_path, target):
    (tmp_path / "my_modes.py").write_text(MODE_MODELS)
    result = run_cli(f"+model._target_={target}", "trainer.max_iterations=20", "trainer.eval_interval=10",
                     "trainer.log_interval=5", "trainer.progress=false", "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert [row["train/mode"] for row in rows] == [1.0] * 4  # back in training after each evaluation
    assert [row["val/mode"] for row in rows if "val/mode" in row] == [0.0, 0.0]
    if target.endswith("Reports"):
        assert [row["val/inner_mode"] for row in rows if "val/inner_mode" in row] == [0.0, 0.0]


def test_a_run_shows_its_model_and_records_it_in_the_summary(tmp_path):
    result = run_cli("trainer.max_iterations=5", "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # the default MLP: 2 features -> 64 -> 64 -> 2 classes
    layers = {"l1": 2 * 64 + 64, "l2": 64 * 64 + 64, "l3": 64 * 2 + 2}
    total = sum(layers.values())
    recorded = json.loads((tmp_path / "run/summary.json").read_text())["model"]
    assert recorded == {"class": "MLP", "parameters": total, "bytes": total * 4, "layers": layers}
    lines = [line.split() for line in result.stdout.splitlines()]
    assert ["model:", "MLP"] in lines and ["l2", "4,160"] in lines
    assert ["total", f"{total:,}", f"({total * 4 / 1024:.1f}", "KiB)"] in lines
