"""runs/lr_find_job.py: ``debug=lr_find`` as a job of the lifecycle (no Hydra global): the rates
the optimizer really applied, measured from the weights, are Lightning's ladder; its folder gets
its two files and nothing of a run; a folder that is a run, bad settings and a loss that is not
finite from the start are refused in one line and leave no folder; the command line it prints."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy
import pytest
from refused_writes import FULL, disk_full_for, temporaries

from trainer_run.compose import composer
from trainer_run.errors import JobFailed
from trainer_run.runner import closing, lifecycle, lr_find_job
from trainer_run.runner.lifecycle import Job
from trainer_run.runs import directory
from trainer_run.updaters import StandardUpdater
from trainer_run.updaters.batches import Batches

TINY = ["debug=lr_find", "dataset.size=200", "dataset.batch_size=20", "model.hidden_sizes=[8]"]


def _job(out, overrides, **options) -> tuple[Job, object]:
    cfg = composer.compose(overrides, [], out)
    out.mkdir(parents=True, exist_ok=True)  # as Hydra makes it before the job
    return Job.composed(cfg.hydra, **options), composer.task(cfg)


def _measured_rates(monkeypatch) -> list[float]:
    """The rate of each optimizer step, from the main model's weights and gradients: plain SGD
    moves every weight by -rate * gradient."""
    rates = []
    apply = StandardUpdater.apply_update

    def measuring(self, iteration, scale=1.0, applied=None):
        params = list(self.get_model("main").params().values())
        before = [(p.data.copy(), p.grad.copy()) for p in params]
        apply(self, iteration, scale, applied)
        w0 = numpy.concatenate([w.ravel() for w, _ in before])
        g = numpy.concatenate([g.ravel() for _, g in before])
        w1 = numpy.concatenate([p.data.ravel() for p in params])
        big = numpy.abs(g) > 1e-3 * numpy.abs(g).max()
        rates.append(float(numpy.median((w0 - w1)[big] / g[big])))

    monkeypatch.setattr(StandardUpdater, "apply_update", measuring)
    return rates


def test_the_optimizer_applies_lightnings_ladder_and_only_the_tests_files_are_written(
        tmp_path, monkeypatch, capsys):
    rates = _measured_rates(monkeypatch)
    out = tmp_path / "find"
    job, cfg = _job(out, [*TINY, "optimizer=sgd", "optimizer.momentum=0.0", "optimizer.wd=0.0",
                          "scheduler=cosine", "trainer.lr_find.min_lr=1e-2",
                          "trainer.lr_find.num_training=13",
                          "trainer.lr_find.early_stop_threshold=null"])
    assert lifecycle.run(job, cfg) is None
    # Lightning's _ExponentialLR from 1e-2 to 1 over 13: 1e-2, then 1e-2 * 1e2 ** ((k + 1) / 13)
    ladder = [1e-2] + [1e-2 * 1e2 ** ((k + 1) / 13) for k in range(1, 13)]
    assert rates == pytest.approx(ladder, rel=1e-3)  # float32 steps; the scheduler was not built
    assert sorted(p.name for p in out.rglob("*")) == ["lr_find.json", "lr_find.png"]
    values = json.loads((out / "lr_find.json").read_text())
    assert [s["learning_rate"] for s in values["steps"]] == pytest.approx(ladder, rel=1e-12)
    shown = capsys.readouterr().out
    assert f"suggested learning rate: {values['suggestion']['learning_rate']:.3g}" in shown
    assert not directory.is_run(out)


def test_a_folder_that_is_a_run_is_refused_and_kept(tmp_path):
    out = tmp_path / "run"
    (out / ".hydra").mkdir(parents=True)
    directory.mark(out / ".hydra")
    before = sorted(p.name for p in out.rglob("*"))
    job, cfg = _job(out, TINY)
    with pytest.raises(JobFailed) as raised:
        lifecycle.run(job, cfg)
    assert str(raised.value) == (f"hydra.run.dir={out} is a run; debug=lr_find never writes into "
                                 "one: leave hydra.run.dir out (its folder is then "
                                 "lr_find/<date>/<time>) or name a new folder")
    assert sorted(p.name for p in out.rglob("*")) == before


@pytest.mark.parametrize("override, message", [
    ("trainer.lr_find.max_lr=1e-9", "trainer.lr_find.min_lr=1e-08 must be below "
                                    "trainer.lr_find.max_lr=1e-09"),
    ("trainer.lr_find.num_training=12", "trainer.lr_find.num_training=12 leaves fewer than 2 "),
])
def test_bad_settings_stop_the_job_in_one_line_and_leave_no_folder(tmp_path, override, message):
    kept = tmp_path / "kept"
    kept.mkdir()
    job, cfg = _job(kept / "lr_find" / "day" / "time", [*TINY, override], kept=kept.resolve())
    with pytest.raises(JobFailed) as raised:
        lifecycle.run(job, cfg)
    assert raised.value.exit_code == 2 and str(raised.value).startswith(message)
    assert list(kept.iterdir()) == []


def test_a_loss_not_finite_from_the_start_suggests_nothing_and_writes_nothing(tmp_path):
    data = tmp_path / "huge.npz"
    rng = numpy.random.default_rng(0)  # float32 squares of 1e25 overflow: the first loss is inf
    numpy.savez(data, x=rng.normal(size=(100, 3)).astype("float32"),
                y=numpy.full(100, 1e25, dtype="float32"))
    kept = tmp_path / "kept"
    kept.mkdir()
    job, cfg = _job(kept / "find", ["debug=lr_find", "dataset=npz", f"dataset.path={data}",
                                    "dataset.task=regression"], kept=kept.resolve())
    with pytest.raises(JobFailed) as raised:
        lifecycle.run(job, cfg)
    assert raised.value.exit_code == 3
    assert str(raised.value).startswith("the loss is inf at the first step of the range test, "
                                        "before any update (learning rate 1e-08)")
    assert list(kept.iterdir()) == []


@pytest.mark.parametrize("refused", [lr_find_job.VALUES, lr_find_job.PICTURE])
def test_a_refused_write_is_one_line_with_exit_status_4(tmp_path, monkeypatch, refused):
    if refused == lr_find_job.PICTURE:
        pytest.importorskip("matplotlib")
    disk_full_for(monkeypatch, refused)
    out = tmp_path / "find"
    job, cfg = _job(out, [*TINY, "trainer.lr_find.num_training=20"])
    with pytest.raises(JobFailed) as raised:
        lifecycle.run(job, cfg)
    assert (str(raised.value), raised.value.exit_code) == (
        f"cannot write {out / refused}: {FULL}", 4)
    assert temporaries(out) == []


def test_the_command_line_drops_the_test_and_sets_the_rate():
    job = SimpleNamespace(command="trainer-run", hydra={"runtime": {"config_sources": [
        {"path": "/my conf", "provider": "command-line", "schema": "file"},
        {"path": "trainer_run.configs", "provider": "main", "schema": "pkg"}]}},
        overrides=["model=cnn", "debug=lr_find", "trainer.lr_find.max_lr=10",
                   "optimizer.learning_rate=0.5", "dataset.path=my data.csv"])
    assert lr_find_job.command_line(job, 0.0012345) == (
        "trainer-run --config-dir '/my conf' model=cnn 'dataset.path=my data.csv' "
        "optimizer.learning_rate=0.00123")
    job.command = closing.PYTHON  # a test started from Python: the call that trains
    assert lr_find_job.command_line(job, 0.0012345) == (
        "trainer_run.train(['model=cnn', 'dataset.path=my data.csv', "
        "'optimizer.learning_rate=0.00123'], config_dir='/my conf')")


def test_a_test_that_diverges_at_once_draws_its_curve_and_suggests_nothing(tmp_path, capsys):
    out = tmp_path / "find"
    job, cfg = _job(out, [*TINY, "optimizer=sgd", "trainer.lr_find.min_lr=1e3",
                          "trainer.lr_find.max_lr=1e6"])
    assert lifecycle.run(job, cfg) is None
    values = json.loads((out / "lr_find.json").read_text())
    assert (values["suggestion"], values["stopped"], len(values["steps"])) == (None, "diverging", 2)
    assert (out / "lr_find.png").is_file()
    shown = capsys.readouterr()
    assert "the range test stopped after 2 of 100 steps: the smoothed loss rose above " in shown.out
    assert "no learning rate suggested: the test's 2 steps leave fewer than 2 finite " in shown.err
    assert "train with it" not in shown.out


def _drawn(monkeypatch, count: int) -> list:
    """The first ``count`` batches any updater draws, each as its parts' host arrays."""
    drawn = []
    draw = Batches.next_parts

    def recording(self, iterator, backends):
        parts, size = draw(self, iterator, backends)
        if len(drawn) < count:
            drawn.append([[numpy.array(a) for a in part] for part in parts])
        return parts, size

    monkeypatch.setattr(Batches, "next_parts", recording)
    return drawn


def test_the_range_test_trains_on_the_first_batches_of_the_run(tmp_path, monkeypatch):
    """The test is the run's build: with transforms drawn per batch and batches gathered on
    worker threads, its first batches are the run's of the same seed, to the bit."""
    images = tmp_path / "images.npz"
    rng = numpy.random.default_rng(1)
    numpy.savez(images, x=rng.integers(0, 256, size=(80, 3, 8, 8), dtype=numpy.uint8),
                y=rng.integers(0, 4, size=80).astype(numpy.int64))
    common = ["dataset=npz", f"dataset.path={images}", "dataset.normalize=per_channel",
              "model=mlp", "model.hidden_sizes=[8]", "dataset.batch_size=10", "seed=5",
              "dataset.transforms=[random_crop,horizontal_flip]", "dataset.workers=2",
              "trainer.progress=false"]
    found = _drawn(monkeypatch, 4)
    job, cfg = _job(tmp_path / "find", ["debug=lr_find", *common, "trainer.lr_find.num_training=13",
                                        "trainer.lr_find.early_stop_threshold=null"])
    assert lifecycle.run(job, cfg) is None
    tested = list(found)
    found.clear()
    job, cfg = _job(tmp_path / "run", [*common, "trainer.max_iterations=4"])
    assert lifecycle.run(job, cfg).updater.iteration == 4
    assert len(tested) == len(found) == 4
    for a, b in zip(tested, found):
        for part_a, part_b in zip(a, b, strict=True):
            for x, y in zip(part_a, part_b, strict=True):
                numpy.testing.assert_array_equal(x, y, strict=True)
    assert not numpy.array_equal(tested[0][0][0], tested[1][0][0])  # batches, not one repeated
