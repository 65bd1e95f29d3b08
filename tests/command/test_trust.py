"""A run directory is data, as the commands meet it: code its config names runs only for the
user who wrote it. ``resume=``, ``trainer-eval``, ``trainer-report`` and every rank of an
``mpiexec`` job refuse or read as data a run whose config or checkpoint names a planted target
(the payloads of tests/runs/test_trust.py, which would create a marker file if they ran); a run
of another user's key resumes only with ``trust=true``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.runs.test_trust import (
    MY_MODEL,
    PAYLOAD_MODULE,
    QUICK,
    SECTIONS,
    payloads,
    plant,
    tamper_checkpoint,
    tree_bytes,
)
from trainer_run import load_model
from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint


def command(folder: Path, key_home: Path, *arguments, check_code=None, home=False):
    """``trainer-run <arguments>`` in ``folder`` with ``key_home`` as XDG_CONFIG_HOME (whose
    trainer-run/key is that user's key), or with ``home`` as HOME (the key then in
    ``~/.config/trainer-run/``)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(key_home)}
    if home:
        env["HOME"] = str(env.pop("XDG_CONFIG_HOME"))
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, arguments)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    if check_code is not None:
        assert done.returncode == check_code, done.stdout + done.stderr
    return done


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "payload.py").write_text(PAYLOAD_MODULE)
    (tmp_path / "my_models.py").write_text(MY_MODEL)
    return tmp_path


def test_an_unhashable_target_is_one_line_for_resume_eval_load_model_and_the_command_line(
        folder, tmp_path, monkeypatch):
    keys = tmp_path / "keys"
    run = folder / "run"
    command(folder, keys, *QUICK, f"hydra.run.dir={run}", check_code=0)
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    state["config"]["model"]["freeze"] = [{"_target_": {"a": 1}}]
    checkpoint.save(state, found.parent, checkpoint.iteration_of(found))
    path = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"]["_target_"] = ["a", "b"]
    path.write_text(yaml.safe_dump(config))
    before = tree_bytes(run)
    resumed = command(folder, keys, f"resume={run}", "trainer.max_iterations=9", check_code=2)
    assert resumed.stderr.strip() == (
        f"error: checkpoint {found} names code outside trainer-run (model.freeze[0]._target_="
        "{'a': 1} (not a dotted name)) and is not signed with your key, so loading it would run "
        "code you did not write; if you trust this run, add trust=true (in Python: "
        "load_model(run, trust=True))")
    env = {**os.environ, "XDG_CONFIG_HOME": str(keys)}
    evaluated = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", str(run)],
                               cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    lines = evaluated.stderr.strip().splitlines()
    assert evaluated.returncode == 2 and len(lines) == 1, evaluated.stderr
    assert "(model._target_=['a', 'b'] (not a dotted name))" in lines[0]
    monkeypatch.setenv("XDG_CONFIG_HOME", str(keys))
    with pytest.raises(ConfigError, match=r"model._target_=\['a', 'b'\] \(not a dotted name\)"):
        load_model(run)
    assert tree_bytes(run) == before
    own = command(folder, keys, "+model._target_=[a,b]", f"hydra.run.dir={folder / 'own'}",
                  check_code=2)
    assert own.stderr.strip() == "error: model._target_ must be a string, got ['a', 'b']"
    assert not (folder / "own").exists()


@pytest.mark.parametrize("section", SECTIONS)
def test_resume_never_runs_a_planted_target(folder, tmp_path, section):
    keys = tmp_path / "keys"
    run = folder / "run"
    command(folder, keys, *QUICK, f"hydra.run.dir={run}", check_code=0)
    marker = tmp_path / "PWNED"
    payload = payloads(marker)[SECTIONS.index(section) % 3]
    tamper_checkpoint(run, section, payload)
    before = tree_bytes(run)
    done = command(folder, keys, f"resume={run}", "trainer.max_iterations=9", check_code=2)
    assert not marker.exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "names code outside trainer-run" in lines[0], done.stderr
    assert f"{section}._target_={payload['_target_']}" in lines[0]
    assert tree_bytes(run) == before  # left byte for byte as it was, lock file included


def test_a_planted_hook_never_runs_and_a_forged_choice_is_refused(folder, tmp_path):
    keys = tmp_path / "keys"
    run = folder / "run"
    command(folder, keys, *QUICK, f"hydra.run.dir={run}", check_code=0)
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    state["config"]["updater"]["callbacks"]["forward_on_start"] = "payload.plant"
    checkpoint.save(state, found.parent, 6)
    done = command(folder, keys, f"resume={run}", "trainer.max_iterations=9", check_code=2)
    assert "updater.callbacks.forward_on_start=payload.plant" in done.stderr
    state = checkpoint.load(found)
    state["config"]["updater"]["callbacks"]["forward_on_start"] = None
    state["choices"]["+hydra.callbacks.x._target_"] = "payload.plant"
    checkpoint.save(state, found.parent, 6)
    done = command(folder, keys, f"resume={run}", "trainer.max_iterations=9", check_code=2)
    assert "is not a config group and option" in done.stderr
    assert not (tmp_path / "PWNED").exists()


def test_a_run_signed_by_another_key_is_refused_until_trusted(folder, tmp_path):
    """Two users, each with a HOME of their own (the key in ~/.config/trainer-run/key)."""
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    run = folder / "run"
    mine = ("+model._target_=my_models.Tiny", "+model.hidden=8")
    command(folder, alice, *QUICK, *mine, f"hydra.run.dir={run}", check_code=0, home=True)
    assert (alice / ".config" / "trainer-run" / "key").is_file()
    # alice's own runs resume with no ceremony
    command(folder, alice, f"resume={run}", "trainer.max_iterations=9", check_code=0, home=True)
    before = tree_bytes(run)
    done = command(folder, bob, f"resume={run}", "trainer.max_iterations=12", check_code=2,
                   home=True)
    assert "model._target_=my_models.Tiny" in done.stderr and "trust=true" in done.stderr
    assert tree_bytes(run) == before
    command(folder, bob, f"resume={run}", "trainer.max_iterations=12", "trust=true", check_code=0,
            home=True)
    assert checkpoint.find(run).name == checkpoint.name_of(12)


def test_trainer_report_reads_a_tampered_run_as_data(folder, tmp_path):
    keys = tmp_path / "keys"
    run = folder / "run"
    command(folder, keys, *QUICK, f"hydra.run.dir={run}", check_code=0)
    marker = tmp_path / "PWNED"
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    for index, section in enumerate(SECTIONS):
        plant(config, section, payloads(marker)[index % 3])
        tamper_checkpoint(run, section, payloads(marker)[index % 3])
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "XDG_CONFIG_HOME": str(keys)}
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", str(run),
                           "--plot", str(tmp_path / "c.png")], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


@pytest.mark.mpi
def test_every_rank_refuses_a_tampered_checkpoint(folder, tmp_path, mpiexec):  # noqa: F811
    keys = tmp_path / "keys"
    run = folder / "run"
    command(folder, keys, *QUICK, "kvstore=dist_sync", f"hydra.run.dir={run}", check_code=0)
    marker = tmp_path / "PWNED"
    tamper_checkpoint(run, "model", payloads(marker)[2])
    before = tree_bytes(run)
    env = {**os.environ, "XDG_CONFIG_HOME": str(keys)}
    done = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "trainer_run.cli",
                           f"resume={run}", "trainer.max_iterations=9"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "model._target_=payload.plant" in done.stderr
    assert not marker.exists()
    assert tree_bytes(run) == before
