"""A run folder is written only inside itself, never through a symbolic link (issue 36, item 2),
and what a command reads in a run never leads outside it (item 19: ``checkpoints/best``).

Each test prepares a run folder as an adversary would: a file or folder of it replaced by a
link to a file of the user's (``home/notes.txt``), to a folder of theirs (``sentinel/``), or
into another run of theirs (``other/``), then runs the commands on it. Each must end with
exit 2 and one ``error:`` line naming the planted link, and nothing outside the run may
change (content and modification time).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_folders import command, copy_run, error_lines, load_model_script, make_run, snapshot


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("trained")
    keys = base / "keys"
    return make_run(base, keys, "logger=[jsonl,csv,tensorboard]"), keys


@pytest.fixture()
def world(tmp_path, trained):
    """The user's files (``home/notes.txt``, ``sentinel/``, their run ``other/``) and the
    adversary's run folder ``planted/``, a copy of a trained run."""
    run, keys = trained
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("the user's notes\n")
    os.utime(home / "notes.txt", ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    (tmp_path / "sentinel").mkdir()
    (tmp_path / "sentinel" / "kept.txt").write_text("kept\n")
    copy_run(run, tmp_path / "other")
    world = SimpleNamespace(keys=keys, root=tmp_path, notes=home / "notes.txt",
                            sentinel=tmp_path / "sentinel", other=tmp_path / "other",
                            planted=copy_run(run, tmp_path / "planted"))
    world.outside = lambda: {name: snapshot(tmp_path / name) for name in ("home", "sentinel", "other")}
    return world


def plant(link: Path, target: Path) -> None:
    """Replaces the file or folder ``link`` (made if missing) by a symbolic link to ``target``."""
    if link.is_dir() and not link.is_symlink():
        for path in sorted(link.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        link.rmdir()
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target)


def refused(done, named: Path) -> None:
    """``done`` ended with exit 2 and one ``error:`` line that names ``named``."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done)
    assert len(lines) == 1 and str(named) in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def resume(world, *overrides):
    return command("trainer-run", f"resume={world.planted}", *overrides, keys=world.keys,
                   cwd=world.root)


def evaluate(world, *overrides):
    return command("trainer-eval", world.planted, "split=val", *overrides, keys=world.keys,
                   cwd=world.root)


def load(world, checkpoint=None):
    return command("python", load_model_script(world.planted, checkpoint), keys=world.keys,
                   cwd=world.root)


# -- writes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    ".lock", "summary.json", "model.npz", "model_best.npz", "metrics.jsonl", "metrics.csv",
    "data.json", "checkpoints/latest", "checkpoints/best", "checkpoints/iter_00000003/state.json",
    ".hydra/config.sig"])
@pytest.mark.parametrize("iterations", [6, 9], ids=["nothing-to-do", "trains-on"])
def test_a_file_linked_to_a_users_file_is_refused_by_resume_and_the_file_is_untouched(
        world, name, iterations):
    plant(world.planted / name, world.notes)
    before = world.outside()
    done = resume(world, f"trainer.max_iterations={iterations}")
    refused(done, world.planted / name)
    assert world.outside() == before
    assert world.notes.read_text() == "the user's notes\n"


@pytest.mark.parametrize("name", ["checkpoints", ".hydra", "tensorboard",
                                  "checkpoints/iter_00000006"])
def test_a_folder_linked_to_a_users_folder_is_refused_by_resume(world, name):
    """A folder of the run linked to a folder of the user's (``.hydra`` to their own run's
    record, which makes the folder look like a run of theirs)."""
    plant(world.planted / name, world.other / name if name == ".hydra" else world.sentinel)
    before = world.outside()
    refused(resume(world, "trainer.max_iterations=9"), world.planted / name)
    assert world.outside() == before


def test_eval_linked_to_a_users_folder_is_refused_by_trainer_eval(world):
    plant(world.planted / "eval", world.sentinel)
    before = world.outside()
    refused(evaluate(world), world.planted / "eval")
    assert world.outside() == before
    assert sorted(p.name for p in world.sentinel.iterdir()) == ["kept.txt"]


# -- reads that would lead outside the run (item 19) -----------------------------------------------

@pytest.mark.parametrize("named", ["relative", "absolute"])
def test_a_best_that_names_another_runs_checkpoint_is_refused(world, named):
    """``checkpoints/best`` naming a checkpoint of another run is refused by load_model and
    trainer-eval, in one line naming the file, instead of loading the other run's weights."""
    other = world.other / "checkpoints" / "iter_00000006"
    best = world.planted / "checkpoints" / "best"
    best.write_text(f"{os.path.relpath(other, best.parent) if named == 'relative' else other}\n")
    before = world.outside()
    refused(load(world), best)
    refused(load(world, str(best)), best)
    refused(evaluate(world), best)
    assert world.outside() == before


@pytest.mark.parametrize("name, which", [
    ("checkpoints", "best"), ("checkpoints/iter_00000006", "best"), ("checkpoints/best", "best"),
    ("model.npz", "last"), (".hydra", "best"), ("data.json", "best")])
def test_a_link_into_another_run_is_refused_by_load_model_and_trainer_eval(world, name, which):
    plant(world.planted / name, world.other / name)
    refused(load(world, which), world.planted / name)
    refused(evaluate(world, f"checkpoint={which}"), world.planted / name)


@pytest.mark.parametrize("name", ["checkpoints", "checkpoints/iter_00000006"])
def test_resume_never_writes_into_the_run_a_link_leads_to(world, name):
    """A run whose checkpoints (or newest checkpoint) link into another run of the user's:
    resuming it, by the run or by the checkpoint, refuses, and the other run stays as it was
    (it would otherwise be continued and rewritten)."""
    plant(world.planted / name, world.other / name)
    before = world.outside()
    refused(resume(world, "trainer.max_iterations=9"), world.planted / name)
    checkpoint = world.planted / "checkpoints" / "iter_00000006"
    done = command("trainer-run", f"resume={checkpoint}", "trainer.max_iterations=9",
                   keys=world.keys, cwd=world.root)
    refused(done, world.planted / name)
    assert world.outside() == before


def test_a_latest_that_leads_outside_the_run_is_refused(world):
    latest = world.planted / "checkpoints" / "latest"
    latest.write_text("../../other/checkpoints/iter_00000006\n")
    before = world.outside()
    refused(resume(world, "trainer.max_iterations=9"), latest)
    assert world.outside() == before
