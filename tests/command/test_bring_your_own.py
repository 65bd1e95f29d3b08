"""A user's own model, data and config files, from a fresh folder, as the README shows them.

Each test writes the user's module into an empty folder and runs the installed ``trainer-run``
console script there (not ``python -m``, which would make the folder importable by itself),
with no ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import yaml
from helpers import load_npz

from trainer_run.compose.options import shared_section

RULES = shared_section("model")
"""The keys every model section shares (configs/_model.yaml: freeze, lr_mult, wd_mult), read by
the runner; a replaced model's section keeps them, as it keeps a dataset's."""

MY_MODELS = '''
from trainer_run import functions as F
from trainer_run.models import Linear, Model


class TwoLayer(Model):
    """in_size -> hidden -> out_size with a ReLU between."""

    def __init__(self, in_size, out_size, backend, hidden=32):
        self.l1 = Linear(in_size, hidden, backend)
        self.l2 = Linear(hidden, out_size, backend)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))
'''

MY_DATA = '''
import numpy


def load():
    """300 examples of 4 features; the label says whether the first two sum above 0."""
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(numpy.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(numpy.int64)
'''

SHORT = ("trainer.max_iterations=24", "trainer.progress=false", "trainer.eval_interval=12")


def _script() -> str:
    installed = Path(sys.executable).parent / "trainer-run"
    return str(installed) if installed.exists() else shutil.which("trainer-run")


def _user(folder: Path, *arguments) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([_script(), *arguments], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def folder(tmp_path):
    """A fresh folder holding the user's modules and nothing else."""
    (tmp_path / "my_models.py").write_text(MY_MODELS)
    (tmp_path / "my_data.py").write_text(MY_DATA)
    return tmp_path


def _shapes(run: Path) -> dict:
    return {name: value.shape for name, value in load_npz(run / "model.npz").items()}


def _config(run: Path) -> dict:
    return yaml.safe_load((run / ".hydra" / "config.yaml").read_text())


def test_a_model_target_gets_only_the_keys_the_user_gave(folder):
    result = _user(folder, "+model._target_=my_models.TwoLayer", "+model.hidden=16",
                   "hydra.run.dir=run", *SHORT)
    assert result.returncode == 0, result.stderr
    run = folder / "run"
    # spirals: 2 features, 2 classes; hidden=16 reached the user's class
    assert _shapes(run) == {"l1/W": (16, 2), "l1/b": (16,), "l2/W": (2, 16), "l2/b": (2,)}
    assert _config(run)["model"] == {"_target_": "my_models.TwoLayer", "hidden": 16, **RULES}


def test_a_dataset_target_with_no_arguments_is_split_by_the_shared_keys(folder):
    result = _user(folder, "+dataset._target_=my_data.load", "hydra.run.dir=run", *SHORT)
    assert result.returncode == 0, result.stderr
    run = folder / "run"
    assert _shapes(run)["l1/W"] == (64, 4)  # the default MLP sized from the user's 4 features
    assert _shapes(run)["l3/W"] == (2, 64)  # and its 2 classes
    summary = json.loads((run / "summary.json").read_text())
    # val_fraction 0.2 of 300 leaves 240 to train on: 24 updates of 50 are 5 epochs
    assert summary["epoch"] == pytest.approx(24 * 50 / 240)
    assert _config(run)["dataset"] == {"batch_size": 50, "val_fraction": 0.2, "task": "auto",
                                       "normalize": "none", "overfit_batches": None,
                                       "on_device": None, "workers": 0, "transforms": [],
                                       "_target_": "my_data.load"}


def test_a_config_file_in_the_users_folder_is_an_option(folder):
    (folder / "conf" / "model").mkdir(parents=True)
    (folder / "conf" / "model" / "mynet.yaml").write_text("_target_: my_models.TwoLayer\nhidden: 8\n")
    result = _user(folder, "--config-dir", "./conf", "model=mynet", "hydra.run.dir=run", *SHORT)
    assert result.returncode == 0, result.stderr
    assert _shapes(folder / "run")["l1/W"] == (8, 2)
    assert _config(folder / "run")["model"] == {"_target_": "my_models.TwoLayer", "hidden": 8,
                                                **RULES}
    typo = _user(folder, "--config-dir", "./conf", "model=mynett", "hydra.run.dir=other", *SHORT)
    assert typo.returncode == 2
    assert typo.stderr.strip() == ("error: model=mynett is not available; did you mean mynet? "
                                   "choose one of cnn, gpt, logistic_regression, lstm_lm, mlp, mynet, resnet")


def test_our_class_named_as_a_user_target_trains_the_same_run(folder):
    """One instantiate path: the default MLP named by the user gives the default run, bit for bit."""
    default = _user(folder, "hydra.run.dir=default", *SHORT)
    named = _user(folder, "+model._target_=trainer_run.models.MLP", "model.hidden_sizes=[64,64]",
                  "hydra.run.dir=named", *SHORT)
    assert default.returncode == 0 and named.returncode == 0, named.stderr
    ours, theirs = load_npz(folder / "default" / "model.npz"), load_npz(folder / "named" / "model.npz")
    assert ours.keys() == theirs.keys()
    for name in ours:
        numpy.testing.assert_array_equal(ours[name], theirs[name])
    # the replaced option's activation is not carried over: MLP's own default (relu) applies
    assert _config(folder / "named")["model"] == {"_target_": "trainer_run.models.MLP",
                                                  "hidden_sizes": [64, 64], **RULES}


@pytest.mark.parametrize("arguments, message", [
    (("+model._target_=my_models.TwoLayer", "+model.hiden=16"),
     "model.hiden is not an argument of TwoLayer(in_size, out_size, backend, hidden); the config "
     "may set hidden"),
    (("+model._target_=my_models.TwoLayr",),
     "model._target_=my_models.TwoLayr: my_models has no 'TwoLayr'; did you mean "
     "my_models.TwoLayer?"),
    (("+dataset._target_=my_data.load", "+dataset.path=x.npz"),
     "dataset.path is not an argument of load(); the config may set none of them"),
    (("+dataset._target_=my_data.load", "dataset.bach_size=32"),
     "dataset.bach_size is not a config key; did you mean dataset.batch_size?"),
    (("optimizer._target_=my_data.load",),
     "optimizer._target_=my_data.load must build a trainer_run.optimizers.Optimizer (subclass it); "
     "it built a tuple"),
    (("scheduler._target_=my_data.load",),
     "scheduler._target_=my_data.load must build a trainer_run.schedulers.LRScheduler (subclass it); "
     "it built a tuple"),
    (("scheduler._target_=my_models.TwoLayer",),  # a class of another kind: never called
     "scheduler._target_=my_models.TwoLayer must build a trainer_run.schedulers.LRScheduler "
     "(subclass it)"),
])
def test_a_mistake_in_a_user_target_is_one_line_and_leaves_nothing(folder, arguments, message):
    result = _user(folder, *arguments, "hydra.run.dir=run", *SHORT)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {message}"
    assert not (folder / "run").exists()


MY_OPT = '''
from trainer_run.optimizers import Optimizer


class Plain(Optimizer):
    """SGD without momentum, written with MXNet's four-argument update."""

    def create_state(self, index, weight):
        return None

    def update(self, index, weight, grad, state):
        self._update_count(index)
        weight -= self._get_lr(index) * self.rescale_grad * grad
'''


def test_a_users_optimizer_trains_like_the_builtin_it_copies(folder):
    (folder / "my_opt.py").write_text(MY_OPT)
    ours = _user(folder, "optimizer=sgd", "optimizer.learning_rate=0.1", "hydra.run.dir=sgd", *SHORT)
    theirs = _user(folder, "optimizer._target_=my_opt.Plain", "optimizer.learning_rate=0.1",
                   "hydra.run.dir=plain", *SHORT)
    assert ours.returncode == 0 and theirs.returncode == 0, theirs.stderr
    expected, got = load_npz(folder / "sgd" / "model.npz"), load_npz(folder / "plain" / "model.npz")
    for name in expected:
        numpy.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-7)
    # the shared keys it takes came from configs/_optimizer.yaml; SGD's own keys were dropped
    assert _config(folder / "plain")["optimizer"] == {
        "learning_rate": 0.1, "wd": 0.0, "rescale_grad": 1.0, "clip_gradient": None,
        "multi_precision": False, "begin_num_update": 0,
        "_target_": "my_opt.Plain"}
    scaled = _user(folder, "optimizer._target_=my_opt.Plain", "loss_scale=static",
                   "hydra.run.dir=scaled", *SHORT)
    assert scaled.returncode == 2
    assert scaled.stderr.strip() == (
        "error: loss_scale._target_=trainer_run.loss_scaling.LossScaler gives the optimizer's "
        "step its gradient factor; Plain.update must take it: update(index, weight, grad, state, "
        "rescale_grad=None) (see trainer_run.optimizers.Optimizer.update)")
