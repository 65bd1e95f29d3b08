"""A run directory is data: code its config names runs only for the user who wrote it
(runs/trust.py; the commands refusing or reading as data a tampered run:
tests/command/test_trust.py, tests/command/test_stranger_runs.py).

Each payload, if it ran, would create a marker file: ``os.system`` with ``touch``,
``pathlib.Path.touch`` and a function of a user module in the folder the command runs from.
A checkpoint's ``state.json`` is rewritten with its checksums recomputed (as an attacker
would), so only the signature stands between the payload and the loader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import trainer_run
from trainer_run import load_model
from trainer_run.errors import ConfigError
from trainer_run.runs import trust
from trainer_run.storage import checkpoint

QUICK = ("trainer.max_iterations=6", "trainer.checkpoint_interval=3", "trainer.eval_interval=3",
         "trainer.log_interval=3", "trainer.progress=false", "dataset.size=200")
PAYLOAD_MODULE = "from pathlib import Path\n\n\ndef plant(path):\n    Path(path).touch()\n"
MY_MODEL = '''
from trainer_run import functions as F
from trainer_run.models import Linear, Model


class Tiny(Model):
    def __init__(self, in_size, out_size, backend, hidden=8):
        self.l1 = Linear(in_size, hidden, backend)
        self.l2 = Linear(hidden, out_size, backend)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))
'''
SECTIONS = ["model", "dataset", "optimizer", "scheduler", "updater", "loss_scale", "backend",
            "kvstore", "trainer", "logger.jsonl", "callbacks.evil"]


def payloads(marker: Path) -> list[dict]:
    return [{"_target_": "os.system", "command": f"touch {marker}"},
            {"_target_": "pathlib.Path.touch", "self": str(marker)},
            {"_target_": "payload.plant", "path": str(marker)}]


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "payload.py").write_text(PAYLOAD_MODULE)
    (tmp_path / "my_models.py").write_text(MY_MODEL)
    return tmp_path


def tree_bytes(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def plant(config: dict, section: str, payload: dict) -> None:
    node = config
    *parents, last = section.split(".")
    for name in parents:
        node = node.setdefault(name, {})
    node[last] = {**(node.get(last) or {}), **payload} if last != "evil" else payload


def tamper_checkpoint(run: Path, section: str, payload: dict) -> Path:
    """Plants ``payload`` into ``section`` of the run's latest checkpoint config and rewrites
    the checkpoint with valid checksums (its signature no longer matches)."""
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    plant(state["config"], section, payload)
    checkpoint.save(state, found.parent, int(found.name[len(checkpoint.PREFIX):]))
    return found


# -- the rule ----------------------------------------------------------------------------------

def test_named_code_lists_every_foreign_target_and_hook_but_no_builtin():
    config = {"model": {"_target_": "trainer_run.models.MLP"},
              "optimizer": {"_target_": "trainer_run.optimizers.Adam"},
              "dataset": {"_target_": "my.data", "inner": [{"_target_": "x.y"}]},
              "updater": {"callbacks": {"forward_on_start": "mod.hook",
                                        "update_on_finish": ["a.b", {"_target_": "c.d"}],
                                        "backward_on_start": None}},
              "logger": {"csv": {"_target_": "trainer_run.storage.files.write_atomic"}}}
    assert trust.named_code(config) == [
        "dataset._target_=my.data", "dataset.inner[0]._target_=x.y",
        "updater.callbacks.forward_on_start=mod.hook", "updater.callbacks.update_on_finish[0]=a.b",
        "updater.callbacks.update_on_finish[1]._target_=c.d",
        "logger.csv._target_=trainer_run.storage.files.write_atomic"]  # ours, but not an option's


def test_a_target_that_is_a_list_or_a_mapping_is_named_as_not_a_dotted_name():
    config = {"model": {"_target_": ["a", "b"], "freeze": [{"_target_": {"a": 1}}]},
              "dataset": {"_target_": 5}}
    assert trust.named_code(config) == [
        "model._target_=['a', 'b'] (not a dotted name)",
        "model.freeze[0]._target_={'a': 1} (not a dotted name)",
        "dataset._target_=5 (not a dotted name)"]


def test_builtins_are_the_targets_of_our_config_files():
    found = trust.builtin_targets()
    assert {"trainer_run.models.MLP", "trainer_run.optimizers.Adam", "trainer_run.data.spirals",
            "trainer_run.schedulers.CosineScheduler"} <= found
    assert all(t.startswith("trainer_run.") for t in found)


def test_signature_is_the_users_own(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "alice"))
    data = trust.canonical({"model": {"_target_": "my.Model"}})
    signature = trust.sign(data)
    key = tmp_path / "alice" / "trainer-run" / "key"
    assert key.stat().st_mode & 0o777 == 0o600 and (key.parent.stat().st_mode & 0o777) == 0o700
    assert trust.signed_by_me(data, signature)
    assert not trust.signed_by_me(data + b" ", signature)
    trust.check({"model": {"_target_": "my.Model"}}, data, signature, "run r")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "bob"))
    assert not trust.signed_by_me(data, signature)
    with pytest.raises(ConfigError, match=r"run r names code outside trainer-run "
                                          r"\(model._target_=my.Model\).*trust=true"):
        trust.check({"model": {"_target_": "my.Model"}}, data, signature, "run r")
    trust.check({"model": {"_target_": "my.Model"}}, data, signature, "run r", trusted=True)
    trust.check({"model": {"_target_": "trainer_run.models.MLP"}}, data, None, "run r")


# -- load_model --------------------------------------------------------------------------------

def test_load_model_never_runs_a_planted_target(folder, tmp_path, monkeypatch):
    """A payload in any section of .hydra/config.yaml: load_model refuses the sections it
    builds from (model, backend; precision in older runs) and never reads the others; no
    payload runs either way."""
    keys = tmp_path / "keys"
    run = folder / "run"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(keys))
    trainer_run.train(QUICK, run_dir=run)
    monkeypatch.syspath_prepend(str(folder))
    marker = tmp_path / "PWNED"
    path = run / ".hydra" / "config.yaml"
    original = path.read_text()
    for index, section in enumerate([*SECTIONS, "precision"]):
        payload = payloads(marker)[index % 3]
        config = yaml.safe_load(original)
        plant(config, section, payload)
        path.write_text(yaml.safe_dump(config))
        if section in ("model", "backend", "precision"):
            with pytest.raises(ConfigError, match=f"{section}._target_={payload['_target_']}"):
                load_model(run)
        else:
            assert type(load_model(run).model).__name__ == "MLP"
        assert not marker.exists(), section


def test_load_model_of_another_users_run_needs_trust(folder, tmp_path, monkeypatch):
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    run = folder / "run"
    monkeypatch.chdir(folder)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(alice))
    trainer_run.train([*QUICK, "+model._target_=my_models.Tiny"], run_dir=run)
    monkeypatch.syspath_prepend(str(folder))
    assert type(load_model(run).model).__name__ == "Tiny"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(bob))
    with pytest.raises(ConfigError, match="my_models.Tiny"):
        load_model(run)
    assert type(load_model(run, trust=True).model).__name__ == "Tiny"
    assert not any(p.name == "key" for p in run.rglob("*"))  # the key never enters a run


# -- several processes making the key ----------------------------------------------------------


def test_processes_making_the_key_at_once_all_sign_with_the_same_one(tmp_path):
    """Eight processes start on a machine without a key: one key is made, whole, and every
    process's signature of the same data is the same."""
    code = ("from trainer_run.runs import trust; import sys; "
            "sys.stdout.write(trust.sign(b'data') or 'none')")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    started = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                text=True) for _ in range(8)]
    signatures = {p.communicate(timeout=60)[0] for p in started}
    assert len(signatures) == 1 and signatures.pop().startswith("hmac-sha256:")
    assert [p.name for p in (tmp_path / "cfg" / "trainer-run").iterdir()] == ["key"]
