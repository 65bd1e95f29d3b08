"""runner/preflight.py: the checks a run's overrides pass before anything is composed, the same
for trainer-run and trainer_run.train: grammar, group options, a key that moved, a user's
_target_; the run directory named when none is given and refused when it is not new or not
writable; the record's folder."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from trainer_run.compose import argv as args
from trainer_run.errors import ConfigError
from trainer_run.runner import preflight
from trainer_run.runs import directory


def test_checked_rewrites_a_moved_key_and_a_users_target(capsys):
    argv = preflight.checked(["trainer.nan_policy=skip", "+model._target_=mine.Net", "seed=3"])
    assert argv[0] == "updater.nan_policy=skip" and argv[-1] == "seed=3"
    assert any(a.startswith("model._target_=mine.Net") or a.startswith("++model._target_=mine.Net")
               for a in argv), argv
    assert "trainer.nan_policy is now updater.nan_policy" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["optimizer=nosuch"], "optimizer=nosuch is not available; choose one of adadelta, "),
    (["dataset=data.csv"], "(to train on the file data.csv: dataset=csv dataset.path=data.csv)"),
    (["optimizer.learning_rate=[1,"], "cannot parse 'optimizer.learning_rate=[1,': "),
])
def test_checked_refuses_in_one_line(argv, message):
    with pytest.raises(ConfigError) as raised:
        preflight.checked(argv)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_one_run_names_the_run_directory_of_now(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = time.strftime("%Y-%m-%d")
    argv = preflight.one_run(["seed=1"])
    named = [a for a in argv if a.startswith("hydra.run.dir=")]
    assert len(named) == 1
    folder = named[0].split("=", 1)[1].strip("'")
    assert re.fullmatch(rf"runs/({before}|{time.strftime('%Y-%m-%d')})/\d\d-\d\d-\d\d", folder)
    given = preflight.one_run(["seed=1", f"hydra.run.dir={tmp_path / 'mine'}"])
    assert given == ["seed=1", f"hydra.run.dir={tmp_path / 'mine'}"]  # a given folder is kept


def test_a_preset_that_sets_the_folder_names_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = preflight.one_run(["debug=lr_find"])
    folder = args.value(argv, "hydra.run.dir")
    assert re.fullmatch(r"lr_find/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d", folder), argv
    mine = tmp_path / "conf" / "experiment"
    mine.mkdir(parents=True)
    (mine / "long.yaml").write_text("# @package _global_\nhydra:\n  run:\n    dir: long/${now:%Y}\n")
    # the last preset of the defaults that sets one wins: debug comes after experiment
    assert preflight.preset_folder([f"--config-dir={tmp_path / 'conf'}", "experiment=long"],
                                 "run") == "long/${now:%Y}"
    assert preflight.preset_folder([f"--config-dir={tmp_path / 'conf'}", "experiment=long",
                                  "debug=lr_find"], "run") == "lr_find/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    assert preflight.preset_folder(["debug=fast", "experiment=spirals_mlp_sgd"], "run") is None


def test_lr_find_refuses_a_folder_that_is_a_run(tmp_path):
    (tmp_path / "run" / ".hydra").mkdir(parents=True)
    directory.mark(tmp_path / "run" / ".hydra")
    with pytest.raises(ConfigError, match=r"hydra.run.dir=.*run is a run; debug=lr_find never "
                                          r"writes into one"):
        preflight.one_run(["debug=lr_find", f"hydra.run.dir={tmp_path / 'run'}"])


def test_one_run_refuses_a_folder_that_is_not_new_and_keeps_it(tmp_path):
    folder = tmp_path / "taken"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"hydra.run.dir=.*taken is not empty \(it holds "
                                          r"notes.txt\); a new run starts only in a new or empty"):
        preflight.one_run([f"hydra.run.dir={folder}"])
    assert (folder / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_one_run_refuses_a_folder_it_cannot_write(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="cannot write to .*Permission denied"):
            preflight.one_run([f"hydra.run.dir={locked / 'run'}"])
    finally:
        locked.chmod(0o700)


def test_check_writable_refuses_a_file_on_the_way(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"cannot write to .*file/run: Not a directory"):
        preflight.check_writable(tmp_path / "file" / "run")


def test_the_record_folder_and_the_nearest_existing_folder(tmp_path):
    assert preflight.record_folder([]) == ".hydra"
    assert preflight.record_folder(["hydra.output_subdir=meta"]) == "meta"
    assert preflight.record_folder(["hydra.output_subdir=null"]) is None
    assert preflight.nearest_existing(tmp_path / "a" / "b" / "c") == tmp_path.resolve()
    assert preflight.nearest_existing(Path(tmp_path)) == tmp_path.resolve()


def test_an_unknown_option_names_the_closest_one_and_a_far_one_none():
    with pytest.raises(ConfigError) as typo:
        preflight.checked(["dataset=mnsit"])
    assert str(typo.value) == ("dataset=mnsit is not available; did you mean mnist? choose one of "
                               "blobs, cifar10, csv, fashion_mnist, idx, mnist, mnist_like, npy, "
                               "npz, regression, spirals, text")
    with pytest.raises(ConfigError) as far:
        preflight.checked(["optimizer=zzzzzz"])
    assert str(far.value).startswith("optimizer=zzzzzz is not available; choose one of adadelta, ")
