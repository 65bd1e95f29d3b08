"""The Python API (trainer_run.train / trainer_run.resume, runner/python_api.py) against the
command: the same overrides give the same record and the same model.npz, to the bit, from a
plain Python process and from ``trainer-run``; a resume from Python continues as the command's
straight run; bad input raises the command's one line; a user's config folder works as
``--config-dir`` does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy
import pytest
from helpers import load_npz, run_cli

import trainer_run
from trainer_run.errors import JobFailed

SMALL = ["trainer.max_iterations=30", "trainer.eval_interval=10", "trainer.checkpoint_interval=10",
         "optimizer=sgd", "optimizer.learning_rate=0.1", "dataset.size=400"]


def python(code: str, cwd) -> subprocess.CompletedProcess:
    """Runs ``code`` in a plain Python process (no pytest, no command)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_train_from_python_is_the_command_to_the_bit(tmp_path):
    done = python(f"""
        import trainer_run
        run = trainer_run.train({SMALL!r}, run_dir={str(tmp_path / 'api')!r})
        print(run.status, run.summary["iteration"])
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "completed 30"
    assert "run directory:" in done.stdout  # the command's console output
    command = run_cli(*SMALL, f"hydra.run.dir={tmp_path / 'cli'}", cwd=tmp_path)
    assert command.returncode == 0, command.stderr
    api, cli = tmp_path / "api", tmp_path / "cli"
    assert (api / "model.npz").read_bytes() == (cli / "model.npz").read_bytes()
    for name in ("config.yaml", "overrides.yaml"):
        assert (api / ".hydra" / name).read_bytes() == (cli / ".hydra" / name).read_bytes()
    assert (api / ".hydra" / "config.sig").is_file()  # signed with the user's key, as the command signs
    for checkpoint in ("iter_00000010", "iter_00000020", "iter_00000030"):
        a = load_npz(api / "checkpoints" / checkpoint / "arrays.npz")
        c = load_npz(cli / "checkpoints" / checkpoint / "arrays.npz")
        assert a.keys() == c.keys() and all(numpy.array_equal(a[k], c[k]) for k in a)


def test_resume_from_python_continues_bit_for_bit(tmp_path):
    first = ["trainer.max_iterations=20", *SMALL[1:]]
    run = trainer_run.train(first, run_dir=tmp_path / "api")
    assert (run.status, run.summary["iteration"]) == ("completed", 20)
    again = trainer_run.resume(run.dir, ["trainer.max_iterations=30"])
    assert again.dir == run.dir and again.summary["iteration"] == 30
    whole = run_cli(*SMALL, f"hydra.run.dir={tmp_path / 'cli'}", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert (run.dir / "model.npz").read_bytes() == (tmp_path / "cli" / "model.npz").read_bytes()
    x = numpy.random.default_rng(0).normal(size=(5, 2)).astype("float32")
    ours = again.load_model("last").predict(x)
    theirs = trainer_run.load_model(tmp_path / "cli", "last").predict(x)
    assert numpy.array_equal(ours, theirs)


@pytest.mark.parametrize("overrides, line", [
    (["trainer.max_iteration=3"], "trainer.max_iteration is not a config key; did you mean "
                                  "trainer.max_iterations?"),
    (["optimizer=nosuch"], "optimizer=nosuch is not available; choose one of"),
    (["optimizer.learning_rate=abc"], "optimizer.learning_rate must be a number, got 'abc'"),
])
def test_bad_input_raises_the_commands_line_and_leaves_nothing(tmp_path, overrides, line):
    command = run_cli(*overrides, f"hydra.run.dir={tmp_path / 'cli'}", cwd=tmp_path)
    with pytest.raises(JobFailed) as raised:
        trainer_run.train(overrides, run_dir=tmp_path / "api" / "run")
    assert str(raised.value).startswith(line)
    assert command.stderr.strip() == f"error: {raised.value}"
    assert raised.value.exit_code == command.returncode == 2
    assert not (tmp_path / "api").exists()


def test_a_config_dir_of_the_users_is_the_commands_config_dir(tmp_path):
    conf = tmp_path / "conf" / "optimizer"
    conf.mkdir(parents=True)
    (conf / "slow.yaml").write_text("defaults:\n  - sgd\n  - _self_\nlearning_rate: 0.02\n")
    overrides = ["optimizer=slow", *SMALL[:3]]
    run = trainer_run.train(overrides, run_dir=tmp_path / "api", config_dir=tmp_path / "conf")
    command = run_cli("--config-dir", tmp_path / "conf", *overrides, f"hydra.run.dir={tmp_path / 'cli'}",
                      cwd=tmp_path)
    assert command.returncode == 0, command.stderr
    assert (run.dir / "model.npz").read_bytes() == (tmp_path / "cli" / "model.npz").read_bytes()
    assert "learning_rate: 0.02" in (run.dir / ".hydra" / "config.yaml").read_text()
