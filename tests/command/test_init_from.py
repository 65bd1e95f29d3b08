"""``init_from=<run>`` from the command line (runner/fine_tune.py): a string that is text in
the source run (an escaped ``\\${oc.env:...}``) is the same text in the new run's model and
config, through ``trainer-run``, ``debug=lr_find`` and ``trainer_run.train``: this user's
environment variable is never read, and its value is in no file the new run writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from run_folders import QUICK, environment, snapshot

SECRET = "hunter2-never-in-a-run"


TEXT = "a ${oc.env:SECRET_FOR_TEST} b"
"""What the stranger's model argument holds once its config is read as data."""


TAGGED = '''
from trainer_run.models import Linear, Model


class Tagged(Model):
    def __init__(self, in_size, out_size, backend, tag="plain"):
        print("tag:", tag)
        self.tag = tag
        self.l1 = Linear(in_size, out_size, backend)

    def forward(self, x):
        return self.l1(x)
'''


TRAIN_API = ("import sys, trainer_run\n"
             "trainer_run.train(sys.argv[2:], run_dir=sys.argv[1])\n")


def _console(program: str) -> str:
    return str(Path(sys.executable).parent / program)


def _user(folder: Path, *argv) -> subprocess.CompletedProcess:
    """A command of the user whose key is in ``folder/keys``, run in ``folder`` with
    ``SECRET_FOR_TEST`` and ``ACTIVATION_FOR_TEST`` in the environment."""
    env = {**environment(folder / "keys"), "SECRET_FOR_TEST": SECRET, "ACTIVATION_FOR_TEST": "relu"}
    return subprocess.run([str(a) for a in argv], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def _edit_model(run: Path, key: str, value: str) -> None:
    """Sets ``model.<key>`` in the run's ``.hydra/config.yaml`` (its signature no longer
    matches: a stranger's run)."""
    path = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"][key] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """This user's folder: ``tagged_models.py``, their key, and two strangers' runs whose model
    holds an escaped ``${oc.env:...}``: ``tagged`` (an argument of the user's own model class)
    and ``mlp`` (the built-in MLP's activation)."""
    folder = tmp_path_factory.mktemp("fine_tune").resolve()
    (folder / "tagged_models.py").write_text(TAGGED)
    for name, model in (("tagged", ["+model._target_=tagged_models.Tagged", "+model.tag=mine"]),
                        ("mlp", [])):
        done = _user(folder, _console("trainer-run"), *QUICK, *model, f"hydra.run.dir={name}")
        assert done.returncode == 0, done.stderr
    _edit_model(folder / "tagged", "tag", "a \\${oc.env:SECRET_FOR_TEST} b")
    _edit_model(folder / "mlp", "activation", "\\${oc.env:ACTIVATION_FOR_TEST}")
    return folder


def _nowhere(folder: Path) -> None:
    found = [p for p in folder.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert found == []


@pytest.mark.parametrize("how", ["trainer-run", "lr_find", "train"])
def test_an_escaped_interpolation_in_a_strangers_model_stays_text(folder, how):
    out = folder / f"new-{how}"
    common = ["init_from=tagged", "trust=true", "dataset.size=200", "trainer.progress=false"]
    argv = {"trainer-run": [_console("trainer-run"), *common, "trainer.max_iterations=3",
                            f"hydra.run.dir={out}"],
            "lr_find": [_console("trainer-run"), *common, "debug=lr_find", f"hydra.run.dir={out}"],
            "train": [sys.executable, "-P", "-c", TRAIN_API, out, *common,
                      "trainer.max_iterations=3"]}[how]
    before = snapshot(folder / "tagged")
    done = _user(folder, *argv)
    assert done.returncode == 0, done.stderr
    assert snapshot(folder / "tagged") == before
    assert f"tag: {TEXT}\n" in done.stdout  # what the model was built with
    assert SECRET not in done.stdout + done.stderr
    _nowhere(out)
    if how != "lr_find":  # the new run's record keeps the text escaped, as the stranger's did
        saved = yaml.safe_load((out / ".hydra" / "config.yaml").read_text())["model"]["tag"]
        assert saved == "a \\${oc.env:SECRET_FOR_TEST} b"
        assert OmegaConf.to_container(OmegaConf.create({"tag": saved}), resolve=True)["tag"] == TEXT


def test_a_builtin_models_escaped_interpolation_is_refused_as_the_text_it_is(folder):
    """The MLP's ``activation`` of ``\\${oc.env:ACTIVATION_FOR_TEST}`` (which holds ``relu``)
    is the name ``${oc.env:ACTIVATION_FOR_TEST}``, unknown: one line, no run."""
    out = folder / "new-mlp"
    done = _user(folder, _console("trainer-run"), "init_from=mlp", *QUICK, f"hydra.run.dir={out}")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "error: model.activation='${oc.env:ACTIVATION_FOR_TEST}' is unknown; choose one of relu, "
        "leaky_relu, tanh, sigmoid, gelu"], done.stderr
    assert not out.exists()
