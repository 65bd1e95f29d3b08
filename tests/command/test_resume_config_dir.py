"""Resuming a run whose options came from a config folder of the user's (``--config-dir``)
without passing the folder again (issue 36, item 17): one line naming the folder the run was
started with and the command that resumes it, instead of Hydra's ``Could not find``; nothing
of the run changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_cli, run_files

from tests.command.test_trust import command

MY_MODELS = '''
from trainer_run import functions as F
from trainer_run.models import Linear, Model


class Small(Model):
    def __init__(self, in_size, out_size, backend, hidden=4):
        self.l1 = Linear(in_size, hidden, backend)
        self.l2 = Linear(hidden, out_size, backend)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))
'''
QUIET = ("trainer.progress=false",)


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> Path:
    """A folder holding the user's module, its config folder ``conf`` (``model=mine``) and a
    run of 4 iterations started from it (``run``)."""
    folder = tmp_path_factory.mktemp("config_dir").resolve()
    (folder / "my_models.py").write_text(MY_MODELS)
    (folder / "conf" / "model").mkdir(parents=True)
    (folder / "conf" / "model" / "mine.yaml").write_text("_target_: my_models.Small\nhidden: 3\n")
    result = run_cli("--config-dir", "conf", "model=mine", "trainer.max_iterations=4",
                     "trainer.checkpoint_interval=4", "hydra.run.dir=run", *QUIET, cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder


def _copy(started: Path, tmp_path: Path) -> Path:
    shutil.copytree(started / "run", tmp_path / "run")
    shutil.copy(started / "my_models.py", tmp_path)
    return tmp_path


def _one_line(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Could not find" not in lines[0], result.stderr
    return lines[0]


@pytest.mark.parametrize("given", [(), ("--config-dir", "elsewhere")])
def test_a_resume_without_the_runs_config_folder_names_it(started, tmp_path, given):
    folder = _copy(started, tmp_path)
    (folder / "elsewhere" / "model").mkdir(parents=True)
    before = run_files(folder / "run")
    result = run_cli(*given, "resume=run", "trainer.max_iterations=8", *QUIET, cwd=folder)
    assert _one_line(result) == (f"error: the run chose model=mine from its config folder "
                                 f"{started / 'conf'}, which this command does not give; resume "
                                 f"it with: trainer-run --config-dir {started / 'conf'} resume=run")
    assert run_files(folder / "run") == before


def test_with_the_folder_the_run_resumes(started, tmp_path):
    folder = _copy(started, tmp_path)
    result = run_cli("--config-dir", started / "conf", "resume=run", "trainer.max_iterations=8",
                     *QUIET, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert "resumed from iteration 4" in result.stdout


def test_a_run_stopped_before_its_first_checkpoint_says_it_too(started, tmp_path):
    folder = _copy(started, tmp_path)
    shutil.rmtree(folder / "run" / "checkpoints")
    (folder / "run" / "summary.json").unlink()
    result = run_cli("resume=run", *QUIET, cwd=folder)
    assert _one_line(result).startswith(f"error: the run chose model=mine from its config folder "
                                        f"{started / 'conf'}, which this command does not give")


@pytest.mark.parametrize("checkpoints", [True, False])
def test_a_strangers_config_folder_is_never_printed(tmp_path, checkpoints):
    """Hydra's record (``.hydra/hydra.yaml``) is not signed: the folder it names in a stranger's
    run is not put into a command to paste (composing it would run its ``hydra.callbacks``)."""
    planted = tmp_path / "strangers-conf"
    (planted / "model").mkdir(parents=True)
    (planted / "model" / "theirs.yaml").write_text(
        "_target_: trainer_run.models.MLP\nhidden_sizes: [3]\n")
    started = command(tmp_path, tmp_path / "stranger", "--config-dir", planted, "model=theirs",
                      "trainer.max_iterations=4", "trainer.checkpoint_interval=4",
                      "hydra.run.dir=run", *QUIET, check_code=0)
    assert started.returncode == 0
    if not checkpoints:
        shutil.rmtree(tmp_path / "run" / "checkpoints")
        (tmp_path / "run" / "summary.json").unlink()
    before = run_files(tmp_path / "run")
    result = command(tmp_path, tmp_path / "user", "resume=run", *QUIET)
    line = _one_line(result)
    assert line == ("error: the run chose model=theirs from a config folder of yours, which this "
                    "command does not give; resume it with: trainer-run --config-dir DIR "
                    "resume=run, DIR being your folder that holds model/theirs.yaml")
    assert str(planted) not in result.stderr + result.stdout
    assert run_files(tmp_path / "run") == before
