"""A trained model back from its run directory: rebuilt from the saved config (ours and a
user's), its parameters loaded, in evaluation mode, predicting with the run's normalization;
its accuracy on the validation split is the run's logged val/accuracy (the runs trained
in-process, by ``trainer_run.train``)."""

import json

import numpy as np
import pytest

import trainer_run
from trainer_run.errors import ConfigError

USER_MODEL = '''
from trainer_run import functions as F
from trainer_run.models import Linear, Model


class Wide(Model):
    def __init__(self, in_size, out_size, backend, width=8):
        self.a = Linear(in_size, width, backend)
        self.b = Linear(width, out_size, backend)

    def forward(self, x):
        return self.b(F.tanh(self.a(x.reshape(len(x), -1))))
'''


def _images(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(300, 4, 4), dtype=np.uint8)
    y = (x[:, :2].mean(axis=(1, 2)) > x[:, 2:].mean(axis=(1, 2))).astype(np.int64)
    np.savez(tmp_path / "train.npz", x=x[:200], y=y[:200])
    np.savez(tmp_path / "val.npz", x=x[200:], y=y[200:])
    return x[200:], y[200:]


RUN = ("dataset=npz", "dataset.path=train.npz", "dataset.val_path=val.npz", "trainer.max_iterations=60",
       "trainer.checkpoint_interval=30", "trainer.keep_checkpoints=null", "trainer.progress=false")


@pytest.mark.parametrize("args", [("dataset.normalize=unit",),
                                  ("dataset.normalize=standardize", "+model._target_=my_model.Wide",
                                   "+model.width=5")], ids=["mlp-unit", "user-standardize"])
def test_a_loaded_model_predicts_the_runs_validation_accuracy(tmp_path, monkeypatch, args):
    (tmp_path / "my_model.py").write_text(USER_MODEL)
    x, y = _images(tmp_path)
    monkeypatch.chdir(tmp_path)
    trainer_run.train([*RUN, *args], run_dir="run")
    monkeypatch.syspath_prepend(str(tmp_path))
    trained = trainer_run.load_model("run")
    assert trained.model.training is False and trained.task == "classification"
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    outputs = trained.predict(x)  # raw uint8 (N, 4, 4): the channel axis and normalization added
    assert outputs.shape == (100, 2)
    assert (outputs.argmax(axis=1) == y).mean() == pytest.approx(summary["val/accuracy"])
    if "+model.width=5" in args:
        assert type(trained.model).__name__ == "Wide" and trained.model.a.W.data.shape == (5, 16)


def test_a_checkpoint_loads_its_own_parameters(tmp_path, monkeypatch):
    x, _ = _images(tmp_path)
    monkeypatch.chdir(tmp_path)
    trainer_run.train([*RUN, "dataset.normalize=unit"], run_dir="run")
    final = trainer_run.load_model("run", "last")
    middle = trainer_run.load_model("run", "run/checkpoints/iter_00000030")
    with np.load(tmp_path / "run/model.npz") as saved:
        np.testing.assert_array_equal(final.model.l1.W.data, saved["l1/W"])
    assert not np.array_equal(middle.model.l1.W.data, final.model.l1.W.data)
    assert not np.allclose(middle.predict(x), final.predict(x))


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is not a run directory: it has no .hydra/config.yaml"):
        trainer_run.load_model(tmp_path)


def test_load_model_stands_alone_without_hydra_omegaconf_or_the_command(tmp_path):
    """The library reads a run as data: with Hydra, OmegaConf and the command layer made
    unimportable, a run's model loads from model.npz and from a checkpoint, and predicts the
    same outputs either way (the checkpoint is the last iteration's)."""
    import subprocess
    import sys

    run = tmp_path / "run"
    trainer_run.train(["trainer.max_iterations=6", "trainer.checkpoint_interval=6",
                       "trainer.progress=false", "dataset.size=200"], run_dir=run)
    code = f"""
import sys
for name in ("omegaconf", "hydra", "trainer_run.cli"):
    sys.modules[name] = None
import numpy, trainer_run
x = numpy.random.default_rng(0).normal(size=(5, 2)).astype(numpy.float32)
final = trainer_run.load_model({str(run)!r}).predict(x)
saved = trainer_run.load_model({str(run)!r}, {str(run / 'checkpoints' / 'iter_00000006')!r}).predict(x)
assert final.shape == (5, 2) and (final == saved).all(), (final, saved)
print("loaded", sorted(m for m in sys.modules if m.startswith(("omegaconf", "hydra"))
                       and sys.modules[m] is not None))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded []"


def test_a_saved_config_with_an_interpolation_between_its_keys_loads(tmp_path):
    import yaml

    run = tmp_path / "run"
    trainer_run.train(["trainer.max_iterations=3", "trainer.progress=false", "dataset.size=200"],
                      run_dir=run)
    path = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"]["hidden_sizes"] = "${width}"
    config["width"] = [64, 64]
    path.write_text(yaml.safe_dump(config))
    assert trainer_run.load_model(run).model.params()["l1/W"].data.shape == (64, 2)
    config["model"]["hidden_sizes"] = "${oc.env:HOME}"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"model.hidden_sizes calls a resolver .*oc.env.*add trust=true"):
        trainer_run.load_model(run)
