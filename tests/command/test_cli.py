"""The command line end to end: training, run directory contract, resume, sweeps, bad input."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy
import pytest
from helpers import load_npz, read_jsonl, run_cli, run_files


def test_default_run_reaches_95_percent_and_fills_the_run_directory(tmp_path):
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (out,) = (tmp_path / "runs").glob("*/*")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d", f"{out.parent.name}/{out.name}")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["iteration"] == 1000
    assert summary["val/accuracy"] >= 0.95
    for key in ("epoch", "elapsed_s", "samples_per_s", "train/loss", "train/accuracy", "val/loss"):
        assert key in summary
    assert (out / ".hydra" / "config.yaml").exists()
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == list(range(50, 1001, 50))
    assert {"iteration", "epoch", "elapsed_s", "lr", "train/loss", "train/accuracy"} <= set(rows[0])
    assert "val/accuracy" in rows[4] and "val/accuracy" not in rows[0]
    params = load_npz(out / "model.npz")
    assert sorted(params) == ["l1/W", "l1/b", "l2/W", "l2/b", "l3/W", "l3/b"]
    assert params["l1/W"].shape == (64, 2)
    assert (out / "checkpoints" / "latest").read_text().strip() == "iter_00001000"
    assert "metrics (completed)" in result.stdout


def _train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", "trainer.progress=false", *args)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("optimizer", [["optimizer=adam"],
                                       ["optimizer=sgd", "optimizer.momentum=0.9",
                                        "optimizer.learning_rate=0.1"]])
def test_resume_is_bit_identical(tmp_path, optimizer):
    common = [*optimizer, "trainer.checkpoint_interval=60", "trainer.log_interval=20"]
    _train(tmp_path / "straight", "trainer.max_iterations=120", *common)
    _train(tmp_path / "split", "trainer.max_iterations=60", *common)
    result = run_cli(f"resume={tmp_path / 'split'}", "trainer.max_iterations=120",
                     "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    straight = load_npz(tmp_path / "straight" / "model.npz")
    split = load_npz(tmp_path / "split" / "model.npz")
    assert all(numpy.array_equal(straight[k], split[k]) for k in straight)
    assert json.loads((tmp_path / "split" / "summary.json").read_text())["iteration"] == 120
    rows = read_jsonl(tmp_path / "split" / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [20, 40, 60, 80, 100, 120]
    straight_rows = read_jsonl(tmp_path / "straight" / "metrics.jsonl")
    assert rows[-1]["train/loss"] == straight_rows[-1]["train/loss"]


def test_resume_from_a_named_checkpoint_and_keeps_the_run_config(tmp_path):
    out = tmp_path / "run"
    _train(out, "optimizer=sgd", "optimizer.learning_rate=0.05", "trainer.max_iterations=40",
           "trainer.checkpoint_interval=20", "trainer.keep_checkpoints=null")
    hydra_config = (out / ".hydra" / "config.yaml").read_text()
    result = run_cli(f"resume={out / 'checkpoints' / 'iter_00000020'}", "trainer.max_iterations=30",
                     "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    assert (out / ".hydra" / "config.yaml").read_text() == hydra_config
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iteration"] == 30
    assert read_jsonl(out / "metrics.jsonl")[-1]["lr"] == pytest.approx(0.05)


def test_resume_refuses_another_optimizer(tmp_path):
    out = tmp_path / "run"
    _train(out, "trainer.max_iterations=10")
    result = run_cli(f"resume={out}", "optimizer=sgd")
    assert result.returncode == 2
    assert "optimizer=adam" in result.stderr and "Traceback" not in result.stderr


def test_sweep_runs_each_job_in_its_own_directory(tmp_path):
    result = run_cli("-m", "optimizer=adam,sgd", "optimizer.learning_rate=0.1,0.01",
                     f"hydra.sweep.dir={tmp_path}", "trainer.max_iterations=30", "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    seen = set()
    for job in range(4):
        config = (tmp_path / str(job) / ".hydra" / "config.yaml").read_text()
        summary = json.loads((tmp_path / str(job) / "summary.json").read_text())
        assert summary["status"] == "completed"
        name = next(line for line in config.splitlines() if line.startswith("  _target_: ") and
                    ("Adam" in line or "SGD" in line))
        lr = read_jsonl(tmp_path / str(job) / "metrics.jsonl")[-1]["lr"]
        seen.add((name.split(".")[-1].lower(), lr))
    assert seen == {("adam", 0.1), ("adam", 0.01), ("sgd", 0.1), ("sgd", 0.01)}


def test_max_epochs_stops_training(tmp_path):
    out = tmp_path / "run"
    _train(out, "trainer.max_iterations=null", "trainer.max_epochs=2", "dataset.batch_size=64")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iteration"] == 50 and summary["epoch"] == pytest.approx(2.0)


def test_cosine_schedule_is_logged(tmp_path):
    out = tmp_path / "run"
    _train(out, "optimizer=adam", "optimizer.learning_rate=0.01", "scheduler=cosine",
           "trainer.max_iterations=100", "trainer.log_interval=10")
    for row in read_jsonl(out / "metrics.jsonl"):
        n = row["iteration"]
        assert row["lr"] == pytest.approx(0.01 * (1 + math.cos(math.pi * n / 100)) / 2, abs=1e-12)


@pytest.mark.parametrize("argument, message", [
    ("optimizer=nosuchopt", "optimizer=nosuchopt is not available; choose one of a"),
    ("optimizer.learning_rate=-1", "optimizer.learning_rate must be >= 0, got -1"),
    ("trainer.max_iterations=abc", "trainer.max_iterations must be an integer, got 'abc'"),
    ("resume=/nonexistent/run", "resume=/nonexistent/run: no such run or checkpoint directory"),
    ("dataset.batch_size=0", "dataset.batch_size must be >= 1, got 0"),
    ("+optimizer.nosuch=1", "optimizer.nosuch is not an argument of Adam"),
    ("optimizer.learning_rate=[1,", "cannot parse 'optimizer.learning_rate=[1,': no viable alternative"),
    ("~optimizer", "the config does not resolve: Interpolation key 'optimizer.learning_rate' not "
                   "found (at scheduler.base_lr)"),
    ("trainer.log_interval=${oops}", "the config does not resolve: Interpolation key 'oops' not found"),
])
def test_bad_input_gives_one_clear_message(tmp_path, argument, message):
    """Ours, Hydra's and OmegaConf's errors alike: one line, exit 2, and no run directory."""
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", argument)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}")
    if argument.startswith("optimizer="):
        assert {"adam", "sgd"} <= set(lines[0].split("choose one of ")[1].split(", "))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_new_run_never_overwrites_an_existing_one(tmp_path):
    out = tmp_path / "run"
    _train(out, "trainer.max_iterations=10")
    before = run_files(out)
    hydra_before = (out / ".hydra" / "config.yaml").read_bytes()
    result = run_cli(f"hydra.run.dir={out}", "trainer.max_iterations=20")
    assert result.returncode == 2 and "already holds a run" in result.stderr
    assert run_files(out) == before
    assert (out / ".hydra" / "config.yaml").read_bytes() == hydra_before


def test_overrides_before_a_hydra_flag_still_compose():
    """The command adds its own overrides (the run directory); placed after ``--cfg job`` they
    split the overrides in two and Hydra refused the command."""
    from trainer_run.compose.argv import with_overrides
    assert with_overrides(["optimizer=sgd", "--cfg", "job"], "a=1") == [
        "a=1", "optimizer=sgd", "--cfg", "job"]
    assert with_overrides(["-m", "x=1,2"], "a=1") == ["-m", "a=1", "x=1,2"]
    assert with_overrides(["--cfg", "job"], "a=1") == ["--cfg", "job", "a=1"]
    result = run_cli("optimizer=sgd", "optimizer.momentum=0.5", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    assert "momentum: 0.5" in result.stdout


def test_a_model_that_does_not_fit_the_data_is_named_once(tmp_path):
    result = run_cli("model=cnn", "dataset=mnist_like", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: model=cnn needs images (C, H, W); the data's examples "
                                     "have shape (784,): choose model=mlp")


def test_a_config_file_of_yours_that_is_not_yaml_is_one_line(tmp_path):
    (tmp_path / "optimizer").mkdir()
    (tmp_path / "optimizer" / "bad.yaml").write_text("lr: [1,\n")
    result = run_cli("--config-dir", tmp_path, "optimizer=bad", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2
    assert result.stderr.startswith("error: a config file does not parse: while parsing a flow node")
    assert f'in "{tmp_path}/optimizer/bad.yaml", line 2' in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("path", ["/tmp/my runs/x", "/tmp/über/x", "/tmp/a'b", '/tmp/a"b\\', "/tmp/a,b=c",
                                  "/tmp/plain-x_1.0/y"])
def test_a_printed_argument_reads_back_exactly_through_the_shell_and_hydra(path):
    """``resume with: ...`` and a sweep's continue command print ``key=<path>`` with
    cli.argv.pasteable: the shell, then Hydra's override grammar, give the path back."""
    import subprocess

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from trainer_run.compose import argv as args

    line = args.pasteable("hydra.sweep.dir", path)
    given = subprocess.run(["bash", "-c", f"printf '%s' {line}"], capture_output=True, text=True).stdout
    assert OverridesParser.create().parse_overrides([given])[0].value() == path
    assert args.value([given], "hydra.sweep.dir") == path


def test_a_run_piped_into_a_reader_that_goes_away_trains_to_its_end(tmp_path):
    """``trainer-run ... | head -1``: head exits after the first line; the run's later writes to
    stdout meet a broken pipe and go nowhere, and it trains on to write its summary and model
    (before, Rich's console exited with status 1 mid-run, leaving no summary)."""
    command = (f"{sys.executable} -m trainer_run.cli trainer.max_iterations=300 "
               f"trainer.log_interval=10 hydra.run.dir=run | head -1; exit ${{PIPESTATUS[0]}}")
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run directory: ")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["iteration"]) == ("completed", 300)
