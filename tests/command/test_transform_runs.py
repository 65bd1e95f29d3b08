"""``dataset.transforms`` in whole runs from the command line: a run with transforms, resumed or
gathered in worker threads, equals a plain one and differs from a run without them; transforms
that do not fit the data stop the run in one line before it writes; a plain function of the
user's folder is a transform."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_npz, one_error_line, run_cli

from tests.data.test_augmentation import user_module  # noqa: F401 - a fixture

RUN = ("dataset=npz", "model=mlp", "model.hidden_sizes=[16]", "optimizer=sgd",
       "optimizer.learning_rate=0.1", "dataset.batch_size=20", "trainer.log_interval=10",
       "trainer.eval_interval=10", "trainer.checkpoint_interval=15", "trainer.progress=false")


TRANSFORMS = "dataset.transforms=[random_crop,horizontal_flip,random_erasing,cutmix]"


@pytest.fixture(scope="module")
def image_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "images.npz"
    rng = np.random.default_rng(1)
    np.savez(path, x=rng.integers(0, 256, size=(150, 3, 8, 8), dtype=np.uint8),
             y=rng.integers(0, 4, size=150).astype(np.int64))
    return path


def train(out, image_file, *args):
    result = run_cli(f"hydra.run.dir={out}", *RUN, f"dataset.path={image_file}",
                     "dataset.normalize=per_channel", *args)
    assert result.returncode == 0, result.stderr
    return load_npz(out / "model.npz")


def test_a_run_with_transforms_resumed_or_in_workers_equals_a_plain_one_and_differs_without(
        tmp_path, image_file):
    whole = train(tmp_path / "whole", image_file, TRANSFORMS, "trainer.max_iterations=30")
    train(tmp_path / "cut", image_file, TRANSFORMS, "trainer.max_iterations=15")
    resumed = run_cli(f"resume={tmp_path / 'cut'}", "trainer.max_iterations=30")
    assert resumed.returncode == 0, resumed.stderr
    again = load_npz(tmp_path / "cut" / "model.npz")
    plain = train(tmp_path / "plain", image_file, "trainer.max_iterations=30")
    threaded = train(tmp_path / "threads", image_file, TRANSFORMS, "trainer.max_iterations=30",
                     "dataset.workers=2")
    for key in whole:
        np.testing.assert_array_equal(again[key], whole[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(threaded[key], whole[key], err_msg=key, strict=True)
    assert any(not np.array_equal(plain[key], whole[key]) for key in whole)


def test_transforms_that_do_not_fit_the_data_stop_the_run_before_it_writes(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "dataset.transforms=[random_crop]",
                     "dataset=regression")
    assert result.returncode == 2
    assert one_error_line(result) == (
        "error: dataset.transforms: random_crop works on images, inputs whose last two axes are "
        "height and width; these examples have shape (8,): leave random_crop out for these data")
    assert not (tmp_path / "run").exists()


def test_a_run_trains_with_a_plain_function_of_the_users_folder(tmp_path, user_module):  # noqa: F811
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "dataset.size=120",
                     "trainer.max_iterations=4", "trainer.progress=false",
                     "dataset.transforms=[{_target_: my_transforms.noise, sigma: 0.1}]",
                     cwd=user_module)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "model.npz").is_file()
