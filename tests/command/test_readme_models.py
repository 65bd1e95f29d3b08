"""The README's own model examples (``my_models.py`` in the README and docs/models.md), as
written there, trained by the installed ``trainer-run`` in a fresh folder and predicting there
with ``load_model(run).predict``: the outputs are computed here in float64 NumPy from the
run's ``model.npz``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_npz

README = Path(__file__).resolve().parents[2] / "README.md"


SHORT = ("trainer.max_iterations=12", "trainer.progress=false", "trainer.eval_interval=6")


def _readme_block(containing: str) -> str:
    """The Python block of the README or the models guide that holds ``containing``."""
    text = README.read_text() + (README.parent / "docs" / "models.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, containing
    return found[0]


def _script() -> str:
    installed = Path(sys.executable).parent / "trainer-run"
    return str(installed) if installed.exists() else shutil.which("trainer-run")


PREDICT = """
import sys, numpy, trainer_run
x = numpy.random.default_rng(0).normal(size=(9, 2)).astype(numpy.float32)
numpy.save("outputs.npy", trainer_run.load_model("run").predict(x, batch_size=4))
numpy.save("one.npy", trainer_run.load_model("run").predict(x[0]))
numpy.save("x.npy", x)
"""


@pytest.mark.parametrize("name", ["TwoLayer", "Softmax"])
def test_the_readmes_models_train_and_predict_from_the_command_line(tmp_path, name):
    """The ``my_models.py`` examples of the README and the models guide, as written there, trained on the
    default spirals by the installed command in a fresh folder and predicting there."""
    (tmp_path / "my_models.py").write_text(_readme_block(f"class {name}"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    extra = ["+model.hidden=16"] if name == "TwoLayer" else []
    result = subprocess.run([_script(), f"+model._target_=my_models.{name}", *extra, "hydra.run.dir=run",
                             *SHORT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    done = subprocess.run([sys.executable, "-c", PREDICT], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    p = {k: v.astype(np.float64) for k, v in load_npz(tmp_path / "run" / "model.npz").items()}
    x = np.load(tmp_path / "x.npy").astype(np.float64)
    if name == "TwoLayer":
        reference = np.tanh(x @ p["fc1/W"].T + p["fc1/b"]) @ p["fc2/W"].T + p["fc2/b"]
    else:
        reference = x @ p["l/W"].T + p["l/b"]
    outputs = np.load(tmp_path / "outputs.npy")
    assert outputs.shape == (9, 2)
    np.testing.assert_allclose(outputs, reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "one.npy"), reference[0], rtol=1e-5, atol=1e-6)
