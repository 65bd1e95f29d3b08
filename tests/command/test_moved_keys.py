"""The updater's arguments live in its section (configs/_updater.yaml): ``updater.nan_policy``,
``updater.max_skipped_in_a_row``, ``updater.prefetch``, ``updater.clip_global_norm``. Their old
names (``trainer.*``, ``dataset.prefetch``, ``optimizer.clip_global_norm``) still work on the
command line and in :func:`trainer_run.train` (renamed before Hydra composes, one note each,
the same run to the bit), in a saved run's config (moved by
:func:`trainer_run.config_upgrade.upgrade`: a resume continues bit for bit), and are refused
with the new name in a config file of the user's."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml
from helpers import one_error_line, run_cli

from trainer_run.compose import override_keys
from trainer_run.compose.options import option_section, shared_section
from trainer_run.config_upgrade import MOVED, renamed, upgrade
from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint

QUIET = "trainer.progress=false"
SHORT = ("trainer.max_iterations=12", "trainer.checkpoint_interval=6", "trainer.eval_interval=6",
         "dataset.size=400", QUIET)
DIVERGE = ("optimizer=sgd", "optimizer.learning_rate=1e4")
CASES = {  # old key: (its value, the other arguments that make it matter, the exit status)
    "trainer.nan_policy": ("skip", DIVERGE, 0),
    "trainer.max_skipped_in_a_row": ("3", (*DIVERGE, "updater.nan_policy=skip"), 3),
    "dataset.prefetch": ("2", (), 0),
    "optimizer.clip_global_norm": ("0.05", ("optimizer=sgd", "optimizer.learning_rate=0.5"), 0),
}


def _note(old: str) -> str:
    return f"note: {old} is now {MOVED[old]}; the old name still works"


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("note: ")]


def _config(run) -> dict:
    return yaml.safe_load((run / ".hydra" / "config.yaml").read_text())


def _section_key(dotted: str) -> tuple[str, str]:
    section, _, name = dotted.partition(".")
    return section, name


# -- the keys' home -----------------------------------------------------------------------------
def test_the_four_keys_are_the_updaters_and_nowhere_else():
    assert set(shared_section("updater")) == {"nan_policy", "max_skipped_in_a_row", "prefetch",
                                              "clip_global_norm"}
    for option in ("standard", "parallel"):
        assert set(shared_section("updater")) <= set(option_section("updater", option))
    for old in MOVED:
        section, name = _section_key(old)
        assert name not in shared_section(section) and name not in option_section("trainer", "default")


# -- the command line ---------------------------------------------------------------------------
def test_renamed_rewrites_every_form_of_an_old_key_and_names_each_once():
    argv = ["-m", "trainer.nan_policy=stop,skip", "+optimizer.clip_global_norm=1",
            "++dataset.prefetch=2", "~trainer.max_skipped_in_a_row", "trainer.nan_policy=skip",
            "trainer.nan_policy_x=1", "dataset.prefetching=3", "--config-dir", "trainer.nan_policy"]
    out, found = renamed(argv)
    assert out == ["-m", "updater.nan_policy=stop,skip", "+updater.clip_global_norm=1",
                   "++updater.prefetch=2", "~updater.max_skipped_in_a_row", "updater.nan_policy=skip",
                   "trainer.nan_policy_x=1", "dataset.prefetching=3", "--config-dir",
                   "trainer.nan_policy"]
    assert found == ["trainer.nan_policy", "optimizer.clip_global_norm", "dataset.prefetch",
                     "trainer.max_skipped_in_a_row"]
    assert renamed(["updater.nan_policy=skip", "seed=1"]) == (["updater.nan_policy=skip", "seed=1"], [])


@pytest.mark.parametrize("old", CASES)
def test_an_old_key_on_the_command_line_trains_the_new_keys_run_to_the_bit(tmp_path, old):
    value, others, status = CASES[old]
    new = MOVED[old]
    given = run_cli(f"hydra.run.dir={tmp_path / 'old'}", *SHORT, *others, f"{old}={value}")
    wanted = run_cli(f"hydra.run.dir={tmp_path / 'new'}", *SHORT, *others, f"{new}={value}")
    assert (given.returncode, wanted.returncode) == (status, status), given.stderr + wanted.stderr
    assert _notes(given.stderr) == [_note(old)] and _notes(wanted.stderr) == []
    model = (tmp_path / "old" / "model.npz").read_bytes()
    assert model == (tmp_path / "new" / "model.npz").read_bytes()
    config = _config(tmp_path / "old")
    section, name = _section_key(old)
    assert str(config["updater"][name]) == value and name not in config[section]
    assert f"{new}={value}" in yaml.safe_load((tmp_path / "old" / ".hydra" / "overrides.yaml").read_text())


def test_added_forms_of_an_old_key_are_renamed_too(tmp_path):
    # + adds a key whose value is null (Hydra's rule), ++ adds or replaces any
    done = run_cli(f"hydra.run.dir={tmp_path / 'run'}", *SHORT, "++dataset.prefetch=3",
                   "+optimizer.clip_global_norm=0.5", "++trainer.nan_policy=skip")
    assert done.returncode == 0, done.stderr
    assert _notes(done.stderr) == [_note("dataset.prefetch"), _note("optimizer.clip_global_norm"),
                                   _note("trainer.nan_policy")]
    updater = _config(tmp_path / "run")["updater"]
    assert (updater["prefetch"], updater["clip_global_norm"], updater["nan_policy"]) == (3, 0.5, "skip")


def test_an_old_key_in_a_sweep_gives_each_job_the_new_key_and_one_note(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_cli("-m", f"hydra.sweep.dir={sweep}", *SHORT, *DIVERGE, "trainer.nan_policy=stop,skip")
    assert done.returncode == 0, done.stderr  # both jobs finished: stop's diverged, skip's completed
    assert _notes(done.stderr) == [_note("trainer.nan_policy")]
    assert "job 0 (" in done.stderr and "updater.nan_policy=stop): the training loss is nan" in done.stderr
    assert [_config(sweep / job)["updater"]["nan_policy"] for job in ("0", "1")] == ["stop", "skip"]
    assert all("nan_policy" not in _config(sweep / job)["trainer"] for job in ("0", "1"))


def test_an_old_key_in_pythons_train_is_renamed_with_a_note(tmp_path):
    overrides = [*SHORT, *DIVERGE, "trainer.nan_policy=skip"]
    code = f"""
        import trainer_run
        print(trainer_run.train({overrides!r}, run_dir={str(tmp_path / 'api')!r}).status)
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "completed"
    assert _notes(done.stderr) == [_note("trainer.nan_policy")]
    command = run_cli(f"hydra.run.dir={tmp_path / 'cli'}", *SHORT, *DIVERGE, "updater.nan_policy=skip")
    assert command.returncode == 0, command.stderr
    assert (tmp_path / "api" / "model.npz").read_bytes() == (tmp_path / "cli" / "model.npz").read_bytes()


def test_a_bad_value_under_an_old_key_is_named_by_its_new_key(tmp_path):
    done = run_cli(f"hydra.run.dir={tmp_path / 'run'}", QUIET, "dataset.prefetch=-2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [_note("dataset.prefetch"),
                                                "error: updater.prefetch must be >= 0, got -2"]
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("old", MOVED)
def test_the_key_check_names_the_new_key_for_an_old_one(old):
    with pytest.raises(ConfigError, match=rf"^{old} is not a config key; it is now {MOVED[old]}$"):
        override_keys.check_overrides([f"{old}=1"])


# -- a saved run of the old layout --------------------------------------------------------------
OLD_LAYOUT = {
    "trainer": {"max_iterations": 20, "nan_policy": "skip", "max_skipped_in_a_row": None},
    "dataset": {"_target_": "trainer_run.data.spirals", "prefetch": 2},
    "optimizer": {"_target_": "trainer_run.optimizers.SGD", "clip_global_norm": 0.5},
    "updater": {"_target_": "trainer_run.updaters.StandardUpdater", "accum_grad": 1},
}


def test_upgrade_moves_the_old_keys_into_the_updater_section():
    saved = copy.deepcopy(OLD_LAYOUT)
    assert upgrade(saved) == {
        "trainer": {"max_iterations": 20}, "dataset": {"_target_": "trainer_run.data.spirals"},
        "optimizer": {"_target_": "trainer_run.optimizers.SGD"},
        "updater": {"_target_": "trainer_run.updaters.StandardUpdater", "accum_grad": 1,
                    "nan_policy": "skip", "max_skipped_in_a_row": None, "prefetch": 2,
                    "clip_global_norm": 0.5}}
    assert saved == OLD_LAYOUT  # the argument is left as it was
    assert upgrade(upgrade(saved)) == upgrade(saved)


def test_upgrade_of_an_old_updater_name_moves_the_keys_too():
    old = {"trainer": {"nan_policy": "skip"}, "updater": {"name": "standard", "accum_grad": 2}}
    assert upgrade(old)["updater"] == {"_target_": "trainer_run.updaters.StandardUpdater",
                                       "accum_grad": 2, "nan_policy": "skip"}


def test_upgrade_keeps_the_new_key_when_both_are_saved_and_leaves_a_config_without_updater():
    both = {"trainer": {"nan_policy": "skip"}, "updater": {"nan_policy": "stop"}}
    assert upgrade(both) == {"trainer": {}, "updater": {"nan_policy": "stop"}}
    assert upgrade({"trainer": {"nan_policy": "skip"}}) == {"trainer": {"nan_policy": "skip"}}


def _to_old_layout(config: dict) -> dict:
    config = copy.deepcopy(config)
    for old, new in MOVED.items():
        section, name = _section_key(old)
        config[section][name] = config["updater"].pop(_section_key(new)[1])
    return config


def test_a_run_saved_in_the_old_layout_resumes_bit_for_bit_in_the_new_one(tmp_path):
    args = (*SHORT[1:], "optimizer=sgd", "optimizer.learning_rate=0.5", "updater.nan_policy=skip",
            "updater.clip_global_norm=0.05", "updater.prefetch=2", "updater.max_skipped_in_a_row=7")
    for name, iterations in (("straight", 12), ("split", 6)):
        done = run_cli(f"hydra.run.dir={tmp_path / name}", f"trainer.max_iterations={iterations}", *args)
        assert done.returncode == 0, done.stderr
    split = tmp_path / "split"
    found = checkpoint.find(split)
    state = checkpoint.load(found)
    state["config"] = _to_old_layout(state["config"])
    assert state["config"]["trainer"]["nan_policy"] == "skip" and "prefetch" not in state["config"]["updater"]
    shutil.rmtree(found)
    checkpoint.save(state, found.parent, int(found.name.removeprefix(checkpoint.PREFIX)))
    record = split / ".hydra" / "config.yaml"
    record.write_text(yaml.safe_dump(_to_old_layout(yaml.safe_load(record.read_text()))))

    done = run_cli(f"resume={split}", "trainer.max_iterations=12", QUIET)
    assert done.returncode == 0, done.stderr
    assert (split / "model.npz").read_bytes() == (tmp_path / "straight" / "model.npz").read_bytes()
    resumed = checkpoint.load(checkpoint.find(split))["config"]
    assert {k: resumed["updater"][k] for k in ("nan_policy", "clip_global_norm", "prefetch",
                                              "max_skipped_in_a_row")} == \
        {"nan_policy": "skip", "clip_global_norm": 0.05, "prefetch": 2, "max_skipped_in_a_row": 7}
    assert all(_section_key(old)[1] not in resumed[_section_key(old)[0]] for old in MOVED)


# -- a config file of the user's ----------------------------------------------------------------
FILES = {  # old key: (the file, its text, the choice that picks it)
    "trainer.nan_policy": ("trainer/mine.yaml", "defaults:\n  - default\n  - _self_\nnan_policy: skip\n",
                           "trainer=mine"),
    "trainer.max_skipped_in_a_row": ("experiment/old.yaml",
                                     "# @package _global_\ntrainer:\n  max_skipped_in_a_row: 5\n",
                                     "experiment=old"),
    "dataset.prefetch": ("dataset/mine.yaml", "defaults:\n  - spirals\n  - _self_\nprefetch: 2\n",
                         "dataset=mine"),
    "optimizer.clip_global_norm": ("experiment/old.yaml",
                                   "# @package _global_\noptimizer:\n  clip_global_norm: 1.0\n",
                                   "experiment=old"),
}


@pytest.mark.parametrize("old", FILES)
def test_an_old_key_in_a_users_config_file_is_one_error_naming_the_new_key(tmp_path, old):
    path, text, choice = FILES[old]
    (tmp_path / "conf" / path).parent.mkdir(parents=True)
    (tmp_path / "conf" / path).write_text(text)
    run = tmp_path / "run"
    done = run_cli("--config-dir", tmp_path / "conf", choice, f"hydra.run.dir={run}", QUIET)
    name = _section_key(old)[1]
    assert one_error_line(done) == (f"error: {old} is now {MOVED[old]}: a config file sets {old}; "
                                    f"set {name} under updater instead (the old name works on the "
                                    "command line only)")
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()


def test_a_sweep_started_with_an_old_key_continues_with_the_new_one(tmp_path):
    from trainer_run.cli import sweeps

    record = {"hydra": {"overrides": {"task": ["trainer.nan_policy=stop,skip", "seed=1"]}}}
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(record))
    sweeps.check_same_overrides(tmp_path, ["-m", "seed=1", "updater.nan_policy=stop,skip"])
    with pytest.raises(ConfigError, match="holds a sweep of other overrides"):
        sweeps.check_same_overrides(tmp_path, ["-m", "seed=1", "updater.nan_policy=skip"])
