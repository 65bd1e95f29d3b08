"""What a run and trainer-report say and write, as a careful user checks it (issue 36 items 15,
16, 18): ``summary.json``'s ``samples_per_s`` is the training throughput alone; trainer-report
writes its plot where the user asks, by default in the current folder, never into a run folder
it reads; ``precision=fp16`` on the NumPy backend warns at start that it is slow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import read_jsonl, run_cli

QUIET = ("trainer.progress=false",)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("precision, model, warned", [
    ("fp16", "mlp", True), ("fp16", "logistic_regression", True),
    ("fp32", "mlp", False), (None, "mlp", False)])
def test_fp16_on_numpy_warns_once_at_start_that_it_is_slow(tmp_path, precision, model, warned):
    chosen = [f"precision={precision}"] if precision else []
    result = run_cli("backend=numpy", *chosen, f"model={model}", "trainer.max_iterations=3",
                     *QUIET, f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "fp16" in line]
    if warned:
        assert said == ["warning: precision=fp16 on the NumPy backend trains many times slower than "
                        "fp32 (NumPy has no fast float16 arithmetic): choose precision=fp32 on the "
                        "CPU, or backend=cupy to train in fp16 on a GPU"]
    else:
        assert said == [] and "warning:" not in result.stderr


NAP_S = 0.05


@pytest.fixture()
def napping(tmp_path):
    """A folder with a callback that sleeps NAP_S seconds after every iteration: time the
    run spends outside its training steps, as an expensive evaluation or checkpoint is."""
    (tmp_path / "nap.py").write_text(
        "import time\n\n"
        "class Nap:\n"
        "    def __call__(self, trainer):\n"
        f"        time.sleep({NAP_S})\n")
    return tmp_path


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_samples_per_s_leaves_out_the_time_extensions_take(napping):
    iterations, batch = 20, 50
    result = run_cli("+callbacks.nap._target_=nap.Nap", f"trainer.max_iterations={iterations}",
                     f"dataset.batch_size={batch}", *QUIET, "hydra.run.dir=run", cwd=napping)
    assert result.returncode == 0, result.stderr
    summary = _summary(napping / "run")
    with_naps = iterations * batch / (iterations * NAP_S)  # the rate the naps alone allow
    assert summary["elapsed_s"] > iterations * NAP_S
    assert summary["samples_per_s"] > 5 * with_naps


SLOW_EVAL = textwrap.dedent(f"""\
    import time

    from trainer_run import functions as F
    from trainer_run.models import Linear, Module

    class SlowToEvaluate(Module):
        def __init__(self, in_size, out_size, backend):
            self.fc = Linear(in_size, out_size, backend)

        def forward(self, x):
            return self.fc(x)

        def __call__(self, x, t):
            if not self.training:  # every batch of an evaluation
                time.sleep({NAP_S})
            y = self.forward(x)
            return {{"loss": F.softmax_cross_entropy(y, t), "accuracy": F.accuracy(y, t)}}
    """)


def test_samples_per_s_does_not_drop_with_an_expensive_evaluation(tmp_path):
    """An evaluation after every iteration that takes NAP_S per batch: the training throughput
    is not divided by the evaluations' time, which is most of the run's."""
    (tmp_path / "slow_eval.py").write_text(SLOW_EVAL)
    iterations, batch, val = 20, 50, 200  # spirals: 1000 examples, 200 of them validation
    result = run_cli("+model._target_=slow_eval.SlowToEvaluate", "dataset.size=1000",
                     f"dataset.batch_size={batch}", f"trainer.max_iterations={iterations}",
                     "trainer.eval_interval=1", *QUIET, "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = _summary(tmp_path / "run")
    evaluating_s = iterations * (val // batch) * NAP_S
    assert summary["elapsed_s"] > evaluating_s
    assert summary["samples_per_s"] > 5 * iterations * batch / evaluating_s


def _report(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def _contents(folder: Path) -> dict:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def colleague(tmp_path_factory) -> Path:
    """A folder holding a colleague's run (``theirs``) and a sweep of two runs (``sweep``), as
    copied from elsewhere."""
    root = tmp_path_factory.mktemp("colleague")
    quick = ("trainer.max_iterations=20", "trainer.eval_interval=10", "trainer.log_interval=10", *QUIET)
    made = [run_cli(*quick, f"hydra.run.dir={root / 'theirs'}"),
            run_cli("-m", "optimizer.learning_rate=0.1,0.01", f"hydra.sweep.dir={root / 'sweep'}", *quick)]
    for result in made:
        assert result.returncode == 0, result.stderr
    return root


@pytest.mark.parametrize("given", [["theirs"], ["sweep"], ["theirs", "sweep"], ["sweep/0", "sweep/1"]])
def test_the_report_writes_its_plot_into_the_current_folder_never_into_what_it_reads(
        colleague, tmp_path, given):
    copied = tmp_path / "copied"
    for name in ("theirs", "sweep"):
        shutil.copytree(colleague / name, copied / name)
    before = _contents(copied)
    here = tmp_path / "here"
    here.mkdir()
    result = _report(*(copied / g for g in given), cwd=here)
    assert result.returncode == 0, result.stderr
    assert _contents(copied) == before
    assert (here / "comparison.png").read_bytes()[:8] == PNG
    assert "plot: comparison.png" in result.stdout


@pytest.mark.parametrize("flag", ["--plot", "--csv"])
@pytest.mark.parametrize("place", ["theirs", "theirs/checkpoints", "link", "sweep/1"])
def test_an_output_named_inside_a_run_it_reads_is_one_error_line(colleague, tmp_path, flag, place):
    copied = tmp_path / "copied"
    for name in ("theirs", "sweep"):
        shutil.copytree(colleague / name, copied / name)
    (copied / "link").symlink_to(copied / "theirs")  # the same run by another name
    run = "sweep/1" if place == "sweep/1" else "theirs"
    before = _contents(copied / run)
    target = copied / place / "out.file"
    result = _report(copied / run, flag, target, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {flag} {target} is inside the run {copied / run}, which trainer-report reads and "
        "never writes into; give a file elsewhere (by default the current folder)"]
    assert _contents(copied / run) == before and not (tmp_path / "comparison.png").exists()


def test_run_from_inside_a_run_without_plot_the_table_comes_with_a_warning(colleague, tmp_path):
    run = tmp_path / "theirs"
    shutil.copytree(colleague / "theirs", run)
    before = _contents(run)
    for folder, given in ((run, "."), (run / "checkpoints", "..")):
        result = _report(given, cwd=folder)
        assert result.returncode == 0, result.stderr
        assert "│" in result.stdout and _contents(run) == before
        assert result.stderr.splitlines() == [
            f"warning: no plot: the current folder is in the run {given}, which trainer-report "
            "reads and never writes into; choose where it goes with --plot FILE"]
    result = _report(".", "--plot", tmp_path / "mine.png", cwd=run)  # asked for elsewhere: drawn
    assert result.returncode == 0 and (tmp_path / "mine.png").read_bytes()[:8] == PNG


EVERY_2 = ("trainer.max_iterations=12", "trainer.eval_interval=2", "trainer.log_interval=6",
           "dataset.size=200", *QUIET)


def _best_shown(stdout: str) -> tuple[str, int]:
    """The last progress line's ``best val/loss V @N``."""
    line = [line for line in stdout.splitlines() if "best val/loss" in line][-1]
    value, at = line.split("best val/loss ")[1].split()[:2]
    return value, int(at.lstrip("@"))


def test_every_evaluation_is_its_own_record_at_its_iteration(tmp_path):
    """Evaluations every 2 iterations, log points every 6: one val/loss record per evaluation
    (never a mean of several), each what trainer-eval measures on that iteration's checkpoint;
    the training rows stay at the log points; the progress line's best is their minimum."""
    from trainer_run.runner.evaluation import evaluate

    out = tmp_path / "run"
    done = run_cli(*EVERY_2, "trainer.checkpoint_interval=2", "trainer.keep_checkpoints=null",
                   f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    assert [row["iteration"] for row in rows if "val/loss" in row] == [2, 4, 6, 8, 10, 12]
    assert [row["iteration"] for row in rows if "train/loss" in row] == [6, 12]
    records = {row["iteration"]: row["val/loss"] for row in rows if "val/loss" in row}
    for iteration, value in records.items():
        measured = evaluate(out, [f"checkpoint={out / 'checkpoints' / f'iter_{iteration:08d}'}",
                                  "split=val"])
        assert measured["checkpoint"]["iteration"] == iteration
        assert measured["metrics"]["val/loss"] == pytest.approx(value, rel=1e-6), iteration
    best = min(records, key=records.get)
    assert _best_shown(done.stdout) == (f"{records[best]:.4g}", best)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"]["best"] == records[best] and summary["val/loss"] == records[12]
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    csv_rows = [dict(zip(header, line.split(","))) for line in
                (out / "metrics.csv").read_text().splitlines()[1:]]
    assert {int(r["iteration"]): float(r["val/loss"]) for r in csv_rows if r["val/loss"]} == records


def test_the_swa_evaluation_is_a_record_and_the_terminal_names_it(tmp_path):
    """trainer.swa.start=0.5: the SWA weights' val/swa/ metrics are a row of metrics.jsonl at
    the last iteration, equal to summary.json's, and the final table shows them."""
    out = tmp_path / "run"
    pytest.importorskip("matplotlib")
    from trainer_run.training.loggers.plot import Plot

    done = run_cli(*EVERY_2, "trainer.swa.start=0.5", "trainer.swa.interval=2",
                   "logger=[jsonl,plot]", f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    swa = [row for row in rows if "val/swa/loss" in row]
    assert len(swa) == 1 and swa[0]["iteration"] == 12 and swa[0] is rows[-1]
    assert swa[0]["val/swa/loss"] == summary["val/swa/loss"]
    assert swa[0]["val/swa/accuracy"] == summary["val/swa/accuracy"]
    assert not any(key.startswith("test/") for key in swa[0])
    shown = done.stdout.replace("┃", " ").split()
    assert "val/swa/" in shown and f"{summary['val/swa/loss']:.4g}" in done.stdout
    assert summary["val/loss"] == [row for row in rows if "val/loss" in row][-1]["val/loss"]
    plot = Plot()                       # plot.png's loss panel, drawn from the same rows
    plot.start(out, rows)
    loss = plot.figure().axes[0]
    drawn = {line.get_label(): line.get_data() for line in loss.get_lines()}
    assert [list(xy) for xy in drawn["val/swa/loss"]] == [[12], [summary["val/swa/loss"]]]
