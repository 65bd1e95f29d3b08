"""After training, as a user's own model and a careful user meet it (issue 36 items 9, 12, 14):
``trainer-eval`` and ``load_model`` import the user's model from the folder the run was trained
in as ``trainer-run`` did; ``init_from=<run>`` fine-tunes the source run's model, not the
default one; ``predict`` warns when its inputs cannot be the run's raw inputs and refuses
inputs that are not numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
from helpers import run_cli

QUIET = ("trainer.progress=false",)
SHORT = ("trainer.max_iterations=20", *QUIET)

MY_MODELS = textwrap.dedent("""\
    from trainer_run import functions as F
    from trainer_run.models import Linear, Module

    class TwoLayer(Module):
        def __init__(self, in_size, out_size, backend, hidden=32):
            self.fc1 = Linear(in_size, hidden, backend)
            self.fc2 = Linear(hidden, out_size, backend)

        def forward(self, x):
            return self.fc2(F.tanh(self.fc1(x)))

        def __call__(self, x, t):
            y = self.forward(x)
            return {"loss": F.softmax_cross_entropy(y, t), "accuracy": F.accuracy(y, t)}
    """)


def _script(name: str) -> str:
    """The console script ``name`` of this environment: started as the user starts it, so that
    nothing (``python -m``, ``python -c``) puts the current folder on the import path for it."""
    script = Path(sys.executable).parent / name
    assert script.exists()
    return str(script)


@pytest.fixture(scope="module")
def own_model(tmp_path_factory) -> Path:
    """A folder holding my_models.py and a run of its TwoLayer, trained from that folder as the
    README's "Your model" says, with best and last weights the same (one evaluation)."""
    folder = tmp_path_factory.mktemp("own").resolve()
    (folder / "my_models.py").write_text(MY_MODELS)
    result = subprocess.run([_script("trainer-run"), "+model._target_=my_models.TwoLayer",
                             "+model.hidden=16", *SHORT, "hydra.run.dir=run"], cwd=folder,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.parametrize("split, checkpoint", [("val", "best"), ("val", "last")])
def test_trainer_eval_imports_the_users_model_from_the_folder_it_was_trained_in(
        own_model, split, checkpoint):
    result = subprocess.run([_script("trainer-eval"), "run", f"split={split}",
                             f"checkpoint={checkpoint}"], cwd=own_model, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    written = Path(own_model / result.stdout.split("written: ")[1].strip())
    metrics = json.loads(written.read_text())["metrics"]
    summary = json.loads((own_model / "run" / "summary.json").read_text())
    assert metrics["val/accuracy"] == pytest.approx(summary["val/accuracy"])
    assert metrics["val/loss"] == pytest.approx(summary["val/loss"], rel=1e-5)


def test_load_model_in_a_script_elsewhere_imports_the_users_model_from_the_current_folder(
        own_model, tmp_path):
    script = tmp_path / "scripts" / "predict.py"  # its own folder, not the run's, is sys.path[0]
    script.parent.mkdir()
    script.write_text("import sys, trainer_run\n"
                      "trained = trainer_run.load_model('run')\n"
                      "print(type(trained.model).__module__, trained.predict([[0.5, -0.5]]).shape)\n")
    result = subprocess.run([sys.executable, str(script)], cwd=own_model, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["my_models", "(1,", "2)"]


def test_a_model_that_cannot_be_imported_from_the_current_folder_is_still_one_line(own_model, tmp_path):
    result = subprocess.run([_script("trainer-eval"), str(own_model / "run"), "split=val"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "error: model._target_=my_models.TwoLayer: cannot import it (No module named 'my_models'); "
        "a module of your own must be importable from the folder you run the command in"]
