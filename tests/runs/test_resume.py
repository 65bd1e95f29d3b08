"""``resume=`` (runs/resume.py), in-process: the arguments a resume rewrites before Hydra
composes (:func:`prepare`), its refusals, and the config merge after it (:func:`config`,
:func:`command_keys`, :func:`resolved`, :func:`merged`). The run folder is a real one, trained
once for the module in this process (trainer_run.train); the command-level resumes are in
tests/command/test_cli_resume.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from run_folders import QUICK, copy_run

import trainer_run
from trainer_run.errors import ConfigError
from trainer_run.runs import resume as resumes
from trainer_run.runs.directory import RunLock
from trainer_run.runs.trust import UntrustedRun

JSONL = "trainer_run.training.loggers.jsonl.JsonLines"
CHOICES = ["callbacks=none", "trainer=default", "kvstore=device", "precision=fp32",
           "loss_scale=none", "updater=standard", "scheduler=constant", "optimizer=adam",
           "dataset=spirals", "model=mlp", "backend=numpy"]
"""The group choices a default run records, pinned by a resume (in Hydra's recorded order)."""
LATEST = "checkpoints/iter_00000006"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 6 iterations (checkpoints at 3 and 6), trained in this process, and the key
    folder that signed it."""
    folder = tmp_path_factory.mktemp("trained")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CONFIG_HOME", str(folder / "keys"))
        trainer_run.train(QUICK, run_dir=folder / "run")
    return folder / "run", folder / "keys"


@pytest.fixture
def run(trained, tmp_path, monkeypatch):
    """A copy of the trained run, resumed by its owner (the key that signed it)."""
    original, keys = trained
    monkeypatch.setenv("XDG_CONFIG_HOME", str(keys))
    return copy_run(original, tmp_path / "run").resolve()


def _refused(*arguments) -> str:
    with pytest.raises(ConfigError) as info:
        resumes.prepare(*arguments, report=lambda line: None)
    return str(info.value)


# -- before Hydra composes: the arguments ----------------------------------------------------------
def test_a_run_resumes_from_its_latest_checkpoint_with_its_choices_pinned_before_the_overrides(run):
    lines = []
    argv = resumes.prepare(["optimizer.learning_rate=0.5", "trainer.max_iterations=9"], str(run),
                           lines.append)
    assert argv == [*CHOICES, f"resume='{run}/{LATEST}'", f"hydra.run.dir='{run}'",
                    "optimizer.learning_rate=0.5", "trainer.max_iterations=9"]
    assert lines == []


def test_a_named_checkpoint_is_resumed_into_its_run_and_a_flag_stays_before_the_overrides(run):
    given = ["--cfg", "job", f"resume={run}/checkpoints/iter_00000003", "trainer.max_iterations=9",
             "optimizer=adam"]
    argv = resumes.prepare(given, f"{run}/checkpoints/iter_00000003", lambda line: None)
    pinned = [c for c in CHOICES if c != "optimizer=adam"]  # the command names it already
    assert argv == ["--cfg", "job", *pinned, f"resume='{run}/checkpoints/iter_00000003'",
                    f"hydra.run.dir='{run}'", "trainer.max_iterations=9", "optimizer=adam"]


def test_another_group_choice_is_refused_in_one_line(run):
    assert _refused(["optimizer=sgd"], str(run)) == (
        "resume keeps the run's optimizer=adam; optimizer=sgd would be a different run, so start "
        "a new one instead")


@pytest.mark.parametrize("inside", ["", "checkpoints"], ids=["loose", "in-a-folder-not-a-run"])
def test_a_checkpoint_outside_a_run_needs_a_new_run_directory(run, tmp_path, inside):
    kept = tmp_path / "kept" / inside / "iter_00000003"
    shutil.copytree(run / "checkpoints" / "iter_00000003", kept)
    why = ("is not in a run's checkpoints folder" if not inside else
           f"is in {tmp_path / 'kept'}, which is not a run (it has no .hydra/trainer-run.json of "
           "trainer-run's, nor your signature on its config)")
    assert _refused([], str(kept)) == (f"checkpoint {kept} {why}, so it belongs to no run; continue "
                                       "it as a new run with hydra.run.dir=<new directory>")
    new = tmp_path / "new"
    assert resumes.prepare([f"hydra.run.dir={new}"], str(kept), lambda line: None) == [
        *CHOICES, f"resume='{kept}'", f"hydra.run.dir='{new}'"]


def test_a_new_run_directory_that_holds_files_is_refused(run, tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert _refused([f"hydra.run.dir={tmp_path / 'other'}"], str(run)) == (
        f"hydra.run.dir={tmp_path / 'other'} is not empty (it holds notes.txt); a new run starts "
        "only in a new or empty directory, so choose another hydra.run.dir")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_run_another_process_holds_is_refused_naming_it(run):
    import os

    with RunLock(run):
        assert _refused([], str(run)) == (
            f"run directory {run} is in use by process {os.getpid()}; wait for it to end (or "
            "stop it), or choose another hydra.run.dir")


def test_a_run_with_no_checkpoint_starts_again_from_its_saved_config(run):
    shutil.rmtree(run / "checkpoints")
    lines = []
    argv = resumes.prepare(["trainer.max_iterations=9"], str(run), lines.append)
    assert argv == [*CHOICES, f"resume='{run}/.hydra/config.yaml'", f"hydra.run.dir='{run}'",
                    "trainer.max_iterations=9"]
    assert lines == [f"{run} has no complete checkpoint (it stopped before its first): starting "
                     "it again from iteration 0 with its saved config"]
    assert resumes.recorded_overrides(run / ".hydra" / "config.yaml") == [
        "trainer.max_iterations=6", "trainer.checkpoint_interval=3", "trainer.eval_interval=3",
        "trainer.log_interval=3", "trainer.progress=false", "dataset.size=200"]
    assert resumes.recorded_overrides(run / "elsewhere" / "config.yaml") == []


@pytest.mark.parametrize("argv, expected", [
    ([], False), (["trust=true"], True), (["trust=false", "+trust=True"], True),
    (["trust=TRUE", "trust=false"], False), (["trusted=true", "seed=1"], False),
])
def test_trust_is_the_last_trust_override_and_must_be_a_boolean(argv, expected):
    assert resumes.trusted(argv) is expected
    with pytest.raises(ConfigError) as info:
        resumes.trusted([*argv, "trust=yes"])
    assert str(info.value) == "trust must be true or false, got 'yes'"


# -- after Hydra composes: the config --------------------------------------------------------------
SAVED = {"seed": 3, "trainer": {"max_iterations": 20, "log_interval": 5},
         "model": {"_target_": "trainer_run.models.MLP", "hidden_sizes": [16]},
         "dataset": {"_target_": "my_data.load", "batch_size": 10, "size": 100},
         "optimizer": {"learning_rate": 0.1}}
"""A checkpoint's config, from before ``trainer.profile``, ``logger`` and ``overfit_batches``."""


def _composed(**values) -> OmegaConf:
    """What Hydra composes for a resume: the run's choices with today's defaults, and the
    command's ``values`` (dotted keys) set."""
    cfg = OmegaConf.create({"seed": 0, "logger": {"jsonl": {}},
                            "trainer": {"max_iterations": None, "log_interval": 50, "profile": False},
                            "model": {"_target_": "trainer_run.models.MLP", "hidden_sizes": [64, 64]},
                            "dataset": {"batch_size": 50, "overfit_batches": None, "size": 2000},
                            "optimizer": {"learning_rate": 0.001}})
    for key, value in values.items():
        OmegaConf.update(cfg, key.replace("__", "."), value)
    return cfg


def _merged(overrides: list[str], **values) -> dict:
    stored = resumes.Stored(SAVED, b"", None, "checkpoint x", Path("x"))
    return OmegaConf.to_container(resumes.config(stored, _composed(**values), overrides, {},
                                                 vouched=True))


def test_a_checkpoint_from_before_a_new_key_resumes_with_its_default():
    """A run saved before ``trainer.profile``, ``logger`` and ``dataset.overfit_batches``
    existed (a KeyError and a traceback on resume): the keys are added with their defaults,
    while an option's own keys (here the user's dataset function's) stay as saved."""
    cfg = OmegaConf.create({"seed": 0, "logger": {"jsonl": {}},
                            "trainer": {"max_iterations": None, "profile": False},
                            "dataset": {"batch_size": 50, "overfit_batches": None, "size": 2000}})
    saved = {"seed": 3, "trainer": {"max_iterations": 20},
             "dataset": {"_target_": "my_data.load", "batch_size": 10}}
    stored = resumes.Stored(saved, b"", None, "checkpoint x", Path("x"))
    node = OmegaConf.to_container(resumes.config(stored, cfg, [], {}, vouched=True))
    assert node == {"seed": 3, "logger": {"jsonl": {"_target_": JSONL}},
                    "trainer": {"max_iterations": 20, "profile": False},
                    "dataset": {"_target_": "my_data.load", "batch_size": 10, "overfit_batches": None}}


def test_the_commands_overrides_replace_the_saved_values_and_nothing_else():
    overrides = ["trainer.max_iterations=50", "dataset.batch_size=32", "optimizer.learning_rate=0.5",
                 "seed=3", f"resume={LATEST}", "hydra.run.dir=/somewhere"]
    merged = _merged(overrides, trainer__max_iterations=50, dataset__batch_size=32,
                     optimizer__learning_rate=0.5, seed=3)
    assert merged == {"seed": 3, "logger": {"jsonl": {"_target_": JSONL}},
                      "trainer": {"max_iterations": 50, "log_interval": 5, "profile": False},
                      "model": {"_target_": "trainer_run.models.MLP", "hidden_sizes": [16]},
                      "dataset": {"_target_": "my_data.load", "batch_size": 32, "size": 100,
                                  "overfit_batches": None},
                      "optimizer": {"learning_rate": 0.5}}


@pytest.mark.parametrize("override, values, shown", [
    ("seed=5", {"seed": 5}, "seed=3; seed=5"),
    ("dataset.size=300", {"dataset__size": 300}, "dataset.size=100; dataset.size=300"),
    ("model.hidden_sizes=[8]", {"model__hidden_sizes": [8]},
     "model.hidden_sizes=[16]; model.hidden_sizes=[8]"),
])
def test_a_value_the_checkpoint_was_trained_with_is_refused_in_one_line(override, values, shown):
    with pytest.raises(ConfigError) as info:
        _merged([override], **values)
    assert str(info.value) == (f"resume keeps the run's {shown} would make a different run (its "
                               "checkpoint was trained with the other), so start a new one instead")


def test_the_keys_a_command_sets_are_neither_resume_nor_hydras_nor_a_pinned_choice():
    overrides = ["resume=/r", "hydra.run.dir=/d", "optimizer=adam", "+extra.key=1", "~old",
                 "++seed=2", "optimizer.wd=0.1"]
    assert resumes.command_keys(overrides, {"optimizer": "adam"}) == [
        "extra.key", "old", "seed", "optimizer.wd"]


def test_a_vouched_config_resolves_its_interpolations_and_an_unresolvable_one_is_one_line():
    node = OmegaConf.create({"optimizer": {"learning_rate": 0.5}, "scheduler": {
        "base_lr": "${optimizer.learning_rate}"}})
    assert resumes.resolved(node, None, False, []) == {"optimizer": {"learning_rate": 0.5},
                                                        "scheduler": {"base_lr": 0.5}}
    for broken, line in [({"b": "${missing}"}, "Interpolation key 'missing' not found (at b)"),
                         ({"a": "${b}", "b": "${a}"}, "Recursive interpolation detected (at a)")]:
        with pytest.raises(ConfigError) as info:
            resumes.resolved(OmegaConf.create(broken), None, True, [])
        assert str(info.value) == f"the config does not resolve: {line}"


def test_an_unvouched_config_naming_code_is_refused_unless_the_command_set_that_key():
    saved = {"model": {"_target_": "evil.Model"}, "seed": 1}
    stored = resumes.Stored(saved, b"", None, "checkpoint x", Path("x"))
    with pytest.raises(UntrustedRun) as info:
        resumes.resolved(OmegaConf.create(saved), stored, False, [])
    assert str(info.value).startswith("checkpoint x names code outside trainer-run "
                                      "(model._target_=evil.Model) and is not signed with your key")
    assert resumes.resolved(OmegaConf.create(saved), stored, False, ["model"]) == saved
    assert resumes.resolved(OmegaConf.create(saved), stored, True, []) == saved


def test_a_resumed_runs_recorded_overrides_are_the_old_ones_replaced_by_name_then_the_new_ones():
    assert resumes.merged(
        ["trainer.max_iterations=20", "seed=1", "optimizer.wd=0.1"],
        ["optimizer=adam", "resume=/r", "hydra.run.dir=/d", "trainer.max_iterations=40",
         "+extra=1"], {"optimizer": "adam"}) == [
        "trainer.max_iterations=40", "seed=1", "optimizer.wd=0.1", "+extra=1"]
    # an old key is recorded by its new name (trainer.nan_policy is updater.nan_policy now)
    assert resumes.merged(["trainer.nan_policy=skip", "seed=1"], ["updater.nan_policy=stop"], {}) == \
        ["updater.nan_policy=stop", "seed=1"]
    assert resumes.merged(["dataset.prefetch=2"], [], {}) == ["updater.prefetch=2"]


def test_a_resumed_runs_first_line_names_the_iteration_and_the_checkpoint():
    assert resumes.resumed(6, Path("/r/checkpoints/iter_00000006")) == (
        "resumed from iteration 6 (checkpoint /r/checkpoints/iter_00000006)")
