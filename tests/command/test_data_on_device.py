"""``dataset.on_device`` from the command line: a run with its data on the device is the host
run bit for bit, fresh and resumed; a wrong choice is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import load_npz, one_error_line, read_jsonl, run_cli

RUN = ("dataset=mnist_like", "dataset.size=600", "model.hidden_sizes=[16]", "trainer.log_interval=10",
       "trainer.eval_interval=20", "trainer.progress=false")


@pytest.mark.parametrize("normalize", ["none", "standardize"])
def test_a_run_with_its_data_on_the_device_is_the_host_run_bit_for_bit(tmp_path, normalize):
    runs = {}
    for choice in ("true", "false"):
        out = tmp_path / choice
        result = run_cli(*RUN, f"dataset.normalize={normalize}", "trainer.max_iterations=40",
                         f"dataset.on_device={choice}", f"hydra.run.dir={out}")
        assert result.returncode == 0, result.stderr
        runs[choice] = out
    got, expected = load_npz(runs["true"] / "model.npz"), load_npz(runs["false"] / "model.npz")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert read_jsonl(runs["true"] / "metrics.jsonl")[-1]["val/loss"] == \
        read_jsonl(runs["false"] / "metrics.jsonl")[-1]["val/loss"]


def test_a_resumed_run_with_its_data_on_the_device_continues_bit_for_bit(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    for out, iterations in ((straight, 40), (split, 20)):
        result = run_cli(*RUN, "dataset.on_device=true", f"trainer.max_iterations={iterations}",
                         f"hydra.run.dir={out}")
        assert result.returncode == 0, result.stderr
    result = run_cli(f"resume={split}", "trainer.max_iterations=40")
    assert result.returncode == 0, result.stderr
    got, expected = load_npz(split / "model.npz"), load_npz(straight / "model.npz")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert json.loads((split / "summary.json").read_text())["iteration"] == 40


@pytest.mark.parametrize("overrides, fragment", [
    (("dataset.on_device=true", "updater.prefetch=2"), "set one of them"),
    (("dataset.on_device=maybe",), "dataset.on_device"),
])
def test_a_wrong_choice_is_one_line(tmp_path, overrides, fragment):
    result = run_cli(*RUN, *overrides, f"hydra.run.dir={tmp_path / 'run'}")
    assert fragment in one_error_line(result)
