"""A model's persistent state (trainer_run.params.Persistent: values it updates itself, not
trained): in model.npz and checkpoints, resumed bit-identically, the main replica's under
updater=parallel, and back with load_model."""

import numpy as np
import pytest
from helpers import load_npz, run_cli

import trainer_run

COUNTING = '''
import numpy
from trainer_run import functions as F
from trainer_run.models import Linear, Module
from trainer_run.params import Persistent


class Counting(Module):
    """A linear classifier that counts the training examples it has seen and keeps a running
    mean of its inputs' first feature (updated in training mode only)."""

    def __init__(self, in_size, out_size, backend):
        self.l = Linear(in_size, out_size, backend)
        self.seen = Persistent(numpy.zeros(1))
        self.mean = Persistent(numpy.zeros(1))

    def __call__(self, x, t):
        if self.training:
            self.seen.data += len(x)
            self.mean.data[...] = 0.9 * self.mean.data + 0.1 * float(x[:, 0].mean())
        y = self.l(x)
        return {"loss": F.softmax_cross_entropy(y, t)}

    def forward(self, x):
        return self.l(x)
'''

COMMON = ("+model._target_=my_counting.Counting", "trainer.progress=false", "dataset.batch_size=20",
          "trainer.checkpoint_interval=10", "trainer.eval_interval=10")


def _run(tmp_path, *args):
    result = run_cli(*COMMON, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "my_counting.py").write_text(COUNTING)
    return tmp_path


def test_persistent_values_are_saved_resumed_bit_identically_and_loaded_back(folder, monkeypatch):
    _run(folder, "trainer.max_iterations=20", "hydra.run.dir=whole")
    _run(folder, "trainer.max_iterations=10", "hydra.run.dir=half")
    _run(folder, "resume=half", "trainer.max_iterations=20")
    whole, half = load_npz(folder / "whole/model.npz"), load_npz(folder / "half/model.npz")
    assert whole["seen"].tolist() == [20 * 20]  # training batches only, not the evaluations
    assert set(whole) == set(half) and all(np.array_equal(whole[k], half[k]) for k in whole)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    trained = trainer_run.load_model("whole")
    assert trained.model.seen.data.tolist() == [400.0]
    np.testing.assert_array_equal(trained.model.mean.data, whole["mean"])


def test_under_the_parallel_updater_the_main_replicas_values_are_the_models(folder):
    _run(folder, "updater=parallel", "updater.devices=2", "kvstore=local", "trainer.max_iterations=10",
         "hydra.run.dir=par")
    # each replica sees half of every batch of 20; the main replica's count is the model's,
    # copied to the other replica after every update
    assert load_npz(folder / "par/model.npz")["seen"].tolist() == [10 * 10]
