"""A standard output whose reader leaves (``trainer-eval RUN | head -1``, ``| head -0``): the
first line is there, the record or file is written all the same, no traceback, status 0
(cli/commands.py, shared by trainer-eval, trainer-export and trainer-report)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy
import pytest
from run_folders import environment, make_run

COMMANDS = {"trainer-eval": ("trainer_run.cli.evaluate", "split=val"),
            "trainer-export": ("trainer_run.cli.export",),
            "trainer-report": ("trainer_run.cli.report_command", "--plot", "comparison.png")}
FIRST = {"trainer-eval": "val split: 40 examples; best weights, iteration 6 ",
         "trainer-export": "written: ", "trainer-report": "run: objective val/loss (min)"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipes")
    return make_run(folder, folder / "keys")


def _cleared(run, name):
    """Removes what ``name`` writes in ``run`` (or beside it); the paths it writes, once done."""
    if name == "trainer-report":
        (run.parent / "comparison.png").unlink(missing_ok=True)
        return lambda: [run.parent / "comparison.png"]
    folder = run / ("eval" if name == "trainer-eval" else "export")
    shutil.rmtree(folder, ignore_errors=True)
    return lambda: sorted(folder.iterdir()) if folder.is_dir() else []


def _started(run, name, stdout):
    module, *arguments = COMMANDS[name]
    return subprocess.Popen([sys.executable, "-m", module, str(run), *arguments], cwd=run.parent,
                            env=environment(run.parent / "keys"), stdout=stdout,
                            stderr=subprocess.PIPE, text=True)


def _check_done(run, name, written) -> None:
    paths = written()
    assert len(paths) == 1 and paths[0].is_file(), paths
    if name == "trainer-eval":
        assert json.loads(paths[0].read_text())["split"] == "val"  # whole
    elif name == "trainer-export":
        assert paths[0].name == "model_best_iter6.npz" and numpy.load(paths[0]).files
    else:
        assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", COMMANDS)
def test_a_reader_that_closes_the_pipe_before_any_line_loses_no_work(trained, name):
    written = _cleared(trained, name)
    read, write = os.pipe()
    os.close(read)  # | head -0: the first write finds no reader
    process = _started(trained, name, write)
    os.close(write)
    _, err = process.communicate(timeout=120)
    assert (process.returncode, err) == (0, ""), err
    _check_done(trained, name, written)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_reader_that_takes_one_line_gets_it_and_the_work_is_done(trained, name):
    written = _cleared(trained, name)
    process = _started(trained, name, subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()  # | head -1
    err = process.stderr.read()
    assert process.wait(timeout=120) == 0 and err == "", err
    assert first.startswith(FIRST[name]), first
    _check_done(trained, name, written)
