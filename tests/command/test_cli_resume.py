"""What a resume does with the overrides on its command line and where it writes
(cli/resume.py): hyper-parameters take effect from the resumed iteration, keys that would make
another run are refused in one line, a checkpoint outside a run's checkpoints folder writes
only into a new directory, and a run already at its limit is left as it was."""

from __future__ import annotations

import json

import numpy
import pytest
from helpers import load_npz, read_jsonl, run_cli, run_files

QUIET = "trainer.progress=false"
SGD = ("optimizer=sgd", "optimizer.learning_rate=0.05", "trainer.log_interval=10",
       "trainer.checkpoint_interval=10", "trainer.keep_checkpoints=null")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """Plain SGD (no momentum), 20 iterations, checkpoints at 10 and 20."""
    out = tmp_path_factory.mktemp("base") / "run"
    result = run_cli(f"hydra.run.dir={out}", *SGD, "trainer.max_iterations=20", QUIET)
    assert result.returncode == 0, result.stderr
    return out


def _copy(run, tmp_path):
    import shutil

    target = tmp_path / "run"
    shutil.copytree(run, target)
    return target


def _resume(run, *args):
    result = run_cli(f"resume={run}", *args, QUIET)
    assert result.returncode == 0, result.stderr
    return result


def _one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("override, scheduler, expected", [
    ("optimizer.learning_rate=0.01", (), 0.01),
    ("scheduler.base_lr=0.02", (), 0.02),
    # factor 0.5 every 10 updates: update 21..30 is after 2 reductions, 31..40 after 3
    ("optimizer.learning_rate=0.01", ("scheduler=factor", "scheduler.step=10",
                                      "scheduler.factor=0.5"), None),
])
def test_a_new_learning_rate_takes_effect_from_the_resumed_iteration(tmp_path, override, scheduler,
                                                                     expected):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", *SGD, *scheduler, "trainer.max_iterations=20", QUIET)
    assert result.returncode == 0, result.stderr
    _resume(out, override, "trainer.max_iterations=40")
    lrs = {r["iteration"]: r["lr"] for r in read_jsonl(out / "metrics.jsonl")}
    if expected is None:  # the factor schedule: the same reductions, applied to the new rate
        assert [lrs[n] for n in (10, 20)] == [0.05, pytest.approx(0.05 * 0.5)]
        assert [lrs[n] for n in (30, 40)] == [pytest.approx(0.01 * 0.5 ** 2),
                                              pytest.approx(0.01 * 0.5 ** 3)]
    else:
        assert [lrs[n] for n in (10, 20, 30, 40)] == [0.05, 0.05, expected, expected]
    config = json.loads((out / "checkpoints" / "iter_00000040" / "state.json").read_text())["config"]
    assert str(override.split("=")[1]) in json.dumps(config)


def test_clip_gradient_on_resume_bounds_every_later_step(tmp_path, base_run):
    """Plain SGD with clip_gradient c moves each weight by at most lr * c per step (a closed
    form), so 20 clipped steps move no weight more than 20 * 0.05 * 1e-4."""
    run = _copy(base_run, tmp_path)
    before = load_npz(run / "model.npz")
    _resume(run, "optimizer.clip_gradient=1e-4", "trainer.max_iterations=40")
    after = load_npz(run / "model.npz")
    moved = max(float(numpy.abs(after[k] - before[k]).max()) for k in before)
    assert 0 < moved <= 20 * 0.05 * 1e-4 * (1 + 1e-5)


def test_a_diverging_rate_with_nan_policy_skip_on_resume_skips_instead_of_stopping(tmp_path, base_run):
    run = _copy(base_run, tmp_path)
    before = load_npz(run / "model.npz")
    result = run_cli(f"resume={run}", "optimizer.learning_rate=1e30", "updater.nan_policy=skip",
                     "trainer.max_iterations=40", QUIET)
    assert result.returncode == 0, result.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["skipped_steps"] > 0
    assert any(not numpy.array_equal(load_npz(run / "model.npz")[k], before[k]) for k in before)


def test_new_intervals_apply_after_the_resumed_iteration(tmp_path, base_run):
    run = _copy(base_run, tmp_path)
    _resume(run, "trainer.log_interval=5", "trainer.checkpoint_interval=15",
            "trainer.max_iterations=40")
    assert [r["iteration"] for r in read_jsonl(run / "metrics.jsonl")] == [10, 20, 25, 30, 35, 40]
    names = sorted(p.name for p in (run / "checkpoints").iterdir() if p.is_dir())
    assert names == ["iter_00000010", "iter_00000020", "iter_00000030", "iter_00000040"]


def test_a_new_batch_size_is_allowed_and_used(tmp_path, base_run):
    run = _copy(base_run, tmp_path)
    rows = read_jsonl(run / "metrics.jsonl")
    assert rows[-1]["epoch"] == 20 * 50 / 1600        # batch 50 of the 1,600 training examples
    _resume(run, "dataset.batch_size=64", "trainer.max_iterations=30")
    last = read_jsonl(run / "metrics.jsonl")[-1]
    assert last["epoch"] == pytest.approx((20 * 50 + 10 * 64) / 1600)


@pytest.mark.parametrize("override, shown", [
    ("seed=1", "seed=0; seed=1"),
    ("model.hidden_sizes=[8]", "model.hidden_sizes=[64, 64]; model.hidden_sizes=[8]"),
    ("dataset.size=200", "dataset.size=2000; dataset.size=200"),
    ("optimizer.multi_precision=true", "optimizer.multi_precision=False; optimizer.multi_precision=True"),
    ("backend.dtype=float16", "backend.dtype=float32; backend.dtype=float16"),
])
def test_an_override_that_would_make_another_run_is_refused_and_nothing_changes(tmp_path, base_run,
                                                                              override, shown):
    run = _copy(base_run, tmp_path)
    before = run_files(run)
    result = run_cli(f"resume={run}", override, "trainer.max_iterations=40", QUIET)
    assert _one_error(result) == (f"error: resume keeps the run's {shown} would make a different run "
                                  "(its checkpoint was trained with the other), so start a new one "
                                  "instead")
    assert run_files(run) == before


def test_the_same_value_of_a_fixed_key_is_accepted(tmp_path, base_run):
    run = _copy(base_run, tmp_path)
    _resume(run, "seed=0", "model.hidden_sizes=[64,64]", "trainer.max_iterations=30")
    assert read_jsonl(run / "metrics.jsonl")[-1]["iteration"] == 30


def test_a_checkpoint_outside_a_runs_folder_never_writes_into_its_grandparent(tmp_path, base_run):
    """The probe: resume=victim/imported/iter_N overwrote victim's files and pruned its
    checkpoints. Now it is refused, and with a new hydra.run.dir it continues there."""
    import shutil

    victim = _copy(base_run, tmp_path)
    shutil.copytree(victim / "checkpoints" / "iter_00000010", victim / "imported" / "iter_00000010")
    before = run_files(victim)
    kept = sorted(p.name for p in (victim / "checkpoints").iterdir())
    result = run_cli(f"resume={victim / 'imported' / 'iter_00000010'}", "trainer.max_iterations=30",
                     "trainer.keep_checkpoints=1", QUIET)
    assert _one_error(result) == (f"error: checkpoint {victim / 'imported' / 'iter_00000010'} is not in "
                                  "a run's checkpoints folder, so it belongs to no run; continue it "
                                  "as a new run with hydra.run.dir=<new directory>")
    refused = run_cli(f"resume={victim / 'imported'}", f"hydra.run.dir={victim}", QUIET)
    assert "already holds a run" in _one_error(refused)
    assert run_files(victim) == before
    assert sorted(p.name for p in (victim / "checkpoints").iterdir()) == kept

    fork = tmp_path / "fork"
    _resume(victim / "imported" / "iter_00000010", f"hydra.run.dir={fork}", "trainer.max_iterations=20")
    assert run_files(victim) == before
    # the fork continued from iteration 10 exactly as the original did
    assert load_npz(fork / "model.npz").keys() == load_npz(victim / "model.npz").keys()
    for k, v in load_npz(victim / "model.npz").items():
        assert numpy.array_equal(load_npz(fork / "model.npz")[k], v), k
    assert (fork / ".hydra" / "config.yaml").exists()


def _tree(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_checkpoint_copied_into_a_folder_that_is_not_a_run_never_writes_into_it(tmp_path, base_run):
    """The probe: a checkpoint copied into <folder>/checkpoints/ of a folder holding the user's
    own model.npz and summary.json; resume=<folder>/checkpoints/iter_N overwrote both. A folder
    is a run only with our record (.hydra/), so the resume is refused, the folder untouched."""
    import shutil

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "model.npz").write_bytes(b"the user's own model")
    (folder / "summary.json").write_text('{"mine": true}')
    shutil.copytree(base_run / "checkpoints" / "iter_00000010", folder / "checkpoints" / "iter_00000010")
    before = _tree(folder)
    for target in (folder / "checkpoints" / "iter_00000010", folder):
        result = run_cli(f"resume={target}", "trainer.max_iterations=30", QUIET)
        assert _one_error(result) == (
            f"error: checkpoint {folder / 'checkpoints' / 'iter_00000010'} is in {folder}, which is "
            "not a run (it has no .hydra/trainer-run.json of trainer-run's, nor your signature on "
            "its config), so it belongs to no run; "
            "continue it as a new run with hydra.run.dir=<new directory>")
        assert _tree(folder) == before
    fork = tmp_path / "fork"
    _resume(folder / "checkpoints" / "iter_00000010", f"hydra.run.dir={fork}", "trainer.max_iterations=20")
    assert _tree(folder) == before and (fork / "model.npz").exists()


def test_resuming_a_run_that_has_nothing_to_do_leaves_its_summary(tmp_path, base_run):
    run = _copy(base_run, tmp_path)
    before = run_files(run)
    result = _resume(run, "trainer.max_iterations=20")
    assert result.stdout.splitlines()[:2] == [
        f"resumed from iteration 20 (checkpoint {run / 'checkpoints' / 'iter_00000020'})",
        f"run directory: {run}"]
    assert result.stdout.strip().splitlines()[-1] == (
        "nothing to do: the run is at iteration 20 (epoch 0.62), which reaches "
        "trainer.max_iterations=20; raise the limit to train further")
    assert run_files(run) == before


def test_a_resumed_run_says_first_from_which_iteration_and_checkpoint(tmp_path, base_run):
    """Named by the run, it continues from the latest checkpoint; named by a checkpoint, from
    that one (here into a new directory); the line comes once, before the run directory."""
    run = _copy(base_run, tmp_path)
    latest = _resume(run, "trainer.max_iterations=30").stdout.splitlines()
    assert latest[:2] == [f"resumed from iteration 20 (checkpoint {run / 'checkpoints' / 'iter_00000020'})",
                          f"run directory: {run}"]
    older = run / "checkpoints" / "iter_00000010"
    fork = tmp_path / "fork"
    named = _resume(older, f"hydra.run.dir={fork}", "trainer.max_iterations=30").stdout
    assert named.splitlines()[:2] == [f"resumed from iteration 10 (checkpoint {older})",
                                      f"run directory: {fork}"]
    assert [line.startswith("resumed from") for line in latest + named.splitlines()].count(True) == 2


def test_a_run_that_only_skips_stops_as_diverged_and_counts_its_skips(tmp_path, base_run):
    """nan_policy=skip: the summary says how many updates were skipped, and
    updater.max_skipped_in_a_row of them in a row stop the run as diverged (exit 3)."""
    run = _copy(base_run, tmp_path)
    result = run_cli(f"resume={run}", "optimizer.learning_rate=1e30", "updater.nan_policy=skip",
                     "updater.max_skipped_in_a_row=5", "trainer.max_iterations=40", QUIET)
    assert result.returncode == 3, result.stderr
    assert "in each of the last 5 updates" in result.stderr
    summary = json.loads((run / "summary.json").read_text())
    # update 21 applies the huge rate; 22..26 have a non-finite loss: 5 skipped in a row, the
    # fifth stops the run, so the last iteration counted is 25
    assert (summary["status"], summary["skipped_steps"], summary["iteration"]) == ("diverged", 5, 25)


def test_loggers_saved_before_they_named_a_target_resume_with_ours(tmp_path, base_run):
    """``logger: {jsonl: {}, csv: {delimiter: ","}}`` (a run saved before loggers had
    ``_target_``): each gets our option's target, and the log goes on without a gap."""
    from trainer_run.storage import checkpoint

    run = _copy(base_run, tmp_path)
    found = checkpoint.find(run / "checkpoints" / "iter_00000010")
    state = checkpoint.load(found)
    state["config"]["logger"] = {"jsonl": {}, "csv": {"delimiter": ","}}
    checkpoint.save(state, found.parent, 10)
    _resume(found, "trainer.max_iterations=30")
    assert [row["iteration"] for row in read_jsonl(run / "metrics.jsonl")] == [10, 20, 30]
    assert (run / "metrics.csv").read_text().count("\n") == 4  # the header and three rows


def test_a_run_killed_before_its_first_checkpoint_starts_again_from_its_saved_config(tmp_path):
    """A run with no complete checkpoint (here removed, as a kill before the first leaves it)
    was a dead end: resume= said there is none, a new run there pointed back to resume=. Now
    the resume starts it again with its saved config, says so, and trains the same run."""
    args = ("trainer.max_iterations=20", "trainer.checkpoint_interval=1000", "optimizer=sgd",
            "optimizer.learning_rate=0.05", QUIET)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert run_cli(f"hydra.run.dir={straight}", *args).returncode == 0
    assert run_cli(f"hydra.run.dir={killed}", *args).returncode == 0
    for name in ("checkpoints", "summary.json", "model.npz", "model_best.npz"):
        path = killed / name
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    result = _resume(killed)
    assert "has no complete checkpoint (it stopped before its first): starting it again" in result.stderr
    expected, got = load_npz(straight / "model.npz"), load_npz(killed / "model.npz")
    assert all(numpy.array_equal(expected[k], got[k]) for k in expected)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["overrides"] == list(args[:4]) + [QUIET]
    rows = [r["iteration"] for r in read_jsonl(killed / "metrics.jsonl")]
    assert rows == [r["iteration"] for r in read_jsonl(straight / "metrics.jsonl")]  # once each


def test_workers_and_prefetch_may_change_on_resume_and_give_the_same_weights(tmp_path, base_run):
    plain, threaded = _copy(base_run, tmp_path / "plain"), _copy(base_run, tmp_path / "threaded")
    _resume(plain, "trainer.max_iterations=30")
    _resume(threaded, "dataset.workers=2", "updater.prefetch=2", "trainer.max_iterations=30")
    expected, got = load_npz(plain / "model.npz"), load_npz(threaded / "model.npz")
    assert sorted(got) == sorted(expected)
    for key in expected:
        numpy.testing.assert_array_equal(got[key], expected[key], err_msg=key, strict=True)
