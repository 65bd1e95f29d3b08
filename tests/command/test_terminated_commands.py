"""SIGTERM to ``trainer-eval`` or ``trainer-export`` while it works (cli/commands.py): one
``error:`` line and status 143 (128 + SIGTERM), as Ctrl-C gives one line and 130; nothing is
written."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

WAITING = """
import sys, time
from trainer_run.runner import trained
from trainer_run.cli import {module} as command

def waiting(*args, **kwargs):
    sys.stderr.write("loading\\n")
    sys.stderr.flush()
    time.sleep(60)

trained.load_model = waiting
command.main([sys.argv[1]])
"""


@pytest.mark.parametrize("module", ["evaluate", "export"])
def test_sigterm_while_a_command_works_is_one_line_and_status_143(tmp_path, module):
    run = tmp_path / "run"
    run.mkdir()
    started = subprocess.Popen([sys.executable, "-c", WAITING.format(module=module), str(run)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert started.stderr.readline() == "loading\n"
        started.send_signal(signal.SIGTERM)
        out, err = started.communicate(timeout=30)
    finally:
        started.kill()
    assert (started.returncode, out, err) == (143, "", "error: stopped by SIGTERM\n")
    assert sorted(run.iterdir()) == []
