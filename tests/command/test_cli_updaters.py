"""The command line with updater options: accumulation, loss scaling, precision, parallel
replicas, kvstores and callbacks given in the config (real subprocesses)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy
import numpy as np
import pytest
import yaml
from helpers import load_npz, read_jsonl, run_cli

SGD = ("optimizer=sgd", "trainer.max_iterations=20")


def _run(*args, env=None, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """``run_cli`` with extra environment variables (``env`` is added to the current one)."""
    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, args)], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def _train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", "trainer.progress=false", *args)
    assert result.returncode == 0, result.stderr
    return result


def _assert_same_params(a: dict, b: dict, rtol: float, atol: float = 0.0) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        numpy.testing.assert_allclose(a[key], b[key], rtol=rtol, atol=atol, err_msg=key)


def _assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sgd_run(tmp_path_factory):
    """The standard updater, float32, no loss scaling: ``optimizer=sgd``, 20 iterations."""
    out = tmp_path_factory.mktemp("baseline") / "run"
    _train(out, *SGD)
    return out


# -- accumulation -----------------------------------------------------------------------------
def test_accumulating_four_batches_of_25_equals_one_batch_of_100(tmp_path):
    common = ("optimizer=sgd", "optimizer.learning_rate=0.1", "trainer.max_iterations=20")
    _train(tmp_path / "accum", "updater.accum_grad=4", "dataset.batch_size=25", *common)
    _train(tmp_path / "whole", "dataset.batch_size=100", *common)
    accum, whole = load_npz(tmp_path / "accum" / "model.npz"), load_npz(tmp_path / "whole" / "model.npz")
    _assert_same_params(accum, whole, rtol=1e-4, atol=1e-6)
    accum_rows = read_jsonl(tmp_path / "accum" / "metrics.jsonl")
    whole_rows = read_jsonl(tmp_path / "whole" / "metrics.jsonl")
    assert accum_rows[-1]["iteration"] == whole_rows[-1]["iteration"] == 20
    # epochs count examples: 20 updates of 100 examples over 1600 training examples
    assert accum_rows[-1]["epoch"] == whole_rows[-1]["epoch"] == pytest.approx(20 * 100 / 1600)
    assert accum_rows[-1]["train/loss"] == pytest.approx(whole_rows[-1]["train/loss"], rel=1e-4)


# -- loss scaling and precision ---------------------------------------------------------------
def test_dynamic_loss_scaling_in_float16_trains_the_default_run(tmp_path):
    out = tmp_path / "run"
    _train(out, "loss_scale=dynamic", "precision=fp16")
    rows = read_jsonl(out / "metrics.jsonl")
    last = rows[-1]
    assert last["iteration"] == 1000
    assert {"loss_scale", "skipped_steps"} <= set(last)
    assert all("loss_scale" in row and "skipped_steps" in row for row in rows)
    assert last["val/accuracy"] >= 0.93
    # interval is 2000: the scale never grew, so it is 8 halved once per skipped step
    assert last["loss_scale"] == 8.0 / 2 ** last["skipped_steps"]
    params = load_npz(out / "model.npz")
    assert sorted(params) == ["l1/W", "l1/b", "l2/W", "l2/b", "l3/W", "l3/b"]
    for key, value in params.items():
        assert value.dtype == numpy.float16, key
        assert numpy.isfinite(value).all(), key


def test_float16_overflow_makes_the_dynamic_scaler_back_off(tmp_path):
    out = tmp_path / "run"
    _train(out, "loss_scale=dynamic", "precision=fp16", "loss_scale.scale=1e30",
           "trainer.max_iterations=20", "trainer.log_interval=5")
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [5, 10, 15, 20]
    for row in rows:
        assert row["skipped_steps"] > 0
        assert row["loss_scale"] < 1e30
        # no growth can have happened (interval 2000): one halving per skipped step
        assert row["loss_scale"] == 1e30 / 2 ** row["skipped_steps"]
    assert [r["skipped_steps"] for r in rows] == sorted(r["skipped_steps"] for r in rows)
    assert all(numpy.isfinite(v).all() for v in load_npz(out / "model.npz").values())


def test_retry_on_overflow_recomputes_the_step_on_new_data(tmp_path):
    out = tmp_path / "run"
    _train(out, "precision=fp16", "loss_scale.scale=1e30", "loss_scale.on_overflow=retry",
           "trainer.max_iterations=20")
    last = read_jsonl(out / "metrics.jsonl")[-1]
    assert last["skipped_steps"] == 0  # max_retries=100 is plenty to get below float16's range
    halvings = math.log2(1e30 / last["loss_scale"])
    assert halvings == int(halvings) and 0 < halvings <= 100
    assert last["loss_scale"] < 65504.0
    # every retry drew a new batch: 20 updates plus the retries, 50 of 1600 examples each
    assert last["epoch"] == pytest.approx((20 + halvings) * 50 / 1600)


def test_resume_restores_the_dynamic_scaler(tmp_path):
    common = ("precision=fp16", "loss_scale.scale=1e30", "trainer.checkpoint_interval=10",
              "trainer.log_interval=10")
    _train(tmp_path / "straight", "trainer.max_iterations=20", *common)
    _train(tmp_path / "split", "trainer.max_iterations=10", *common)
    result = run_cli(f"resume={tmp_path / 'split'}", "trainer.max_iterations=20",
                     "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    straight = read_jsonl(tmp_path / "straight" / "metrics.jsonl")
    split = read_jsonl(tmp_path / "split" / "metrics.jsonl")
    assert [(r["iteration"], r["loss_scale"], r["skipped_steps"]) for r in split] == [
        (r["iteration"], r["loss_scale"], r["skipped_steps"]) for r in straight]
    assert split[-1]["skipped_steps"] == 20 and split[-1]["loss_scale"] == 1e30 / 2 ** 20
    a, b = load_npz(tmp_path / "straight" / "model.npz"), load_npz(tmp_path / "split" / "model.npz")
    assert all(numpy.array_equal(a[k], b[k]) for k in a)


def test_static_loss_scale_in_float32_changes_nothing_but_the_logged_scale(tmp_path, sgd_run):
    out = tmp_path / "static"
    _train(out, "loss_scale=static", *SGD)
    _assert_same_params(load_npz(out / "model.npz"), load_npz(sgd_run / "model.npz"), rtol=1e-6)
    rows = read_jsonl(out / "metrics.jsonl")
    assert rows and all(row["loss_scale"] == 1024.0 and "skipped_steps" not in row for row in rows)
    assert all("loss_scale" not in row for row in read_jsonl(sgd_run / "metrics.jsonl"))


def test_precision_fp16_alone_selects_dynamic_scaling_and_multi_precision(tmp_path):
    out = tmp_path / "run"
    _train(out, "precision=fp16", "trainer.max_iterations=20")
    rows = read_jsonl(out / "metrics.jsonl")
    assert rows[-1]["skipped_steps"] == 0 and rows[-1]["loss_scale"] == 8.0
    config = yaml.safe_load((out / ".hydra" / "config.yaml").read_text())
    assert config["optimizer"]["multi_precision"] is True
    assert config["loss_scale"]["_target_"] == "trainer_run.loss_scaling.DynamicLossScaler"
    assert config["backend"]["dtype"] == "float16" and "precision" not in config
    assert all(v.dtype == numpy.float16 for v in load_npz(out / "model.npz").values())


def test_precision_fp16_keeps_a_static_scale_when_asked(tmp_path):
    out = tmp_path / "run"
    _train(out, "precision=fp16", "loss_scale=static", "trainer.max_iterations=20")
    rows = read_jsonl(out / "metrics.jsonl")
    assert all(row["loss_scale"] == 1024.0 and "skipped_steps" not in row for row in rows)
    config = yaml.safe_load((out / ".hydra" / "config.yaml").read_text())
    assert config["loss_scale"] == {"_target_": "trainer_run.loss_scaling.LossScaler", "scale": 1024.0}
    assert config["optimizer"]["multi_precision"] is True
    assert all(v.dtype == numpy.float16 for v in load_npz(out / "model.npz").values())


def test_model_dtype_is_refused_in_favour_of_precision(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "+model.dtype=float16",
                     "trainer.max_iterations=20", "trainer.progress=false")
    line = _assert_one_line_error(result, "model.dtype", "precision")
    assert "precision=fp16" in line
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_progress_shows_the_loss_scale(tmp_path):
    result = _run(f"hydra.run.dir={tmp_path / 'run'}", "loss_scale=dynamic",
                  "trainer.max_iterations=20", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "loss scale 8" in result.stdout
    assert "skipped steps 0" in result.stdout
    assert "metrics (completed)" in result.stdout


# -- parallel replicas and kvstores -----------------------------------------------------------
@pytest.mark.parametrize("kvstore", [[], ["kvstore=local"], ["kvstore=device"]],
                         ids=["default", "local", "device"])
def test_parallel_updater_matches_the_standard_one(tmp_path, sgd_run, kvstore):
    out = tmp_path / "parallel"
    _train(out, "updater=parallel", "updater.devices=2", *kvstore, *SGD)
    _assert_same_params(load_npz(out / "model.npz"), load_npz(sgd_run / "model.npz"), rtol=1e-4)
    rows, baseline = read_jsonl(out / "metrics.jsonl"), read_jsonl(sgd_run / "metrics.jsonl")
    assert rows[-1]["epoch"] == baseline[-1]["epoch"]
    assert rows[-1]["train/loss"] == pytest.approx(baseline[-1]["train/loss"], rel=1e-4)
    config = yaml.safe_load((out / ".hydra" / "config.yaml").read_text())
    assert config["updater"]["_target_"] == "trainer_run.updaters.ParallelUpdater"
    assert config["updater"]["devices"] == 2


def test_parallel_updater_needs_a_kvstore(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "updater=parallel", "kvstore=none",
                     *SGD, "trainer.progress=false")
    _assert_one_line_error(result, "kvstore")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


# -- bad values -------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments, key", [
    (["updater.accum_grad=0"], "updater.accum_grad"),
    (["loss_scale=dynamic", "loss_scale.on_overflow=explode"], "loss_scale.on_overflow"),
    (["loss_scale=dynamic", "loss_scale.scaling_factor=1"], "loss_scale.scaling_factor"),
    (["updater=parallel", "updater.devices=0"], "updater.devices"),
    (["updater=parallel", "updater.devices=[0,0]"], "updater.devices"),
    (["updater.callbacks.update_on_finish=no.such.module.fn"], "updater.callbacks.update_on_finish"),
    (["updater=parallel", "updater.devices=2.5"], "updater.devices"),
    (["updater=parallel", "updater.devices=60"], "updater.devices"),
    (["+loss_scale.scale=8"], "loss_scale.scale"),
], ids=["accum_grad", "on_overflow", "scaling_factor", "devices-0", "devices-repeated", "callback",
        "devices-float", "devices-over-batch", "scale-without-scaler"])
def test_bad_updater_values_give_one_clear_message(tmp_path, arguments, key):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "trainer.progress=false",
                     "trainer.max_iterations=20", *arguments)
    line = _assert_one_line_error(result, key)
    assert line.startswith(f"error: {key}")
    assert not (tmp_path / "run" / "checkpoints").exists()


# -- callbacks from the config ----------------------------------------------------------------
HOOKS_MODULE = '''
import os


def _append(path, hook, iteration):
    with open(path, "a") as f:
        f.write(f"{hook} {iteration}\\n")


def forward_on_start(iteration):
    _append(os.environ["HOOKS_LOG"], "forward_on_start", iteration)


def backward_on_finish(iteration):
    _append(os.environ["HOOKS_LOG"], "backward_on_finish", iteration)


class Recorder:
    def __init__(self, path, hook):
        self.path, self.hook = path, hook

    def __call__(self, iteration):
        _append(self.path, self.hook, iteration)
'''


def test_callbacks_from_the_config_run_at_their_places(tmp_path):
    (tmp_path / "hooks.py").write_text(HOOKS_MODULE)
    log = tmp_path / "hooks.log"
    pythonpath = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    result = _run(
        f"hydra.run.dir={tmp_path / 'run'}", "trainer.progress=false",
        "updater.accum_grad=2", "trainer.max_iterations=3",
        "updater.callbacks.forward_on_start=hooks.forward_on_start",
        "updater.callbacks.backward_on_finish=[hooks.backward_on_finish]",
        *(f"updater.callbacks.{hook}={{_target_: hooks.Recorder, path: '{log}', hook: {hook}}}"
          for hook in ("update_on_start", "update_on_finish")),
        env={"HOOKS_LOG": str(log), "PYTHONPATH": pythonpath})
    assert result.returncode == 0, result.stderr
    expected = []
    for i in range(3):
        # each of the accum_grad=2 batches runs forward then backward; one update per iteration
        expected += [f"forward_on_start {i}", f"backward_on_finish {i}"] * 2
        expected += [f"update_on_start {i}", f"update_on_finish {i}"]
    assert log.read_text().splitlines() == expected


def test_callbacks_of_skipped_and_parallel_steps(tmp_path):
    """A skipped step runs forward and backward but no update hooks; the parallel updater
    runs the comm hooks around its reduction, once per update."""
    (tmp_path / "hooks.py").write_text(HOOKS_MODULE)
    env = {"PYTHONPATH": str(tmp_path)}

    def hooks(log, *names):
        return [f"updater.callbacks.{name}={{_target_: hooks.Recorder, path: '{log}', hook: {name}}}"
                for name in names]

    skipped = tmp_path / "skipped.log"
    result = _run(f"hydra.run.dir={tmp_path / 'skipped'}", "trainer.progress=false",
                  "precision=fp16", "loss_scale.scale=1e30", "trainer.max_iterations=3",
                  *hooks(skipped, "forward_on_finish", "backward_on_start", "update_on_start",
                         "update_on_finish"), env=env)
    assert result.returncode == 0, result.stderr
    assert read_jsonl(tmp_path / "skipped" / "metrics.jsonl")[-1]["skipped_steps"] == 3
    assert skipped.read_text().splitlines() == [
        line for i in range(3) for line in (f"forward_on_finish {i}", f"backward_on_start {i}")]

    parallel = tmp_path / "parallel.log"
    result = _run(f"hydra.run.dir={tmp_path / 'parallel'}", "trainer.progress=false",
                  "updater=parallel", "updater.accum_grad=2", "trainer.max_iterations=2",
                  *hooks(parallel, "forward_on_start", "comm_on_start", "comm_on_finish",
                         "update_on_finish"), env=env)
    assert result.returncode == 0, result.stderr
    assert parallel.read_text().splitlines() == [
        line for i in range(2) for line in (f"forward_on_start {i}", f"forward_on_start {i}",
                                            f"comm_on_start {i}", f"comm_on_finish {i}",
                                            f"update_on_finish {i}")]


def test_a_callback_target_with_wrong_arguments_is_a_config_error(tmp_path):
    (tmp_path / "hooks.py").write_text(HOOKS_MODULE)
    result = _run(f"hydra.run.dir={tmp_path / 'run'}", "trainer.progress=false",
                  "trainer.max_iterations=3",
                  "updater.callbacks.update_on_start={_target_: hooks.Recorder, nosuch: 1}",
                  env={"PYTHONPATH": str(tmp_path)})
    _assert_one_line_error(result, "updater.callbacks.update_on_start.nosuch is not an argument of "
                                   "Recorder(path, hook)")


@pytest.mark.parametrize("updater", ["standard", "parallel"])
def test_resume_with_accumulation_and_dynamic_scaling_is_bit_identical(tmp_path, updater):
    """fp16 with a scale that overflows every few steps (it grows every 4 clean steps past
    float16's range), cut at iteration 15 and resumed: the same parameters, bit for bit,
    and the same training log (skipped steps and scale included; the cut run also evaluated
    at its last iteration, 15)."""
    common = [f"updater={updater}", "updater.accum_grad=3", "loss_scale=dynamic", "precision=fp16",
              "loss_scale.scale=32768", "loss_scale.interval=4", "trainer.progress=false",
              "trainer.log_interval=5", "trainer.eval_interval=10", "trainer.checkpoint_interval=10"]
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    assert run_cli(*common, "trainer.max_iterations=30", f"hydra.run.dir={straight}").returncode == 0
    assert run_cli(*common, "trainer.max_iterations=15", f"hydra.run.dir={cut}").returncode == 0
    resumed = run_cli(f"resume={cut}", "trainer.max_iterations=30")
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_npz(straight / "model.npz"), load_npz(cut / "model.npz")
    for k in a:
        assert a[k].dtype == np.float16
        np.testing.assert_array_equal(a[k], b[k])
    rows_a, rows_b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(cut / "metrics.jsonl")
    for row in rows_a + rows_b:
        row.pop("elapsed_s")
        row.pop("time")
    rows_b[2] = {k: v for k, v in rows_b[2].items() if not k.startswith("val/")}
    assert rows_a == rows_b
    assert rows_a[-1]["skipped_steps"] > rows_a[2]["skipped_steps"]  # overflows after the cut
