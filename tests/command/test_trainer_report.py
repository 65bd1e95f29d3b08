"""``trainer-report DIR...``: the ranked table of any run and sweep folders (the same as the end
of a sweep), the comparison plot of the objective curves, and its one-line errors."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import read_jsonl, run_cli

from trainer_run import results
from trainer_run.cli import report_command
from trainer_run.results import comparison_plot
from trainer_run.results import curves as comparison_curves

QUICK = ("trainer.max_iterations=40", "trainer.eval_interval=10", "trainer.log_interval=10",
         "trainer.progress=false")
PNG = b"\x89PNG\r\n\x1a\n"


def report(*args, cwd=None, columns=200) -> subprocess.CompletedProcess:
    """``trainer-report <args>`` as ``python -m trainer_run.cli.report_command``, on a console
    ``columns`` wide."""
    return subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A sweep of three learning rates, and a second sweep whose two jobs serve as single runs."""
    root = tmp_path_factory.mktemp("report")
    for name, rates in (("sweep", "0.1,0.01,0.001"), ("other", "0.3,0.03")):
        result = run_cli("-m", f"optimizer.learning_rate={rates}", f"hydra.sweep.dir={root / name}", *QUICK)
        assert result.returncode == 0, result.stderr
    return root


def _table_jobs(stdout: str) -> list[str]:
    """The job column of the printed table, top down."""
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in stdout.splitlines() if "│" in line]
    return [row[1] for row in cells if row and row[0].isdigit()]


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _best(run: Path) -> float:
    return json.loads((run / "summary.json").read_text())["objective"]["best"]


def test_a_sweep_is_ranked_as_in_its_results_csv(sweeps, tmp_path):
    sweep = sweeps / "sweep"
    result = report(sweep, "--plot", tmp_path / "p.png")
    assert result.returncode == 0, result.stderr
    ranked = _csv_rows(sweep / "results.csv")
    assert _table_jobs(result.stdout) == [row["job"] for row in ranked]
    assert [row["job"] for row in ranked] == sorted("012", key=lambda job: _best(sweep / job))
    for row in ranked:
        assert f"{float(row['best']):.4g}" in result.stdout
    assert "ranked by val/loss (min)" in result.stdout and "learning_rate" in result.stdout
    assert f"plot: {tmp_path / 'p.png'}" in result.stdout


def test_run_folders_and_a_sweep_together_and_the_csv(sweeps, tmp_path):
    runs = [sweeps / "other" / "0", sweeps / "other" / "1"]
    out = tmp_path / "both.csv"
    result = report(*runs, sweeps / "sweep", "--csv", out, "--plot", tmp_path / "p.png")
    assert result.returncode == 0, result.stderr
    folders = {str(run): run for run in runs} | {job: sweeps / "sweep" / job for job in "012"}
    expected = sorted(folders, key=lambda job: _best(folders[job]))  # ties keep this order
    assert _table_jobs(result.stdout) == expected
    rows = _csv_rows(out)
    assert [row["job"] for row in rows] == expected
    assert [float(row["best"]) for row in rows] == [_best(folders[job]) for job in expected]
    assert rows[0]["overrides"] == " ".join(json.loads((folders[expected[0]] / "summary.json")
                                                       .read_text())["overrides"])


def test_the_console_script_reports_a_sweep(sweeps, tmp_path):
    script = Path(sys.executable).parent / "trainer-report"
    assert script.exists()
    result = subprocess.run([str(script), str(sweeps / "sweep"), "--plot", str(tmp_path / "p.png")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _table_jobs(result.stdout) == [row["job"] for row in _csv_rows(sweeps / "sweep" / "results.csv")]
    help_text = subprocess.run([str(script), "--help"], capture_output=True, text=True).stdout
    assert "--plot FILE" in help_text and "examples:" in help_text


def test_the_plot_is_a_png_of_the_expected_size(sweeps, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    target = tmp_path / "curves.png"
    assert report(sweeps / "sweep", "--plot", target).returncode == 0
    assert target.read_bytes()[:8] == PNG
    width, height = (int(inches * comparison_plot.DPI) for inches in comparison_plot.SIZE)
    assert image.imread(target).shape == (height, width, 4)
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # no temporary file left


def test_the_default_plot_goes_into_the_current_folder(sweeps, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(sweeps / "sweep", sweep)
    result = report(sweep, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "comparison.png").read_bytes()[:8] == PNG
    assert "plot: comparison.png" in result.stdout and not (sweep / "comparison.png").exists()


def test_the_curves_are_the_logged_values(sweeps, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(sweeps / "sweep", sweep)
    (sweep / "2" / "summary.json").unlink()  # unfinished: its objective comes from its config
    rows = results.collect([sweep])
    assert comparison_curves.metric(rows) == ("val/loss", "min")
    for name in ("val/loss", "train/loss"):
        curves = comparison_curves.curves(rows, name, "min")
        assert [c.label for c in curves] == ["learning_rate=0.1", "learning_rate=0.01", "learning_rate=0.001"]
        for job, curve in zip("012", curves):
            logged = [row for row in read_jsonl(sweep / job / "metrics.jsonl") if name in row]
            assert curve.values == [row[name] for row in logged] and len(logged) == 4
            assert curve.iterations == [row["iteration"] for row in logged] == [10, 20, 30, 40]
            low = min(logged, key=lambda row: row[name])
            assert curve.best == (low["iteration"], low[name])
    figure = comparison_curves.curves(rows, "val/loss", "min")
    comparison_plot.draw(figure, "val/loss", "min", tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG


def test_a_row_torn_by_a_full_disk_is_left_out_with_a_warning(sweeps, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(sweeps / "sweep", sweep)
    log = sweep / "1" / "metrics.jsonl"
    rows = len(read_jsonl(log))
    log.write_text(log.read_text() + '{"iteration": 50, "val/lo')
    result = report(sweep, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"warning: {log} line {rows + 1} was cut short while "
                                          "being written; left out"]
    assert (tmp_path / "comparison.png").exists()


@pytest.mark.parametrize("given", ["missing", "unrelated"])
def test_a_folder_that_is_not_a_run_exits_2_with_one_line(sweeps, tmp_path, given):
    folder = tmp_path / "given"
    if given == "unrelated":
        (folder / "notes").mkdir(parents=True)
    result = report(sweeps / "sweep", folder, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(folder) in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "comparison.png").exists()
    if given == "unrelated":
        assert results.NOT_A_RUN in lines[0] and sorted(p.name for p in folder.iterdir()) == ["notes"]


def test_a_corrupt_metrics_file_is_named_in_one_line(sweeps, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(sweeps / "sweep", sweep)
    log = sweep / "1" / "metrics.jsonl"
    log.write_text('{"iteration": 10, "val/loss": 0.5\n{"iteration": 20}\n')
    result = report(sweep, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {log} is not valid JSON lines: line 1 column 34: "
                                          "Expecting ',' delimiter"]
    assert not (tmp_path / "comparison.png").exists()


def test_without_matplotlib_the_table_is_printed_and_one_line_says_how_to_plot(sweeps, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from trainer_run.cli.report_command import main; main(sys.argv[1:])")
    result = subprocess.run([sys.executable, "-c", code, str(sweeps / "sweep"), "--plot",
                             str(tmp_path / "p.png")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(_table_jobs(result.stdout)) == 3
    assert result.stderr.splitlines() == ['warning: no plot: the comparison plot needs matplotlib '
                                          '(pip install "trainer-run[plot]")']
    assert not (tmp_path / "p.png").exists()


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys, tmp_path):
    def interrupted(folders, *_):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "collect", interrupted)
    with pytest.raises(SystemExit) as caught:
        report_command.main([str(tmp_path)])
    assert caught.value.code == 130
    assert capsys.readouterr().err == "error: stopped by SIGINT (Ctrl-C)\n"


@pytest.fixture()
def read_only(tmp_path):
    """A folder where no file can be created, even by root (the immutable attribute); skipped
    where the file system has none."""
    import shutil

    folder = tmp_path / "sealed"
    folder.mkdir()
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    if shutil.which("chattr") is None or made.returncode != 0:
        pytest.skip("no immutable attribute on this file system")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_folder_the_picture_cannot_go_into_still_gets_its_table(sweeps, tmp_path, read_only):
    import shutil

    subprocess.run(["chattr", "-i", str(read_only)], check=True)
    shutil.copytree(sweeps / "sweep", read_only, dirs_exist_ok=True)
    subprocess.run(["chattr", "+i", str(read_only)], check=True)
    result = report(read_only, cwd=read_only)  # the default place: the current folder
    assert result.returncode == 0, result.stderr
    assert len(_table_jobs(result.stdout)) == 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: no plot: ")
    assert "comparison.png" in lines[0] and lines[0].endswith("--plot FILE")
    asked = report(read_only, "--plot", read_only / "mine.png")  # asked for there: an error
    assert asked.returncode == 4 and asked.stderr.startswith("error: ")


def _summary(i: int) -> dict:
    """A finished run of a wide sweep: four overrides that vary (one with a long value), two
    shared; the same status and best iteration for all; validation and test metrics."""
    overrides = [f"optimizer.learning_rate={0.1 / (i + 1):.6f}", f"optimizer.wd={i * 1e-4}",
                 f"dataset.path=data/folder_{i}/train_examples.npz", f"model.hidden_sizes=[{i}00,{i}00]",
                 "trainer.max_iterations=1000", "optimizer=sgd"]
    return {"iteration": 1000, "elapsed_s": 61.0 + i, "status": "completed",
            "stop_reason": "max_iterations", "overrides": overrides,
            "objective": {"metric": "val/loss", "mode": "min", "best": 0.5 - 0.01 * i,
                          "best_iteration": 1000, "final": 0.5 - 0.01 * i},
            "val/loss": 0.5 - 0.01 * i, "val/accuracy": 0.9 + 0.001 * i,
            "test/loss": 0.55 - 0.01 * i, "test/accuracy": 0.89 + 0.001 * i}


def test_trainer_report_fits_100_columns_and_shows_every_column_that_varies(tmp_path):
    sweep = tmp_path / "sweep"
    for i in range(4):
        (sweep / str(i)).mkdir(parents=True)
        (sweep / str(i) / "summary.json").write_text(json.dumps(_summary(i)))
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    result = subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", "sweep",
                             "--plot", "c.png"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, result.stdout
    assert lines[0] == "sweep results: ranked by val/loss (min)"
    assert lines[1] == ("all jobs: trainer.max_iterations=1000 optimizer=sgd; best at iteration "
                        "1000; status max_iterations")
    text = "".join(line.replace("│", " ").replace("┃", " ") for line in lines)
    words = text.split()
    for i in range(4):
        summary = _summary(i)
        for key in ("val/loss", "val/accuracy", "test/loss", "test/accuracy"):
            assert f"{summary[key]:.4g}" in words
        for override in summary["overrides"][:2] + summary["overrides"][3:4]:
            key, value = override.split("=")
            assert f"{key.rsplit('.', 1)[-1]}={results.runs.value_text(value)}" in words
        assert "folder_" in text and f"1m0{1 + i}s" in words
    for name in ("learning_rate", "wd", "path", "hidden_sizes", "val/", "test/", "accuracy",
                 "loss", "best", "time"):
        assert name in text


def test_trainer_report_draws_a_seed_sweep_as_means(tmp_path, monkeypatch):
    """Two optimizers by two seeds, written as runs: the curves the command draws are the
    per-iteration means of the logged values, with their lowest and highest."""
    sweep = tmp_path / "sweep"
    logged = {(0, "adam"): [0.5, 0.1], (0, "sgd"): [0.6, 0.4], (1, "adam"): [0.7, 0.3],
              (1, "sgd"): [0.6, 0.2]}
    for job, ((seed, name), values) in enumerate(logged.items()):
        run = sweep / str(job)
        run.mkdir(parents=True)
        summary = {"status": "completed", "stop_reason": "max_iterations", "iteration": 20,
                   "overrides": [f"seed={seed}", f"optimizer={name}"],
                   "objective": {"metric": "val/loss", "mode": "min", "best": min(values),
                                 "best_iteration": 20, "final": values[-1]}}
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "metrics.jsonl").write_text("".join(
            json.dumps({"iteration": 10 * (i + 1), "val/loss": v}) + "\n" for i, v in enumerate(values)))
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    from trainer_run.cli import report_command
    from trainer_run.results import comparison_plot

    drawn = []
    monkeypatch.setattr(comparison_plot, "draw", lambda made, *args: drawn.append(made))
    with pytest.raises(SystemExit) as ended:
        report_command.main([str(sweep)])
    assert ended.value.code == 0
    adam, sgd = drawn[0]
    assert (adam.label, adam.values, adam.low, adam.high) == (
        "optimizer=adam (2 seeds)", pytest.approx([0.6, 0.2]), [0.5, 0.1], [0.7, 0.3])
    assert (sgd.label, sgd.values) == ("optimizer=sgd (2 seeds)", pytest.approx([0.6, 0.3]))
    result = subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", str(sweep)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
