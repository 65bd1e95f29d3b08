"""Values the user gives are taken strictly and shown as given: ``trust`` is a real boolean on
every command line and in ``load_model``; the console never turns a user's text into markup
or an emoji (``00:-1:00:00`` stays ``00:-1:00:00``); ``max_time``'s fields are never negative;
``trainer-eval``'s ``split=`` and ``checkpoint=`` are never empty, and ``split=all`` takes a
file of any size >= 1."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy
import pytest
from helpers import run_cli

from trainer_run.errors import ConfigError
from trainer_run.training.time_limit import seconds

TINY = ("trainer.max_iterations=4", "trainer.eval_interval=2", "trainer.log_interval=2",
        "trainer.checkpoint_interval=2")


def _eval(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from trainer_run.cli.evaluate import main; main()",
                           *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def _one_error(result: subprocess.CompletedProcess) -> str:
    """The command's only line on stderr, which must be an ``error:`` line with exit 2."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# -- the console shows the user's text as given -----------------------------------------------------
USER_TEXT = ["00:-1:00:00", "a :smile: b", ":thumbs_up: [bold]x[/bold]", "[red]not red[/]", "x:+1:y"]


@pytest.mark.parametrize("text", USER_TEXT)
def test_every_console_line_shows_the_users_text_as_given(text, capsys):
    from trainer_run.cli import report

    report.fail_line(f"bad {text}")
    report.warn(f"odd {text}")
    report.say(f"said {text}")
    report.inform(f"plain {text}\nhint: hinted {text}\nnote: noted {text}")
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"said {text}", f"plain {text}"]
    assert err.splitlines() == [f"error: bad {text}", f"warning: odd {text}", f"hint: hinted {text}",
                                f"note: noted {text}"]


def test_a_value_with_an_emoji_code_is_echoed_as_given_by_the_command(tmp_path):
    result = run_cli("trainer.max_time=00:-1:00:00", *TINY, f"hydra.run.dir={tmp_path / 'run'}")
    line = _one_error(result)
    assert "'00:-1:00:00'" in line and "\N{THUMBS DOWN SIGN}" not in line
    assert not (tmp_path / "run").exists()


def test_a_metric_name_and_a_run_path_are_shown_as_given_by_trainer_eval(tmp_path):
    run = tmp_path / ":smile: [bold]run"
    done = run_cli(*TINY, f"hydra.run.dir='{run}'")
    assert done.returncode == 0, done.stderr
    result = _eval(run, "split=val")
    assert result.returncode == 0, result.stderr
    assert f"({run}/model.npz)" in result.stdout or f"({run}/checkpoints/" in result.stdout
    assert "\N{SMILING FACE WITH OPEN MOUTH}" not in result.stdout


# -- max_time ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, field", [("00:-1:00:00", "hours is -1"), ("-2:00:00:00", "days is -2"),
                                          ("00:00:-30:00", "minutes is -30"),
                                          ("00:01:00:-5", "seconds is -5")])
def test_a_negative_field_of_max_time_is_refused_by_name(value, field):
    with pytest.raises(ConfigError) as refused:
        seconds(value)
    message = str(refused.value)
    assert message.startswith("max_time must be DD:HH:MM:SS of whole numbers >= 0")
    assert f"got {value!r} ({field})" in message and "\n" not in message


def test_a_negative_field_that_sums_to_a_positive_time_is_refused_too():
    """``00:01:-30:00`` adds up to 30 minutes: still a mistake, never a silent sum."""
    with pytest.raises(ConfigError, match=r"\(minutes is -30\)"):
        seconds("00:01:-30:00")
