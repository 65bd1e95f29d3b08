"""Command lines a user types by mistake or in an unusual order: one line, exit 2, nothing
written, and where the line gives advice, the advice works."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from helpers import run_cli

QUICK = ("trainer.max_iterations=2", "trainer.progress=false", "dataset.size=200")


def one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_number_of_5000_digits_is_one_line(tmp_path):
    line = one_error(run_cli(f"optimizer.learning_rate={'1' * 5000}", f"hydra.run.dir={tmp_path / 'r'}"))
    assert "5000 digits" in line and "fewer digits" in line
    assert not (tmp_path / "r").exists()


def test_a_config_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    bad = tmp_path / "conf" / "model" / "bad.yaml"
    bad.write_bytes(b"_target_: trainer_run.models.MLP\n# \xff\xfe\nhidden_sizes: [8]\n")
    for extra in ((f"hydra.run.dir={tmp_path / 'r'}",), ("--help",)):
        line = one_error(run_cli("--config-dir", tmp_path / "conf", "model=bad", *extra))
        assert line == f"error: config file {bad} is not UTF-8 text (byte 35); save it as UTF-8"
    assert not (tmp_path / "r").exists()


def test_a_folder_name_too_long_for_the_system_is_one_line(tmp_path):
    line = one_error(run_cli(f"hydra.run.dir={tmp_path / ('x' * 300)}"))
    assert "File name too long" in line and "at most 255 bytes" in line
    assert list(tmp_path.iterdir()) == []


def test_the_quoting_advised_for_a_value_beyond_ascii_works(tmp_path):
    target = tmp_path / "ünï dir"
    line = one_error(run_cli(f"hydra.run.dir={target}", *QUICK))
    advised = line.split("inside quotes for the shell: ", 1)[1]
    assert advised == f"hydra.run.dir={shlex.quote(chr(34) + str(target) + chr(34))}"
    command = f"{shlex.quote(sys.executable)} -m trainer_run.cli {advised} {' '.join(QUICK)}"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (target / "summary.json").is_file()


def test_flags_may_come_between_overrides(tmp_path):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "tiny.yaml").write_text(
        "_target_: trainer_run.models.MLP\nhidden_sizes: [4]\n")
    result = run_cli("trainer.max_iterations=2", "--config-dir", tmp_path / "conf", "model=tiny",
                     "trainer.progress=false", "dataset.size=200", f"hydra.run.dir={tmp_path / 'r'}")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r" / "summary.json").is_file()
    assert "hidden_sizes:\n  - 4" in (tmp_path / "r" / ".hydra" / "config.yaml").read_text()


def test_a_target_that_is_not_callable_is_one_line(tmp_path):
    line = one_error(run_cli("+model._target_=os.sep", f"hydra.run.dir={tmp_path / 'r'}"))
    assert line == ("error: model._target_=os.sep is not callable (it is a str); name a class or "
                    "a function that builds the object")
    assert not (tmp_path / "r").exists()


def test_a_data_file_that_cannot_be_read_is_a_read_error_not_a_full_disk(tmp_path):
    """/proc/self/mem is a file whose reading fails (EIO): it was reported as "cannot write
    ...; free some space" with exit 4."""
    for arguments in (("dataset=csv", "dataset.path=/proc/self/mem"),
                      ("dataset=idx", "dataset.train_images=/proc/self/mem",
                       "dataset.train_labels=/proc/self/mem")):
        line = one_error(run_cli(*arguments, f"hydra.run.dir={tmp_path / 'r'}"))
        assert "/proc/self/mem cannot be read (Input/output error)" in line
    assert not (tmp_path / "r").exists()


def test_a_folder_given_for_a_file_and_a_pickled_array_are_named_as_they_are(tmp_path):
    import numpy

    line = one_error(run_cli("dataset=npz", f"dataset.path={tmp_path}", f"hydra.run.dir={tmp_path / 'r'}"))
    assert line == f"error: dataset.path={tmp_path} is a folder; give the path of a file in it"
    numpy.savez(tmp_path / "objects.npz", x=numpy.array([{"a": 1}], dtype=object), y=numpy.arange(1))
    line = one_error(run_cli("dataset=npz", f"dataset.path={tmp_path / 'objects.npz'}",
                             f"hydra.run.dir={tmp_path / 'r'}"))
    assert "never unpickles" in line and "allow_pickle" not in line


FLOAT_LABELS = '''
import numpy
from trainer_run import functions as F
from trainer_run.models import Linear, Module


def load():
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(200, 4)).astype(numpy.float32)
    return x, (x[:, 0] > 0).astype(numpy.float32)   # class ids, stored as floats


class Classifier(Module):
    def __init__(self, in_size, backend):
        self.fc = Linear(in_size, 2, backend)

    def __call__(self, x, t):
        return F.softmax_cross_entropy(self.fc(x), t)
'''


def test_float_labels_reaching_a_classification_loss_say_which_task_to_set(tmp_path):
    (tmp_path / "floaty.py").write_text(FLOAT_LABELS)
    result = subprocess.run([sys.executable, "-m", "trainer_run.cli", "+dataset._target_=floaty.load",
                             "+model._target_=floaty.Classifier", "trainer.max_iterations=2",
                             "trainer.progress=false", "hydra.run.dir=r"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]  # after the data's hint line
    assert last.startswith("error: softmax_cross_entropy takes integer class ids")
    assert last.endswith("set dataset.task=classification, or give integer labels")


def test_trainer_report_on_a_summary_nested_too_deeply_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    result = subprocess.run([sys.executable, "-m", "trainer_run.cli.report_command", str(run)],
                            capture_output=True, text=True, timeout=120)
    assert one_error(result) == f"error: {run / 'summary.json'} is nested too deeply to be a run summary"


def test_version_names_trainer_run_and_hydra(tmp_path):
    from importlib.metadata import version

    import hydra
    result = run_cli("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"trainer-run {version('trainer-run')} (Hydra {hydra.__version__})"
    assert list(tmp_path.iterdir()) == []


def test_a_bare_info_flag_prints_hydra_info_with_or_without_overrides(tmp_path):
    """Hydra's --info takes an optional value; without one it is "all" (before, the override
    the command adds was read as its value and refused)."""
    from trainer_run.compose.argv import flags_first
    assert flags_first(["--info", "optimizer=adam"]) == ["--info", "all", "optimizer=adam"]
    assert flags_first(["optimizer=adam", "-i", "config"]) == ["-i", "config", "optimizer=adam"]
    for extra in ([], ["optimizer=adam"]):
        result = run_cli("--info", *extra, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "Installed Hydra Plugins" in result.stdout and "optimizer" in result.stdout


@pytest.mark.parametrize("flag", [["--cfg", "job"], ["--info", "config"]], ids=["cfg", "info"])
def test_showing_the_config_of_a_sweep_is_one_line(tmp_path, flag):
    """Hydra shows one run's config, and refuses -m beside it with a traceback of its own."""
    result = run_cli("-m", "optimizer=adam,sgd", *flag, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "error: --cfg and --info show the config of one run: drop -m/--multirun\n"
    assert list(tmp_path.iterdir()) == []


def test_a_sweeper_or_launcher_not_installed_is_one_line_with_its_extra():
    """Hydra's words when a plugin is missing (as a machine without the extra prints them)."""
    from trainer_run.console import describe

    def hydra_says(group, name):
        return Exception(f"In 'hydra/config': Could not find 'hydra/{group}/{name}'\n"
                         f"Available options in 'hydra/{group}':\n\tbasic\nConfig search path:\n"
                         "\tprovider=hydra, path=pkg://hydra.conf")
    assert describe(hydra_says("sweeper", "optuna")) == (
        'hydra/sweeper=optuna needs hydra-optuna-sweeper: pip install "trainer-run[sweep]"')
    assert describe(hydra_says("launcher", "joblib")) == (
        'hydra/launcher=joblib needs hydra-joblib-launcher: pip install "trainer-run[sweep]"')
    assert describe(hydra_says("launcher", "submitit_slurm")) == (
        'hydra/launcher=submitit_slurm needs hydra-submitit-launcher: pip install "trainer-run[slurm]"')
    assert describe(hydra_says("launcher", "ray")).startswith(
        "In 'hydra/config': Could not find 'hydra/launcher/ray'; Available options")
