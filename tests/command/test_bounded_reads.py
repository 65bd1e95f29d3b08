"""A run folder from anyone cannot exhaust memory or time (issue 36, item 4), as the commands
meet it: each command (``trainer-eval``, ``trainer-report``, ``load_model``, a resume) runs on
a run folder prepared as an adversary would (nested YAML aliases, a file that is a device or a
FIFO, a sparse file of gigabytes), with at most 2 GiB of address space and 10 seconds: it ends
in time, holding under 1 GiB, with exit 2 and one ``error:`` line naming the planted file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from run_folders import RESIDENT, command, copy_run, error_lines, load_model_script, make_run

from tests.storage.test_reading import laughs

SECONDS = 10


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("trained")
    keys = base / "keys"
    return make_run(base, keys), keys


@pytest.fixture()
def planted(tmp_path, trained):
    return copy_run(trained[0], tmp_path / "planted")


@pytest.fixture()
def keys(trained):
    return trained[1]


def ends_in_time_refusing(done, named: Path, *words: str) -> None:
    assert done.elapsed < SECONDS and done.peak < RESIDENT
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done)
    assert len(lines) == 1 and str(named) in lines[0], done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert "Traceback" not in done.stderr


def run(name: str, planted: Path, keys: Path, *arguments):
    """``name`` (trainer-eval, trainer-report, load_model, resume) on the run ``planted``."""
    cwd = planted.parent
    if name == "load_model":
        return command("python", load_model_script(planted), keys=keys, cwd=cwd, timeout=SECONDS)
    if name == "resume":
        return command("trainer-run", f"resume={planted}", "trainer.max_iterations=9",
                       *arguments, keys=keys, cwd=cwd, timeout=SECONDS)
    if name == "trainer-report":
        return command(name, planted, "--plot", cwd / "comparison.png", keys=keys, cwd=cwd,
                       timeout=SECONDS)
    return command(name, planted, "split=val", *arguments, keys=keys, cwd=cwd, timeout=SECONDS)


@pytest.mark.parametrize("merge", [False, True], ids=["lists", "merges"])
@pytest.mark.parametrize("name", ["trainer-eval", "load_model", "resume"])
def test_a_config_of_nested_aliases_is_refused_before_it_is_expanded(planted, keys, name, merge):
    config = planted / ".hydra" / "config.yaml"
    config.write_text(laughs(merge))
    assert len(config.read_bytes()) < 3000
    if name == "resume":  # a run with no checkpoint is started again from its recorded config
        for path in sorted((planted / "checkpoints").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    ends_in_time_refusing(run(name, planted, keys), config, "alias")


def test_overrides_of_nested_aliases_are_refused_by_trainer_report(planted, keys):
    overrides = planted / ".hydra" / "overrides.yaml"  # a list, as Hydra writes it
    overrides.write_text("".join(f"- {line.split(': ', 1)[1]}\n" for line in laughs().splitlines()))
    (planted / "summary.json").unlink()  # an unfinished run is shown by its overrides
    ends_in_time_refusing(run("trainer-report", planted, keys), overrides, "alias")


@pytest.mark.parametrize("name, file", [
    ("trainer-report", "summary.json"), ("trainer-report", "metrics.jsonl"),
    ("load_model", "summary.json"), ("load_model", "data.json"),
    ("load_model", ".hydra/config.yaml"), ("load_model", "checkpoints/best"),
    ("trainer-eval", "data.json"), ("trainer-eval", ".hydra/config.yaml"),
    ("resume", "checkpoints/latest"), ("resume", "checkpoints/iter_00000006/checksums.json"),
    ("resume", "checkpoints/iter_00000006/state.json")])
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_run_file_that_is_a_device_or_a_fifo_is_refused_at_once(planted, keys, name, file,
                                                                   special):
    path = planted / file
    path.unlink()
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(special)
    ends_in_time_refusing(run(name, planted, keys), path)


@pytest.mark.parametrize("name, file, size", [
    ("trainer-report", "summary.json", 5 << 30), ("load_model", "summary.json", 5 << 30),
    ("trainer-report", "metrics.jsonl", 3 << 30), ("load_model", ".hydra/config.yaml", 1 << 30),
    ("trainer-eval", "data.json", 1 << 30), ("load_model", "checkpoints/best", 1 << 20)])
def test_a_run_file_larger_than_its_kind_may_be_is_refused_unread(planted, keys, name, file, size):
    """A sparse file: gigabytes that cost the adversary nothing to make."""
    path = planted / file
    with open(path, "r+b") as f:
        f.truncate(size)
    ends_in_time_refusing(run(name, planted, keys), path, "more than the")
