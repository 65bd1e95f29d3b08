"""``dataset.workers`` over a dataset whose examples Python reads one by one
(data/worker_processes.py): its rows are read in worker processes, and the batches, their
transforms and whole runs equal those of the training thread alone, bit for bit; what reading
raises in a process reaches the update; the processes end with the run."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import trainer_run
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import ArrayDataset, SerialIterator, SubDataset
from trainer_run.data.augmentation import Augmentation
from trainer_run.data.input_scaling import Normalized, fit
from trainer_run.data.transforms import HorizontalFlip, RandomCrop
from trainer_run.data.worker_processes import reads_rows
from trainer_run.errors import JobFailed
from trainer_run.models import MLP
from trainer_run.updaters import StandardUpdater, updater_of


class Examples:
    """A dataset of the user's: each example built in Python (as a decoder would)."""

    def __init__(self, n=70, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise OSError(f"cannot decode example {i}")
        rng = np.random.default_rng(i)
        return rng.normal(size=(1, 4, 4)).astype(np.float32), np.int32(i % 3)


def test_only_a_dataset_that_ends_in_its_own_take_reads_rows():
    arrays = ArrayDataset(np.zeros((4, 2)), np.zeros(4))
    assert reads_rows(arrays) and reads_rows(SubDataset(arrays, [0, 1]))
    assert reads_rows(Normalized(SubDataset(arrays, [0, 1]), {}))
    assert not reads_rows(Examples()) and not reads_rows(Normalized(SubDataset(Examples(), [0]), {}))


def updater(workers, data=None, replicas=1):
    backend = get_backend("numpy", seed=3)
    iterator = SerialIterator(data or Examples(), 8, rng=np.random.default_rng(2))
    transforms = Augmentation([RandomCrop(1), HorizontalFlip()], np.random.SeedSequence(4))
    return updater_of(StandardUpdater, iterator, optimizers.create("sgd", learning_rate=0.1),
                      MLP(16, 3, backend, hidden_sizes=[8]), backend=backend,
                      transforms=transforms, workers=workers)


@pytest.mark.parametrize("data", [Examples(), None], ids=["examples", "normalized subset"])
def test_workers_read_in_processes_the_batches_the_training_thread_reads(data):
    if data is None:
        inner = SubDataset(Examples(80), np.arange(5, 75))
        data = Normalized(inner, fit("standardize", inner, "test"))
    plain, workers = updater(0, data), updater(2, data)
    try:
        for _ in range(25):  # 70 examples in 8s: batches cross epoch boundaries
            expected, _ = plain.next_parts(plain.get_iterator("main"), [None])
            got, _ = workers.next_parts(workers.get_iterator("main"), [None])
            for a, b in zip(got[0], expected[0]):
                np.testing.assert_array_equal(a, b, strict=True)
        assert len(multiprocessing.active_children()) == 2
    finally:
        workers.finalize()
    assert multiprocessing.active_children() == []


def test_what_reading_raises_in_a_process_reaches_the_update():
    target = updater(2, Examples(bad=33))
    try:
        with pytest.raises(OSError, match="cannot decode example 33"):
            for _ in range(20):
                target.update()
    finally:
        target.finalize()


def test_a_run_of_a_users_dataset_with_workers_equals_one_without(tmp_path, monkeypatch):
    (tmp_path / "decoded.py").write_text(
        "import numpy\n\n\nclass Examples:\n    def __init__(self, n):\n        self.n = n\n\n"
        "    def __len__(self):\n        return self.n\n\n    def __getitem__(self, i):\n"
        "        rng = numpy.random.default_rng(int(i))\n"
        "        return rng.normal(size=(1, 6, 6)).astype(numpy.float32), numpy.int64(i % 4)\n\n\n"
        "def load():\n    return Examples(300), Examples(60)\n")
    monkeypatch.chdir(tmp_path)
    common = ["+dataset._target_=decoded.load", "dataset.batch_size=16", "model.hidden_sizes=[8]",
              "trainer.max_iterations=25", "dataset.transforms=[random_crop]",
              "trainer.progress=false"]
    plain = trainer_run.train(common, run_dir=tmp_path / "plain")
    workers = trainer_run.train([*common, "dataset.workers=2"], run_dir=tmp_path / "workers")
    with np.load(plain.dir / "model.npz") as a, np.load(workers.dir / "model.npz") as b:
        for key in a.files:
            np.testing.assert_array_equal(b[key], a[key], err_msg=key, strict=True)


def test_a_negative_or_fractional_number_of_workers_is_one_line_naming_the_key(tmp_path):
    for value, words in ((-1, "must be >= 0, got -1"), (1.5, "must be an integer, got 1.5")):
        with pytest.raises(JobFailed, match=rf"^dataset.workers {words}$"):
            trainer_run.train([f"dataset.workers={value}"], run_dir=tmp_path / f"run{value}")
