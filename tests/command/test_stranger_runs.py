"""A stranger's run stays data through resume: what is checked is what is built.

A run directory is prepared as an adversary would: its config (a checkpoint's ``state.json``,
checksums recomputed, or its ``.hydra/config.yaml``) hides code behind interpolations that
only resolve after a check of the config as stored: a resolver that makes a ``_target_`` out
of a string (``oc.decode``, ``oc.create``), a section that is a reference to another
(``updater: ${other}`` moves hooks), a resolver that reads the environment (``oc.env``). It is
then resumed, evaluated and loaded: the sentinel file a payload would create never appears,
nothing of the run changes, each refusal is one ``error:`` line, and each command ends in
seconds within bounded memory. The user's own runs keep their interpolations and resolvers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from run_folders import RESIDENT
from run_folders import command as command_measured

from tests.command.test_trust import command
from tests.runs.test_trust import PAYLOAD_MODULE, QUICK, tree_bytes
from trainer_run import load_model
from trainer_run.errors import ConfigError
from trainer_run.runs import directory as run_directory
from trainer_run.storage import checkpoint

SECTIONS = ("model", "dataset", "optimizer", "scheduler", "updater", "backend")
MEMORY_LIMIT = RESIDENT
TIME_LIMIT = 10


def decode(marker: Path) -> str:
    return f'${{oc.decode:"{{_target_: os.system, command: touch {marker}}}"}}'


def create(marker: Path) -> str:
    return f'${{oc.create:"{{_target_: payload.plant, path: {marker}}}"}}'


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 6 iterations (checkpoints at 3 and 6) by the user whose key is in ``keys``."""
    root = tmp_path_factory.mktemp("stranger")
    (root / "payload.py").write_text(PAYLOAD_MODULE)
    command(root, root / "keys", *QUICK, f"hydra.run.dir={root / 'run'}", check_code=0)
    return root


@pytest.fixture()
def folder(trained, tmp_path):
    """A folder to work in holding the payload module, a copy of the trained run (``run``) and
    the key that signed it (``keys``); the sentinel a payload would create is ``PWNED``."""
    (tmp_path / "payload.py").write_text(PAYLOAD_MODULE)
    shutil.copytree(trained / "run", tmp_path / "run", symlinks=True)
    shutil.copytree(trained / "keys", tmp_path / "keys")
    return tmp_path


def bounded(folder: Path, keys: Path, *arguments, name="trainer-run"):
    """The command run with this user's key (:func:`run_folders.command`), and its peak
    memory, once it ended within :data:`TIME_LIMIT` seconds."""
    done = command_measured(name, *arguments, keys=keys, cwd=folder, timeout=60)
    assert done.elapsed < TIME_LIMIT, done.stderr
    return done, done.peak


def tamper(run: Path, change) -> Path:
    """Applies ``change`` to the config of the run's latest checkpoint and saves it back with
    valid checksums (its signature no longer matches: a stranger's checkpoint)."""
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    change(state["config"])
    checkpoint.save(state, found.parent, checkpoint.iteration_of(found))
    return found


def refused(done, *words) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# -- resume ------------------------------------------------------------------------------------

@pytest.mark.parametrize("section", SECTIONS)
def test_a_resolver_that_makes_code_from_a_string_is_refused_in_any_section(folder, section):
    marker = folder / "PWNED"
    payload = (decode if SECTIONS.index(section) % 2 else create)(marker)
    tamper(folder / "run", lambda config: config.__setitem__(section, payload))
    before = tree_bytes(folder / "run")
    done, peak = bounded(folder, folder / "keys", f"resume={folder / 'run'}",
                         "trainer.max_iterations=9")
    refused(done, f"{section} calls a resolver", "trust=true")
    assert not marker.exists() and tree_bytes(folder / "run") == before
    assert peak < MEMORY_LIMIT


def test_a_section_moved_by_a_reference_is_checked_where_it_lands(folder):
    """``updater: ${other}`` with hooks under ``other.callbacks``: the check sees them as
    ``updater.callbacks``, where they would be called every iteration."""
    def move(config):
        config["other"] = {**config["updater"],
                           "callbacks": {"forward_on_start": "payload.plant"}}
        config["updater"] = "${other}"

    tamper(folder / "run", move)
    before = tree_bytes(folder / "run")
    done = command(folder, folder / "keys", f"resume={folder / 'run'}", "trainer.max_iterations=9")
    refused(done, "updater.callbacks.forward_on_start=payload.plant")
    assert tree_bytes(folder / "run") == before


def test_a_resolver_that_reads_the_environment_never_copies_a_secret(folder):
    tamper(folder / "run", lambda c: c["trainer"].__setitem__("log_interval", "${oc.env:SECRET}"))
    env_secret = "s3cr3t-token-1234"
    os.environ["SECRET"] = env_secret
    try:
        done = command(folder, folder / "keys", f"resume={folder / 'run'}",
                       "trainer.max_iterations=9", "logger=[jsonl,csv,tensorboard]")
    finally:
        del os.environ["SECRET"]
    refused(done, "trainer.log_interval calls a resolver (${oc.env:SECRET})")
    assert not any(env_secret.encode() in p.read_bytes()
                   for p in (folder / "run").rglob("*") if p.is_file())


def test_a_run_killed_before_its_first_checkpoint_is_checked_once_resolved(folder):
    """The record (``.hydra/config.yaml``) of a run with no checkpoint is what is started again:
    a payload behind a resolver there is refused as in a checkpoint."""
    run = folder / "run"
    shutil.rmtree(run / "checkpoints")
    path = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"] = decode(folder / "PWNED")
    path.write_text(yaml.safe_dump(config))
    before = tree_bytes(run)
    done = command(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=9")
    refused(done, "model calls a resolver")
    assert not (folder / "PWNED").exists() and tree_bytes(run) == before


def test_an_interpolation_cycle_or_an_expansion_is_one_line(folder):
    run = folder / "run"
    tamper(run, lambda c: c["trainer"].update(log_interval="${trainer.eval_interval}",
                                              eval_interval="${trainer.log_interval}"))
    done = command(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=9")
    refused(done, "cycle (trainer.log_interval -> trainer.eval_interval -> trainer.log_interval)")

    def laughs(config):
        config["l0"] = ["x" * 10] * 10
        for i in range(1, 10):
            config[f"l{i}"] = [f"${{l{i - 1}}}"] * 10
        config["trainer"]["notes"] = "${l9}"

    tamper(run, lambda c: c["trainer"].update(log_interval=3, eval_interval=3))
    tamper(run, laughs)
    done, peak = bounded(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=9")
    refused(done, "would expand it beyond")
    assert peak < MEMORY_LIMIT


def test_a_strangers_run_resumed_on_trust_stays_unsigned(folder, tmp_path):
    """``trust=true`` lets a stranger's config resolve and run, but the checkpoints the
    resumed run writes are not signed: a later resume needs trust=true again."""
    run = folder / "run"
    tamper(run, lambda c: c["trainer"].__setitem__("log_interval", "${oc.decode:${oc.env:LOG_EVERY,3}}"))
    done = command(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=9",
                   "trust=true", check_code=0)
    state = checkpoint.load(checkpoint.find(run))
    assert checkpoint.iteration_of(checkpoint.find(run)) == 9, done.stderr
    assert state["signature"] is None
    done = command(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=12")
    refused(done, "calls a resolver")


def test_my_own_run_keeps_its_resolvers_and_references(folder, tmp_path, monkeypatch):
    """A run this user started with a resolver of their own resumes with no ceremony, signed,
    and a hyper-parameter override still flows through the schedule's reference."""
    monkeypatch.setenv("LOG_EVERY", "3")
    run = tmp_path / "mine"
    command(folder, folder / "keys", *QUICK, "trainer.log_interval='${oc.decode:${oc.env:LOG_EVERY}}'",
            f"hydra.run.dir={run}", check_code=0)
    command(folder, folder / "keys", f"resume={run}", "trainer.max_iterations=9",
            "optimizer.learning_rate=0.5", check_code=0)
    state = checkpoint.load(checkpoint.find(run))
    assert state["signature"].startswith("hmac-sha256:")
    assert state["config"]["trainer"]["log_interval"] == "${oc.decode:${oc.env:LOG_EVERY}}"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["lr"] == 0.5  # the scheduler's base_lr: ${optimizer.learning_rate}


# -- another tool's folder ---------------------------------------------------------------------

def test_a_folder_that_only_looks_like_a_run_is_never_written(folder):
    """Another tool's output with a ``.hydra/config.yaml`` holding ``resume`` and ``trust``,
    its own ``model.npz`` and ``summary.json``, and a checkpoint of ours copied in: a resume
    refuses to write there (only a record trainer-run writes makes a run)."""
    other = folder / "other"
    (other / ".hydra").mkdir(parents=True)
    (other / ".hydra" / "config.yaml").write_text("resume: null\ntrust: false\nlr: 0.1\n")
    (other / "model.npz").write_bytes(b"the other tool's model")
    (other / "summary.json").write_text('{"theirs": true}\n')
    shutil.copytree(folder / "run" / "checkpoints", other / "checkpoints")
    before = tree_bytes(other)
    done = command(folder, folder / "keys", f"resume={other}", "trainer.max_iterations=9")
    refused(done, "not a run", "hydra.run.dir=")
    assert tree_bytes(other) == before
    assert not run_directory.is_run(other) and run_directory.is_run(folder / "run")


def test_a_run_of_this_user_from_before_the_mark_is_still_a_run(folder):
    (folder / "run" / ".hydra" / run_directory.MARK).unlink()
    assert run_directory.is_run(folder / "run") is False  # no key in this process's home
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "keys")}
    code = "import sys; from trainer_run.runs import directory; print(directory.is_run(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(folder / "run")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


# -- trainer-eval and load_model ---------------------------------------------------------------

def test_eval_and_load_model_refuse_a_resolver_in_a_strangers_record_and_report_reads_it(folder, monkeypatch):
    run = folder / "run"
    path = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"] = {"_target_": "trainer_run.models.MLP", "hidden_sizes": "${extra}",
                       "extra": decode(folder / "PWNED")}
    config["extra"] = decode(folder / "PWNED")
    path.write_text(yaml.safe_dump(config))
    before = tree_bytes(run)
    done, peak = bounded(folder, folder / "keys", run, name="trainer-eval")
    refused(done, "calls a resolver", "trust=true")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / "keys"))
    monkeypatch.syspath_prepend(str(folder))
    with pytest.raises(ConfigError, match="calls a resolver"):
        load_model(run)
    report, peak_report = bounded(folder, folder / "keys", run, "--plot", folder / "c.png",
                                  name="trainer-report")  # reads runs as data: it ranks this one
    assert report.returncode == 0 and (folder / "c.png").is_file(), report.stderr
    assert not (folder / "PWNED").exists() and tree_bytes(run) == before
    assert max(peak, peak_report) < MEMORY_LIMIT
