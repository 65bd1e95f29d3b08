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

TINY = ("trainer.max_iterations=4", "trainer.eval_interval=2", "trainer.log_interval=2",
        "trainer.checkpoint_interval=2")


def _eval(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from trainer_run.cli.evaluate import main; main()",
                           *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def _evals(run) -> list:
    """The evaluations ``trainer-eval`` wrote into ``run``."""
    return sorted((run / "eval").glob("*.json"))


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
    from trainer_run import console
    from trainer_run.cli import failure

    failure.fail_line(f"bad {text}")
    console.warn(f"odd {text}")
    console.say(f"said {text}")
    console.inform(f"plain {text}\nhint: hinted {text}\nnote: noted {text}")
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


# -- trust: a boolean on every command line and in load_model -----------------------------------
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run (of trainer-run's own model, which loads from anyone)."""
    out = tmp_path_factory.mktemp("strict") / "run"
    done = run_cli(*TINY, f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    return out


NOT_BOOLEANS = [("yes", "'yes'"), ("on", "'on'"), ("1", "1"), ("y", "'y'"), ("'true'", "'true'"),
                ("maybe", "'maybe'")]


@pytest.mark.parametrize("value, shown", NOT_BOOLEANS)
def test_trust_that_is_not_true_or_false_is_refused_alike_by_every_command(run, tmp_path, value, shown):
    expected = f"error: trust must be true or false, got {shown}"
    before = _evals(run)
    assert _one_error(run_cli(*TINY, f"trust={value}", f"hydra.run.dir={tmp_path / 'new'}")) == expected
    assert _one_error(run_cli(f"resume={run}", f"trust={value}")) == expected
    assert _one_error(_eval(run, f"trust={value}", "split=val")) == expected
    assert not (tmp_path / "new").exists() and _evals(run) == before


@pytest.mark.parametrize("value", ["true", "True", "FALSE", "false"])
def test_trust_true_or_false_in_any_case_is_taken_by_every_command(run, value):
    done = _eval(run, f"trust={value}", "split=val")
    assert done.returncode == 0, done.stderr
    assert run_cli(f"resume={run}", f"trust={value}").returncode == 0


@pytest.mark.parametrize("value", ["false", "true", "False", 0, 1, None, numpy.bool_(True), [True]])
def test_load_model_takes_trust_as_a_bool_only(run, value):
    from trainer_run import load_model

    with pytest.raises(ConfigError) as refused:
        load_model(run, trust=value)
    assert str(refused.value) == (f"trust must be True or False (a bool), got {value!r}; "
                                  "load_model(run, trust=True) trusts the run")
    assert load_model(run, trust=False).model is not None


# -- trainer-eval: no empty value, split=all of any size ---------------------------------------
@pytest.mark.parametrize("argument, says", [
    ("split=", "give split=test, val, train, all (left out: test)"),
    ("checkpoint=", "give checkpoint=best, checkpoint=last, a checkpoint directory or an .npz "
                    "file (left out: best when the run has one)"),
    ("dataset=", "give dataset=NAME, one of our dataset options (left out: the run's own data)"),
    ("trust=", "give trust=true or trust=false (left out: false)"),
    ("split= ", "give split=test, val, train, all (left out: test)"),
])
def test_an_empty_value_of_trainer_eval_is_one_line_saying_what_it_takes(run, argument, says):
    key, before = argument.split("=")[0], _evals(run)
    assert _one_error(_eval(run, argument)) == f"error: {key}= is empty; {says}"
    assert _evals(run) == before


@pytest.fixture(scope="module")
def file_run(tmp_path_factory):
    """A run trained on an .npz of 200 examples (batch size 50), and the folder it ran in."""
    folder = tmp_path_factory.mktemp("npz")
    rng = numpy.random.default_rng(0)
    numpy.savez(folder / "train.npz", x=rng.normal(size=(200, 4)).astype("float32"),
                y=rng.integers(0, 3, 200))
    done = run_cli("dataset=npz", "dataset.path=train.npz", *TINY, f"hydra.run.dir={folder / 'run'}",
                   cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize("size", [1, 2, 7, 40, 62, 63, 130])
def test_split_all_measures_every_example_of_a_file_of_any_size(file_run, size):
    """The README's example failed below 63 examples: the run's batch size (50) was checked
    against the 80% kept for training, and one example could not be split at all."""
    rng = numpy.random.default_rng(size)
    x, y = rng.normal(size=(size, 4)).astype("float32"), rng.integers(0, 3, size)
    path = file_run / f"new{size}.npz"
    numpy.savez(path, x=x, y=y)
    before = _evals(file_run / "run")
    done = _eval(file_run / "run", f"dataset.path={path}", "dataset.test_path=null", "split=all")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"all split: {size} examples;")
    [new] = set(_evals(file_run / "run")) - set(before)
    written = json.loads(new.read_text())
    assert written["examples"] == size and written["split"] == "all"
    from trainer_run import load_model

    predicted = load_model(file_run / "run").predict(x).argmax(axis=1)
    assert written["metrics"]["all/accuracy"] == pytest.approx(float((predicted == y).mean()))
